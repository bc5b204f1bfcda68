package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/admin/nodeconf"
	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
	"coregate/admin/store/storesync"
	"coregate/internal/e2e"
	"coregate/node/supervisor"
)

// etcdConfig is a traditional node on its embedded etcd, its Admin API on
// 127.0.0.1:adminPort with the admin key given (nothing: no key at all,
// "": one generated), its TLS listener on e2e.TLSPort(port).
func etcdConfig(adminPort int, keys ...string) func(port int) string {
	return func(port int) string {
		var ks strings.Builder
		if len(keys) > 0 {
			ks.WriteString("    admin_key:\n")
			for _, k := range keys {
				fmt.Fprintf(&ks, "      - name: admin\n        key: %q\n        role: admin\n", k)
			}
		}
		return fmt.Sprintf(`apisix:
  node_listen:
    - ip: 127.0.0.1
      port: %d
  enable_control: false
%sdeployment:
  role: traditional
  role_traditional:
    config_provider: etcd
  admin:
    admin_listen:
      ip: 127.0.0.1
      port: %d
%splugin_attr:
  prometheus:
    enable_export_server: false
nginx_config:
  worker_processes: 1
  error_log_level: info
`, port, e2e.SSLListen(port), adminPort, ks.String())
	}
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
	t.Parallel()
	up := textUpstream(t, "hello from etcd")
	g := startSupervisor(t, "", etcdConfig(freePort(t)), 1)
	c := newClient(t)
	if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 404 {
		t.Fatalf("empty store: GET /hello = %d, want 404", r.status)
	}
	s := embeddedStore(t, g.dir)
	ctx := context.Background()
	route := fmt.Sprintf(`{"id":"1","uri":"/hello","upstream":{"type":"roundrobin","nodes":{%q:1}}}`, up.Addr())
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

// TestEmbeddedEtcdIdle: a node started on its embedded etcd, which
// nobody writes to, reads the store once and then only follows it: its
// watch is not taken for a store gone (before, a watch from the revision
// after the read heard no progress notification from etcd 3.7, ended
// every 6–8 s as "unreachable", and the whole configuration was read
// again each time), and apisix_etcd_reachable stays 1.
func TestEmbeddedEtcdIdle(t *testing.T) {
	t.Parallel()
	mport := freePort(t)
	g := startSupervisor(t, "", withExport(etcdConfig(freePort(t)), mport), 1)
	c := newClient(t)
	const idle = 30 * time.Second
	for end := time.Now().Add(idle); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		if v, err := reachable(c, mport); v != "1" {
			t.Fatalf("apisix_etcd_reachable %q (%v) on an idle node, want 1", v, err)
		}
	}
	out := g.out.String()
	if n := strings.Count(out, `msg="config store read"`); n != 1 {
		t.Errorf("%d full reads of the store in %v idle, want the one at start", n, idle)
	}
	if strings.Contains(out, "unreachable") {
		t.Errorf("an idle node took its embedded etcd for unreachable")
	}
}

// cacheOrigin reads the revision and cluster id of the node's local copy
// once it holds routes routes.
func cacheOrigin(t *testing.T, dir string, routes int) (int64, uint64) {
	t.Helper()
	path := filepath.Join(dir, storesync.CacheFile)
	eventually(t, 10*time.Second, func() error {
		sp, err := storesync.ReadCache(path)
		if err != nil {
			return err
		}
		if len(sp.Routes) != routes {
			return fmt.Errorf("local copy holds %d routes, want %d", len(sp.Routes), routes)
		}
		return nil
	})
	rev, cluster, err := storesync.CacheOrigin(path)
	if err != nil {
		t.Fatal(err)
	}
	return rev, cluster
}

// embeddedEtcdNode starts a node of one worker on embedded etcd, with the
// legacy admin key, and returns it, a client, its Admin API, and route:
// the body of a route for uri to an upstream that answers text.
func embeddedEtcdNode(t *testing.T, text string) (*supGateway, *http.Client, adminAPI, func(uri string) string) {
	up := textUpstream(t, text)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	route := func(uri string) string {
		return fmt.Sprintf(`{"uri":%q,"upstream":{"nodes":{%q:1}}}`, uri, up.Addr())
	}
	return g, newClient(t), legacyAdmin(adminPort), route
}

// TestEmbeddedEtcdRestartOnCopy: a node started again on an embedded etcd
// that did not change meanwhile serves its local copy at once, its
// workers not waiting for etcd's objects to be decoded and checked, then
// checks them and follows etcd: a route put after the restart is served,
// and the copy written again holds it. The node is stopped as soon as its
// last change is served, within the second the local copy waits between
// two writes: it writes the copy of that change as it stops.
func TestEmbeddedEtcdRestartOnCopy(t *testing.T) {
	t.Parallel()
	g, c, admin, route := embeddedEtcdNode(t, "kept")
	// One change, served (its copy written at once), then another,
	// served within the second the copy waits before it is written again.
	for _, id := range []string{"1", "2"} {
		if r := admin.do(t, c, "PUT", "routes/"+id, route("/r"+id)); r.status != 201 {
			t.Fatalf("PUT route %s: %d %s", id, r.status, r.body)
		}
		eventually(t, 10*time.Second, func() error {
			if r := do(t, c, "GET", g.url("/r"+id), "", nil, nil); r.status != 200 {
				return fmt.Errorf("GET /r%s = %d", id, r.status)
			}
			return nil
		})
	}
	// No connection kept alive: the workers' drain ends at once, and the
	// copy is not written by then for its wait.
	c.CloseIdleConnections()

	g2 := g.restart(t, 1)
	g2.waitLog(`msg="config store at the revision of the local copy`, 1, 10*time.Second)
	rev, _ := cacheOrigin(t, g.dir, 2)
	for _, path := range []string{"/r1", "/r2"} {
		if r := do(t, c, "GET", g2.url(path), "", nil, nil); r.status != 200 || r.body != "kept" {
			t.Fatalf("after the restart: GET %s = %d %q", path, r.status, r.body)
		}
	}
	if r := admin.do(t, c, "PUT", "routes/3", route("/r3")); r.status != 201 {
		t.Fatalf("PUT route 3 after the restart: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g2.url("/r3"), "", nil, nil); r.status != 200 || r.body != "kept" {
			return fmt.Errorf("GET /r3 = %d %q", r.status, r.body)
		}
		return nil
	})
	if r3, _ := cacheOrigin(t, g.dir, 3); r3 <= rev {
		t.Errorf("local copy at revision %d after a change, want past %d", r3, rev)
	}
	if out := g2.out.String(); strings.Contains(out, "differ from the local copy") || strings.Contains(out, "invalid object") {
		t.Errorf("etcd's objects checked after the restart differ from the copy:\n%s", out)
	}
}

// TestEmbeddedEtcdMemberLost: a node whose embedded etcd lost its member/
// directory starts from its local copy, not from the empty store, says so
// at ERROR with both origins, keeps the copy as it was and refuses Admin
// API changes with a 503 that says how to accept the store; started with
// --accept-store-reset it serves the store as it is. (Before, it started
// with no route, answered 404 to everything, logged nothing and wrote the
// empty store over the copy.)
func TestEmbeddedEtcdMemberLost(t *testing.T) {
	t.Parallel()
	g, c, admin, route := embeddedEtcdNode(t, "kept")
	for _, id := range []string{"1", "2"} {
		if r := admin.do(t, c, "PUT", "routes/"+id, route("/r"+id)); r.status != 201 {
			t.Fatalf("PUT route %s: %d %s", id, r.status, r.body)
		}
	}
	rev, cluster := cacheOrigin(t, g.dir, 2)
	if cluster == 0 {
		t.Fatal("the local copy does not name its etcd cluster")
	}
	copyBefore, err := os.ReadFile(filepath.Join(g.dir, storesync.CacheFile))
	if err != nil {
		t.Fatal(err)
	}

	g.stopped.Store(true)
	g.stop()
	if err := os.RemoveAll(filepath.Join(g.dir, etcdDataDir, "member")); err != nil {
		t.Fatal(err)
	}
	g2 := g.restart(t, 1) // g stopped: only started again
	for _, path := range []string{"/r1", "/r2"} {
		if r := do(t, c, "GET", g2.url(path), "", nil, nil); r.status != 200 || r.body != "kept" {
			t.Fatalf("after member/ was lost: GET %s = %d %q, want the local copy's route", path, r.status, r.body)
		}
	}
	line := g2.LogLine(t, `level=ERROR msg="config store reset`, 10*time.Second)
	for k, want := range map[string]string{
		"copy_revision": strconv.FormatInt(rev, 10), "copy_cluster": strconv.FormatUint(cluster, 16),
		"copy_routes": "2", "store_routes": "0",
	} {
		if got := logField(line, k); got != want {
			t.Errorf("%s=%q in %q, want %q", k, got, line, want)
		}
	}
	if r, _ := strconv.ParseInt(logField(line, "store_revision"), 10, 64); r == 0 || r >= rev {
		t.Errorf("store_revision in %q, want one below %d", line, rev)
	}
	if sc := logField(line, "store_cluster"); sc == "" || sc == "unknown" || sc == strconv.FormatUint(cluster, 16) {
		t.Errorf("store_cluster in %q, want the rebuilt store's own", line)
	}
	r := admin.do(t, c, "PUT", "routes/3", route("/r3"))
	if r.status != 503 || !strings.Contains(r.body, "config store reset") || !strings.Contains(r.body, acceptResetFlag) {
		t.Fatalf("PUT into the reset store: %d %s, want 503 saying it was reset and how to accept it", r.status, r.body)
	}
	time.Sleep(2 * storesync.CacheEvery) // the copy would be written by now
	if b, err := os.ReadFile(filepath.Join(g.dir, storesync.CacheFile)); err != nil || string(b) != string(copyBefore) {
		t.Fatalf("the local copy changed while the store is refused (%v)", err)
	}

	// Accepted: the store as it is, empty, replaces the copy.
	g3 := g2.restart(t, 1, acceptResetFlag)
	g3.waitLog(`level=WARN msg="config store reset, accepted`, 1, 10*time.Second)
	if r := do(t, c, "GET", g3.url("/r1"), "", nil, nil); r.status != 404 {
		t.Fatalf("with %s: GET /r1 = %d, want 404 (the store is empty)", acceptResetFlag, r.status)
	}
	if r := admin.do(t, c, "PUT", "routes/3", route("/r3")); r.status != 201 {
		t.Fatalf("PUT with the store accepted: %d %s", r.status, r.body)
	}
	if r3, c3 := cacheOrigin(t, g.dir, 1); r3 >= rev || c3 == cluster {
		t.Fatalf("local copy at revision %d of %x, want the accepted store's", r3, c3)
	}
}

// TestEmbeddedEtcdDamaged: a node whose embedded etcd's database is
// garbage, or a file cut short, does not crash: it logs the file and what
// to do, serves its local copy, answers Admin API writes 503 and reports
// etcd unreachable. (Before, the supervisor died of a Go panic, or of
// SIGBUS for the file cut short, naming no file.)
func TestEmbeddedEtcdDamaged(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "cached")
	adminPort, mport := freePort(t), freePort(t)
	g := startSupervisor(t, "", exportEtcdConfig(adminPort, mport), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	body := fmt.Sprintf(`{"uri":"/c","upstream":{"nodes":{%q:1}}}`, up.Addr())
	if r := admin.do(t, c, "PUT", "routes/1", body); r.status != 201 {
		t.Fatalf("PUT route 1: %d %s", r.status, r.body)
	}
	cacheOrigin(t, g.dir, 1)
	g.stopped.Store(true)
	g.stop()

	db := filepath.Join(g.dir, etcdDataDir, "member", "snap", "db")
	good, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	garbage := make([]byte, len(good)/4)
	for i := range garbage {
		garbage[i] = byte(i*7 + i>>8)
	}
	for _, tc := range []struct {
		name string
		data []byte
	}{
		{"garbage", garbage},
		{"cut short", good[:3*os.Getpagesize()]}, // its meta pages, not the pages they count
	} {
		if err := os.WriteFile(db, tc.data, 0o600); err != nil {
			t.Fatal(err)
		}
		g = g.restart(t, 1)
		if r := do(t, c, "GET", g.url("/c"), "", nil, nil); r.status != 200 || r.body != "cached" {
			t.Fatalf("%s: GET /c = %d %q, want the local copy's route", tc.name, r.status, r.body)
		}
		line := g.LogLine(t, `level=ERROR msg="embedded etcd not started: its database is damaged`, 10*time.Second)
		if logField(line, "path") != db || !strings.Contains(logField(line, "remedy"), "backup") {
			t.Errorf("%s: the log line does not name %s and what to do: %s", tc.name, db, line)
		}
		if r := admin.do(t, c, "PUT", "routes/2", body); r.status != 503 || !strings.Contains(r.body, "damaged") {
			t.Errorf("%s: PUT with the database damaged: %d %s, want 503 saying why", tc.name, r.status, r.body)
		}
		if v, err := reachable(c, mport); v != "0" {
			t.Errorf("%s: apisix_etcd_reachable %q (%v), want 0", tc.name, v, err)
		}
		g.stopped.Store(true)
		g.stop() // and it exits 0 on SIGTERM
	}
}

// TestEtcdBadPluginsLeftOut: a route whose plugin configuration the Admin
// API would refuse, written into etcd by other means, is left out and
// logged; the routes around it, and those written after it, are served.
// (Before, every worker refused every configuration holding it, so no
// change after it reached the traffic.)
func TestEtcdBadPluginsLeftOut(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startSupervisor(t, "", etcdConfig(freePort(t)), 1)
	s := embeddedStore(t, g.dir)
	ctx := context.Background()
	put := func(key, value string) {
		t.Helper()
		if _, _, err := s.Put(ctx, "/apisix/"+key, []byte(value), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("routes/bad", fmt.Sprintf(`{"uri":"/bad","plugins":{"limit-count":{"count":-5,"time_window":60}},"upstream":{"nodes":{%q:1}}}`, up.Addr()))
	put("routes/after", fmt.Sprintf(`{"uri":"/after","upstream":{"nodes":{%q:1}}}`, up.Addr()))
	c := newClient(t)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/after"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /after = %d", r.status)
		}
		return nil
	})
	if r := do(t, c, "GET", g.url("/bad"), "", nil, nil); r.status != 404 {
		t.Errorf("GET /bad = %d, want 404: the route is left out", r.status)
	}
	g.waitLog(`msg="config store: invalid object left out" .*key=/apisix/routes/bad .*limit-count`, 1, 5*time.Second)
	if strings.Contains(g.out.String(), "refused configuration") {
		t.Errorf("a worker refused a configuration:\n%s", g.out.String())
	}
}

// TestAdminAPIRoute is the way in of APISIX's benchmark scripts, through
// the real binary on its embedded etcd: PUT a route with the legacy key
// (201, then 200), see it proxied within a bound, DELETE it, 404.
func TestAdminAPIRoute(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "hello from the admin API")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	body := fmt.Sprintf(`{"uri": "/hello", "upstream": {"type": "roundrobin", "nodes": {%q: 1}}}`, up.Addr())
	start := time.Now()
	r := admin.do(t, c, "PUT", "routes/1", body)
	if r.status != 201 || r.header.Get("X-API-VERSION") != "v3" {
		t.Fatalf("PUT a new route: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 200 || r.body != "hello from the admin API" {
			return fmt.Errorf("GET /hello = %d %q", r.status, r.body)
		}
		return nil
	})
	t.Logf("route proxied %v after the PUT was sent", time.Since(start).Round(time.Millisecond))
	if r := admin.do(t, c, "PUT", "routes/1", body); r.status != 200 {
		t.Fatalf("PUT the route again: %d %s, want 200", r.status, r.body)
	}
	if r := (adminAPI{e2e.Admin{Port: adminPort, Key: "wrong"}}).do(t, c, "PUT", "routes/1", body); r.status != 401 {
		t.Fatalf("PUT with a wrong key: %d %s, want 401", r.status, r.body)
	}
	if r := admin.do(t, c, "DELETE", "routes/1", ""); r.status != 200 {
		t.Fatalf("DELETE: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 404 {
			return fmt.Errorf("deleted route: GET /hello = %d", r.status)
		}
		return nil
	})
}

// TestAdminKeyGenerated: an empty admin key is generated at first start,
// printed once, kept beside config.yaml, and the same at the next start.
func TestAdminKeyGenerated(t *testing.T) {
	t.Parallel()
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, ""), 1)
	b, err := os.ReadFile(filepath.Join(g.dir, adminKeysFile))
	if err != nil {
		t.Fatal(err)
	}
	var keys map[string]string
	if err := json.Unmarshal(b, &keys); err != nil || len(keys["admin"]) != 32 {
		t.Fatalf("%s: %s (%v)", adminKeysFile, b, err)
	}
	if n := strings.Count(g.out.String(), keys["admin"]); n != 1 {
		t.Fatalf("the generated key is printed %d times, want once:\n%s", n, g.out.String())
	}
	c := newClient(t)
	if r := (adminAPI{e2e.Admin{Port: adminPort, Key: keys["admin"]}}).do(t, c, "GET", "routes", ""); r.status != 200 {
		t.Fatalf("GET with the generated key: %d %s", r.status, r.body)
	}
	if r := legacyAdmin(adminPort).do(t, c, "GET", "routes", ""); r.status != 401 {
		t.Fatalf("GET with the legacy key: %d %s, want 401", r.status, r.body)
	}
}

// TestAdminNoKeyRefused: an Admin API that requires a key, has none and
// admits more than loopback does not start, as APISIX's ("missing valid
// Admin API token"): it would answer every address it admits unasked.
func TestAdminNoKeyRefused(t *testing.T) {
	t.Parallel()
	for _, keys := range []string{"null", "[]"} {
		dir := t.TempDir()
		cfg := strings.Replace(etcdConfig(freePort(t))(freePort(t)),
			"  admin:\n", "  admin:\n    admin_key: "+keys+"\n    allow_admin: [0.0.0.0/0]\n", 1)
		writeFile(t, filepath.Join(dir, "config.yaml"), cfg)
		out, err := e2e.Run(binPath, 30*time.Second, "-c", filepath.Join(dir, "config.yaml"))
		if err == nil || !strings.Contains(out, "missing valid Admin API token") || !strings.Contains(out, "deployment.admin.admin_key is") {
			t.Fatalf("admin_key %s, allow_admin 0.0.0.0/0: %v\n%s", keys, err, out)
		}
	}
}

// TestAdminLegacyKeyRefused: the public legacy key with the Admin API on
// every address refuses to start, saying why.
func TestAdminLegacyKeyRefused(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	cfg := strings.Replace(etcdConfig(freePort(t), adminapi.LegacyAdminKey)(freePort(t)),
		"admin_listen:\n      ip: 127.0.0.1", "admin_listen:\n      ip: 0.0.0.0", 1)
	writeFile(t, filepath.Join(dir, "config.yaml"), cfg)
	// Still running after 30 s, it is killed: err is then not nil.
	out, err := e2e.Run(binPath, 30*time.Second, "-c", filepath.Join(dir, "config.yaml"))
	if err == nil || !strings.Contains(out, "not a loopback address") {
		t.Fatalf("start with the legacy key on 0.0.0.0: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, etcdDataDir)); err == nil {
		t.Fatal("refused before anything started, yet the embedded etcd made its data directory")
	}
}

// TestAdminKeyBypassedWarned: admin_key_required false with the Admin API
// open to every address is logged at WARN at start, in APISIX's words,
// and the Admin API then checks no key.
func TestAdminKeyBypassedWarned(t *testing.T) {
	t.Parallel()
	adminPort := freePort(t)
	cfg := func(port int) string {
		return strings.Replace(etcdConfig(adminPort, "a-key-of-its-own")(port),
			"  admin:\n", "  admin:\n    admin_key_required: false\n    allow_admin: [0.0.0.0/0]\n", 1)
	}
	g := startSupervisor(t, "", cfg, 1)
	line := g.waitLog(`level=WARN .*Admin key is bypassed!`, 1, 5*time.Second)
	if len(line) != 1 || !strings.Contains(line[0], nodeconf.AdminKeyBypassed) {
		t.Fatalf("no warning:\n%s", g.out.String())
	}
	list := fmt.Sprintf("http://127.0.0.1:%d/apisix/admin/routes", adminPort)
	if r := do(t, newClient(t), "GET", list, "", nil, nil); r.status != 200 {
		t.Fatalf("GET without a key: %d %s", r.status, r.body)
	}
}

// TestConfigTestFlag: coregate -t checks config.yaml (and a data plane's
// apisix.yaml) as the start would, prints its warnings (the Admin API's
// bypassed key among them) and exits, starting nothing: 0 for a
// configuration the node would start with, 1 with the reason otherwise.
func TestConfigTestFlag(t *testing.T) {
	t.Parallel()
	run := func(dir string) (string, error) {
		t.Helper()
		return e2e.Run(binPath, 20*time.Second, "-t", "-c", filepath.Join(dir, "config.yaml"))
	}
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.yaml"), strings.Replace(etcdConfig(freePort(t), "a-key-of-its-own")(freePort(t)),
		"  admin:\n", "  admin:\n    admin_key_required: false\n    allow_admin: [0.0.0.0/0]\n", 1))
	out, err := run(dir)
	if err != nil || !strings.Contains(out, nodeconf.AdminKeyBypassed) || !strings.Contains(out, "test is successful") {
		t.Fatalf("-t of a node with its Admin API key bypassed: %v\n%s", err, out)
	}
	if _, err := os.Stat(filepath.Join(dir, etcdDataDir)); err == nil {
		t.Error("-t started the embedded etcd")
	}

	// A data plane's routes file is checked too.
	writeFile(t, filepath.Join(dir, "config.yaml"), perCoreConfig(freePort(t), 1))
	writeFile(t, filepath.Join(dir, "apisix.yaml"), routesYAML(obj{"id": 1, "uri": "/a", "plugins": obj{"limit-count": obj{"count": -1, "time_window": 1}}}))
	if out, err := run(dir); err == nil || !strings.Contains(out, "limit-count") {
		t.Errorf("-t of a routes file a worker would refuse: %v\n%s", err, out)
	}
	writeFile(t, filepath.Join(dir, "apisix.yaml"), routesYAML(obj{"id": 1, "uri": "/a", "plugins": obj{"mocking": obj{"response_example": "x"}}}))
	if out, err := run(dir); err != nil || !strings.Contains(out, "apisix.yaml is ok") {
		t.Errorf("-t of a sound data plane: %v\n%s", err, out)
	}

	// What refuses the start fails -t, saying why.
	writeFile(t, filepath.Join(dir, "config.yaml"), strings.Replace(perCoreConfig(freePort(t), 1),
		"enable_admin: false", "enable_admin: false\n  delete_uri_tail_slash: true", 1))
	if out, err := run(dir); err == nil || strings.Contains(out, "successful") || !strings.Contains(out, "delete_uri_tail_slash") {
		t.Errorf("-t of an invalid config.yaml: %v\n%s", err, out)
	}
}

// TestReloadPacedByBuild: in a burst of Admin API changes the supervisor
// pushes a configuration no sooner than supervisor.BuildGap times the
// workers' last build (its CPU time, and the collector's its garbage
// costs) after they applied it, so that building takes a bounded share of
// the workers' CPU; every change still arrives. A change
// after the burst goes to the worker as a Delta: the new route, not the
// 3 000 it already has.
func TestReloadPacedByBuild(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "paced")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	admin := legacyAdmin(adminPort)
	c := newClient(t)
	// put adds routes [from, to) from 8 clients at once, and waits until
	// the last one is served and a reload of all to of them is logged: the
	// clients' puts commit in any order, so the reload that serves route
	// to-1 may still lack another, which would then travel with the next
	// change.
	put := func(from, to int) {
		var next atomic.Int64
		next.Store(int64(from))
		var wg sync.WaitGroup
		for range 8 {
			wg.Go(func() {
				c := newClient(t)
				for i := next.Add(1) - 1; i < int64(to); i = next.Add(1) - 1 {
					body := fmt.Sprintf(`{"uri":"/paced/%d","upstream":{"nodes":{%q:1}}}`, i, up.Addr())
					if r := admin.do(t, c, "PUT", fmt.Sprintf("routes/p%d", i), body); r.status != 201 {
						t.Errorf("PUT route %d: %d %s", i, r.status, r.body)
						return
					}
				}
			})
		}
		wg.Wait()
		eventually(t, 30*time.Second, func() error {
			if r := do(t, c, "GET", g.url(fmt.Sprintf("/paced/%d", to-1)), "", nil, nil); r.status != 200 {
				return fmt.Errorf("last route: %d", r.status)
			}
			if !strings.Contains(g.out.String(), fmt.Sprintf(`msg="config reloaded" proc=supervisor routes=%d `, to)) {
				return fmt.Errorf("no reload of %d routes logged", to)
			}
			return nil
		})
	}
	// time=… msg="config reloaded" proc=supervisor routes=N workers=1 took=D build=D bytes=N build_cpu=D gc_cpu=D garbage=N
	re := regexp.MustCompile(`time=(\S+) level=INFO msg="config reloaded" proc=supervisor routes=(\d+) workers=1 took=(\S+) build=(\S+) bytes=(\d+) build_cpu=(\S+) gc_cpu=(\S+) garbage=\d+`)
	type reload struct {
		end, start time.Time
		build      time.Duration
	}
	// check reads the reloads logged so far, fails the test for each push
	// made before its pace allowed, and counts the pushes the pace held
	// back 5 ms or more.
	check := func() (reloads, paced int) {
		var rs []reload
		for _, m := range re.FindAllStringSubmatch(g.out.String(), -1) {
			end, err := time.Parse(time.RFC3339Nano, m[1])
			took, err2 := time.ParseDuration(m[3])
			build, err3 := time.ParseDuration(m[6]) // the CPU times the pace is made of
			gc, err4 := time.ParseDuration(m[7])
			if err != nil || err2 != nil || err3 != nil || err4 != nil {
				t.Fatalf("log line %q: %v %v %v %v", m[0], err, err2, err3, err4)
			}
			build += gc
			rs = append(rs, reload{end: end, start: end.Add(-took), build: build})
		}
		// The earliest push moves on by BuildGap times each build, from no
		// earlier than BuildBurst before that build was applied.
		var earliest time.Time
		for i := 1; i < len(rs); i++ {
			prev := rs[i-1]
			if floor := prev.end.Add(-supervisor.BuildBurst); earliest.Before(floor) {
				earliest = floor
			}
			earliest = earliest.Add(supervisor.BuildGap * prev.build)
			// the log's times are to the millisecond
			if rs[i].start.Before(earliest.Add(-2 * time.Millisecond)) {
				t.Errorf("reload %d pushed %v after reload %d was applied, %v before its pace allowed",
					i, rs[i].start.Sub(prev.end), i-1, earliest.Sub(rs[i].start))
			}
			if earliest.Sub(prev.end) >= 5*time.Millisecond {
				paced++
			}
		}
		return len(rs), paced
	}
	// Bursts of 3 000 routes until the pace held some push back: how many
	// it takes depends on how fast this machine builds against how fast
	// the supervisor pushes (each build is of the whole table, so later
	// bursts build more per push).
	routes, n, paced := 0, 0, 0
	for routes < 15000 && paced == 0 {
		put(routes, routes+3000)
		routes += 3000
		if t.Failed() {
			return
		}
		if n, paced = check(); n < 3 {
			t.Fatalf("%d reloads logged for %d routes put, want a burst of them:\n%s", n, routes, g.out.String())
		}
	}
	// paced 0: the supervisor's own work spaced its pushes wider than the
	// pace asks for (a machine busy with other tests); every push was
	// still checked against its pace.
	t.Logf("%d reloads for %d routes, %d of them held 5 ms or more by the pace", n, routes, paced)

	body := fmt.Sprintf(`{"uri":"/paced/one-more","upstream":{"nodes":{%q:1}}}`, up.Addr())
	if r := admin.do(t, c, "PUT", "routes/one-more", body); r.status != 201 {
		t.Fatalf("PUT one more route: %d %s", r.status, r.body)
	}
	var sent string
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/paced/one-more"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("the route put after the burst: %d", r.status)
		}
		for _, m := range re.FindAllStringSubmatch(g.out.String(), -1) {
			if m[2] == strconv.Itoa(routes+1) {
				sent = m[5]
			}
		}
		if sent == "" {
			return fmt.Errorf("no reload of %d routes logged", routes+1)
		}
		return nil
	})
	// The whole configuration is over 100 KiB; the Delta is the new route
	// and a run of the kept ones.
	if n, _ := strconv.Atoi(sent); n == 0 || n > 1024 {
		t.Errorf("the change after the burst sent %s bytes to the worker, want a Delta under 1 KiB", sent)
	}
}
