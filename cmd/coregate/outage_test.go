package main

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/admin/store/storesync"
	"coregate/internal/e2e"
)

// externalConfig is a traditional node on the external etcd at client,
// its Admin API on adminPort (legacy key), its metrics on mport at /m and
// its TLS listener on e2e.TLSPort(port).
func externalConfig(client string, adminPort, mport int) func(port int) string {
	return clusterConfig("traditional", []string{client}, 2, adminPort, mport)
}

// externalNode is a traditional node on an external etcd of its own
// (deployment.etcd.timeout timeout s), with route 1, /one, put through its
// Admin API to an upstream that answers "up".
type externalNode struct {
	etcd  *e2e.Etcd
	g     *supGateway
	c     *http.Client
	admin adminAPI
	mport int
	// route is the body of a route of uri to the upstream.
	route func(uri string) string
}

func startExternalNode(t *testing.T, timeout int) *externalNode {
	t.Helper()
	etcd := e2e.NewEtcd(t)
	etcd.Start()
	up := textUpstream(t, "up")
	adminPort, mport := freePort(t), freePort(t)
	n := &externalNode{etcd: etcd, mport: mport, c: newClient(t), admin: legacyAdmin(adminPort),
		g: startSupervisor(t, "", clusterConfig("traditional", []string{etcd.Client}, timeout, adminPort, mport), 1),
		route: func(uri string) string {
			return fmt.Sprintf(`{"uri":%q,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, uri, up.Addr())
		}}
	if r := n.admin.do(t, n.c, "PUT", "routes/1", n.route("/one")); r.status != 201 {
		t.Fatalf("PUT route 1: %d %s", r.status, r.body)
	}
	return n
}

// reachable reads apisix_etcd_reachable from the node's metrics.
func reachable(c *http.Client, mport int) (string, error) {
	r, err := tryDo(c, "GET", fmt.Sprintf("http://127.0.0.1:%d/m", mport), "", nil, nil)
	if err != nil {
		return "", err
	}
	for _, l := range strings.Split(r.body, "\n") {
		if v, ok := strings.CutPrefix(l, "apisix_etcd_reachable "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no apisix_etcd_reachable in the metrics")
}

// TestEtcdOutage: a node on an external etcd keeps serving while etcd is
// killed under steady traffic (no request fails), reports it
// (apisix_etcd_reachable 0, Admin API writes 503), takes the changes made
// once etcd is back, and starts again with etcd down from its local copy.
func TestEtcdOutage(t *testing.T) {
	t.Parallel()
	n := startExternalNode(t, 2)
	etcd, g, c, admin, mport, route := n.etcd, n.g, n.c, n.admin, n.mport, n.route
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/one"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /one = %d", r.status)
		}
		return nil
	})
	if v, err := reachable(c, mport); v != "1" {
		t.Fatalf("apisix_etcd_reachable %q (%v), want 1", v, err)
	}
	// The modify indexes, as APISIX names them: the route just put is the
	// newest object, and the text passes promtool.
	if promtool, err := exec.LookPath("promtool"); err == nil || os.Getenv("CI") == "true" {
		m := do(t, c, "GET", fmt.Sprintf("http://127.0.0.1:%d/m", mport), "", nil, nil)
		promCheck(t, promtool, m.body)
		idx := map[string]string{}
		for _, l := range strings.Split(m.body, "\n") {
			if rest, ok := strings.CutPrefix(l, `apisix_etcd_modify_indexes{key="`); ok {
				k, v, _ := strings.Cut(rest, `"} `)
				idx[k] = v
			}
		}
		if len(idx) != 11 || idx["routes"] == "0" || idx["routes"] != idx["max_modify_index"] || idx["ssls"] != "0" {
			t.Fatalf("apisix_etcd_modify_indexes: %v, want 11 keys, routes the newest", idx)
		}
	}

	// Steady traffic on its own connection for the whole outage.
	load := e2e.StartSteadyLoad(g.url("/one"), 2*time.Millisecond, newClient(t))

	etcd.Kill()
	eventually(t, 30*time.Second, func() error {
		if v, err := reachable(c, mport); v != "0" {
			return fmt.Errorf("apisix_etcd_reachable %q (%v), want 0 with etcd down", v, err)
		}
		return nil
	})
	if r := admin.do(t, c, "PUT", "routes/2", route("/two")); r.status != 503 {
		t.Fatalf("PUT with etcd down: %d %s, want 503", r.status, r.body)
	}
	etcd.Start()
	// A write made as soon as etcd is back: it arrives with the resync
	// or the new watch.
	eventually(t, 30*time.Second, func() error {
		if r := admin.do(t, c, "PUT", "routes/2", route("/two")); r.status != 201 && r.status != 200 {
			return fmt.Errorf("PUT route 2 after the restart: %d %s", r.status, r.body)
		}
		return nil
	})
	eventually(t, 30*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/two"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /two = %d", r.status)
		}
		return nil
	})
	eventually(t, 30*time.Second, func() error {
		if v, err := reachable(c, mport); v != "1" {
			return fmt.Errorf("apisix_etcd_reachable %q (%v), want 1 with etcd back", v, err)
		}
		return nil
	})
	ok, failures := load.End()
	t.Logf("through the outage: %d requests answered 200, %d failed", ok, len(failures))
	if len(failures) != 0 || ok == 0 {
		t.Fatalf("%d requests failed (first: %v), %d answered", len(failures), failures[:min(1, len(failures))], ok)
	}

	// Cold start with etcd down: the node serves its local copy.
	g.stopped.Store(true)
	g.stop()
	etcd.Kill()
	g2 := g.restart(t, 1)
	for _, path := range []string{"/one", "/two"} {
		if r := do(t, c, "GET", g2.url(path), "", nil, nil); r.status != 200 || r.body != "up" {
			t.Fatalf("cold start from the local copy: GET %s = %d %q", path, r.status, r.body)
		}
	}
	if !strings.Contains(g2.out.String(), "local copy") {
		t.Fatalf("the node did not say it serves its local copy:\n%s", g2.out.String())
	}
}

// TestEtcdRebuiltExternal: an external etcd rebuilt from nothing under a
// running node (same name and ports: the same cluster id, its revisions
// started over) is refused: the node keeps serving, keeps its local copy,
// refuses Admin API changes and says why; apisix_etcd_reachable stays 1,
// since etcd answers. Started again, the node serves its local copy.
func TestEtcdRebuiltExternal(t *testing.T) {
	t.Parallel()
	n := startExternalNode(t, 2)
	etcd, g, c, admin, mport, route := n.etcd, n.g, n.c, n.admin, n.mport, n.route
	rev, _ := cacheOrigin(t, g.dir, 1)

	etcd.Kill()
	if err := os.RemoveAll(etcd.Dir); err != nil {
		t.Fatal(err)
	}
	etcd.Start()
	line := g.LogLine(t, `level=ERROR msg="config store reset`, 30*time.Second)
	if got := logField(line, "copy_revision"); got != strconv.FormatInt(rev, 10) {
		t.Errorf("copy_revision=%q in %q, want %d", got, line, rev)
	}
	if r := do(t, c, "GET", g.url("/one"), "", nil, nil); r.status != 200 {
		t.Fatalf("GET /one with the store refused = %d, want the route served", r.status)
	}
	if r := admin.do(t, c, "PUT", "routes/2", route("/two")); r.status != 503 || !strings.Contains(r.body, acceptResetFlag) {
		t.Fatalf("PUT into the rebuilt etcd: %d %s, want 503 saying how to accept it", r.status, r.body)
	}
	if v, err := reachable(c, mport); v != "1" {
		t.Errorf("apisix_etcd_reachable %q (%v) with etcd answering, want 1", v, err)
	}
	if r, _, err := storesync.CacheOrigin(filepath.Join(g.dir, storesync.CacheFile)); err != nil || r != rev {
		t.Fatalf("local copy's revision %d (%v), want %d kept", r, err, rev)
	}

	g2 := g.restart(t, 1)
	g2.waitLog(`level=ERROR msg="config store reset`, 1, 10*time.Second)
	if r := do(t, c, "GET", g2.url("/one"), "", nil, nil); r.status != 200 || r.body != "up" {
		t.Fatalf("started again on the rebuilt etcd: GET /one = %d %q, want the local copy's route", r.status, r.body)
	}
}
