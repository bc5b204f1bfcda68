package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
	"coregate/admin/store/storesync"
)

// etcdConfig is a traditional node on its embedded etcd.
func etcdConfig(port int) string {
	return fmt.Sprintf(`apisix:
  node_listen:
    - ip: 127.0.0.1
      port: %d
deployment:
  role: traditional
  role_traditional:
    config_provider: etcd
  admin:
    admin_listen:
      ip: 127.0.0.1
      port: %d
plugin_attr:
  prometheus:
    enable_export_server: false
nginx_config:
  worker_processes: 1
`, port, port+1)
}

// embeddedStore opens a store on the embedded etcd of the gateway whose
// config directory is dir, as another client would: its endpoints are in
// the data directory once it started.
func embeddedStore(t *testing.T, dir string) *etcdstore.Store {
	t.Helper()
	var urls struct{ Client string }
	eventually(t, 30*time.Second, func() error {
		b, err := os.ReadFile(filepath.Join(dir, etcdDataDir, "urls.json"))
		if err != nil {
			return err
		}
		return json.Unmarshal(b, &urls)
	})
	s, err := etcdstore.New(etcdstore.Options{Endpoints: []string{urls.Client}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// TestEmbeddedEtcdRoute: a node on its embedded etcd (the default when
// deployment.etcd.host is not written) serves a route written into etcd,
// drops it when it is deleted, and keeps a local copy of it.
func TestEmbeddedEtcdRoute(t *testing.T) {
	up := textUpstream(t, "hello from etcd")
	g := startSupervisor(t, "", etcdConfig, 1)
	c := newClient(t)
	if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 404 {
		t.Fatalf("empty store: GET /hello = %d, want 404", r.status)
	}
	s := embeddedStore(t, g.dir)
	ctx := context.Background()
	route := fmt.Sprintf(`{"id":"1","uri":"/hello","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up.addr())
	start := time.Now()
	if _, _, err := s.Put(ctx, "/apisix/routes/1", []byte(route), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 200 || r.body != "hello from etcd" {
			return fmt.Errorf("GET /hello = %d %q", r.status, r.body)
		}
		return nil
	})
	t.Logf("route proxied %v after its put", time.Since(start).Round(time.Millisecond))
	eventually(t, 10*time.Second, func() error {
		sp, err := storesync.ReadCache(filepath.Join(g.dir, storesync.CacheFile))
		if err != nil {
			return err
		}
		if len(sp.Routes) != 1 || sp.Routes[0].URI != "/hello" {
			return fmt.Errorf("local copy holds %d routes", len(sp.Routes))
		}
		return nil
	})
	if _, err := s.Delete(ctx, "/apisix/routes/1", 0); err != nil {
		t.Fatal(err)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 404 {
			return fmt.Errorf("deleted route: GET /hello = %d", r.status)
		}
		return nil
	})
}
