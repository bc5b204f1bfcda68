package main

import (
	"context"
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/admin/store/etcdstore"
	"coregate/internal/e2e"
)

// Nodes on a three-member etcd cluster on loopback: a member lost, the
// quorum lost, the quorum back.

// clusterConfig is a node of one worker in role (traditional,
// control_plane or data_plane) on the external etcd members endpoints,
// deployment.etcd.timeout timeout seconds (0: not written, APISIX's 30),
// its Admin API on adminPort (legacy key; a data plane has none), its
// metrics on mport at /m.
func clusterConfig(role string, endpoints []string, timeout, adminPort, mport int) func(port int) string {
	return func(port int) string {
		var to string
		if timeout > 0 {
			to = fmt.Sprintf("    timeout: %d\n", timeout)
		}
		return fmt.Sprintf(`apisix:
  node_listen:
    - ip: 127.0.0.1
      port: %d
  enable_control: false
%sdeployment:
  role: %s
  role_%s:
    config_provider: etcd
  etcd:
    host:
      - %s
%s  admin:
    admin_key:
      - name: admin
        key: %s
        role: admin
    admin_listen:
      ip: 127.0.0.1
      port: %d
plugin_attr:
  prometheus:
    export_uri: /m
    export_addr:
      ip: 127.0.0.1
      port: %d
nginx_config:
  worker_processes: 1
  error_log_level: info
`, port, e2e.SSLListen(port), role, role, strings.Join(endpoints, "\n      - "), to, adminapi.LegacyAdminKey, adminPort, mport)
	}
}

// clusterNode is a node of TestEtcdQuorum.
type clusterNode struct {
	g     *supGateway
	admin adminAPI
	mport int
}

// served waits up to 30 s until every node serves path with 200.
func served(t *testing.T, c *http.Client, path string, ns ...clusterNode) {
	t.Helper()
	for i, n := range ns {
		eventually(t, 30*time.Second, func() error {
			if r, err := tryDo(c, "GET", n.g.url(path), "", nil, nil); err != nil || r.status != 200 {
				return fmt.Errorf("node %d: GET %s = %d, %v", i, path, r.status, err)
			}
			return nil
		})
	}
}

// TestEtcdQuorum: two nodes on a three-member etcd cluster, A on every
// member, B on one follower only, under steady traffic on both from
// start to end, which no request may fail:
//   - B's member killed: A's Admin API writes go on; the history is
//     compacted past B's last revision, the member started again: B's
//     watch, resumed, finds its revision compacted, and B catches up
//     from a full read;
//   - the two others killed, the quorum lost: apisix_etcd_reachable
//     turns 0, then Admin API writes and reads answer 503 at once (not
//     after deployment.etcd.timeout, APISIX's 30 s, as each would);
//     both nodes go on serving their configuration, their workers are
//     not restarted; a third node, C, started again meanwhile serves its
//     local copy within seconds;
//   - the quorum back: writes succeed again, on both nodes' Admin APIs,
//     and arrive on every node;
//   - the leader killed: a write through A passes after the election.
func TestEtcdQuorum(t *testing.T) {
	if testing.Short() {
		t.Skip("runs three etcd members and two nodes for about a minute")
	}
	cl := e2e.NewEtcdCluster(t, 3)
	cl.Start()
	up := textUpstream(t, "up")
	node := func(endpoints []string) clusterNode {
		adminPort, mport := freePort(t), freePort(t)
		return clusterNode{g: startSupervisor(t, "", clusterConfig("traditional", endpoints, 0, adminPort, mport), 1),
			admin: legacyAdmin(adminPort), mport: mport}
	}
	// B's member is a follower: A's writes need no election when it is
	// lost.
	leader := -1
	eventually(t, 10*time.Second, func() error {
		if leader = cl.Leader(); leader < 0 {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	f := (leader + 1) % 3
	a, b := node(cl.Endpoints()), node(cl.Endpoints()[f:f+1])
	c := newClient(t)
	route := func(uri string) string {
		return fmt.Sprintf(`{"uri":%q,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, uri, up.Addr())
	}
	put := func(n clusterNode, id, uri string) (result, time.Duration, error) {
		start := time.Now()
		r, err := n.admin.TryDo(c, "PUT", "routes/"+id, route(uri))
		return resultOf(r), time.Since(start), err
	}
	if r, _, err := put(a, "1", "/one"); err != nil || r.status != 201 {
		t.Fatalf("PUT route 1: %d %s, %v", r.status, r.body, err)
	}
	served(t, c, "/one", a, b)
	workers := func(n clusterNode) []int {
		var pids []int
		for _, w := range workerProcs(t, n.g.PID()) {
			pids = append(pids, w.pid)
		}
		slices.Sort(pids)
		return pids
	}
	wa, wb := workers(a), workers(b)
	loadA := e2e.StartSteadyLoad(a.g.url("/one"), 2*time.Millisecond, newClient(t))
	loadB := e2e.StartSteadyLoad(b.g.url("/one"), 2*time.Millisecond, newClient(t))
	ended := false
	endLoads := func() {
		if ended {
			return
		}
		ended = true
		for name, l := range map[string]*e2e.SteadyLoad{"A": loadA, "B": loadB} {
			ok, failures := l.End()
			t.Logf("node %s: %d requests answered 200, %d failed", name, ok, len(failures))
			if len(failures) != 0 || ok == 0 {
				t.Errorf("node %s: %d requests failed (first: %v), %d answered", name, len(failures), failures[:min(3, len(failures))], ok)
			}
		}
	}
	defer endLoads()

	// One member lost, B's. A write through A goes on: the first, or,
	// had it been under way to the member lost, the next (an Admin API
	// client's retry; a PUT is idempotent).
	cl.Members[f].Kill()
	tries := 0
	eventually(t, 5*time.Second, func() error {
		tries++
		if r, _, err := put(a, "2", "/two"); err != nil || (r.status != 201 && r.status != 200) {
			return fmt.Errorf("PUT route 2 with member %d down: %d %s, %v", f, r.status, r.body, err)
		}
		return nil
	})
	if tries > 1 {
		t.Logf("PUT route 2 with member %d down passed at try %d", f, tries)
	}
	served(t, c, "/two", a)
	// Route 2 written again, and the history compacted past what B saw:
	// route 2's first revision included.
	if r, _, err := put(a, "2", "/two"); err != nil || r.status != 200 {
		t.Fatalf("PUT route 2 again: %d %s, %v", r.status, r.body, err)
	}
	s, err := etcdstore.New(etcdstore.Options{Endpoints: []string{cl.Members[leader].Client}, Timeout: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	_, rev, err := s.List(ctx, "/apisix/routes")
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	cl.Members[f].Launch()
	cl.Members[f].WaitHealthy(30 * time.Second)
	start := time.Now()
	served(t, c, "/two", b)
	t.Logf("node B served route 2 %v after its member was back", time.Since(start).Round(time.Millisecond))
	// Its watch resumed from before route 2 and found it compacted: the
	// node read the store again.
	b.g.waitLog(`msg="config watch ended: reading the store again".*compacted`, 1, 10*time.Second)
	// Node C, on every member, has routes 1 and 2 in its local copy.
	cn := node(cl.Endpoints())
	served(t, c, "/two", cn)
	cacheOrigin(t, cn.g.dir, 2)

	// The quorum lost: only B's member runs. Once a node saw it
	// (apisix_etcd_reachable 0), its Admin API answers 503 at once, not
	// after deployment.etcd.timeout (30 s) each call.
	for i, m := range cl.Members {
		if i != f {
			m.Kill()
		}
	}
	lost := time.Now()
	for i, n := range []clusterNode{a, b} {
		eventually(t, 30*time.Second, func() error {
			if v, err := reachable(c, n.mport); v != "0" {
				return fmt.Errorf("node %d: apisix_etcd_reachable %q (%v), want 0 with the quorum lost", i, v, err)
			}
			return nil
		})
		t.Logf("node %d: apisix_etcd_reachable 0 %v after the quorum was lost", i, time.Since(lost).Round(time.Millisecond))
	}
	const prompt = time.Second
	for i, n := range []clusterNode{a, b} {
		r, took, err := put(n, "3", "/three")
		if err != nil || r.status != 503 || took > prompt || !strings.Contains(r.body, "etcd unreachable") {
			t.Errorf("node %d: PUT with the quorum lost: %d %s after %v, %v; want 503 within %v", i, r.status, r.body, took, err, prompt)
		}
		start := time.Now()
		g, err := n.admin.TryDo(c, "GET", "routes/1", "")
		if took := time.Since(start); err != nil || g.Status != 503 || took > prompt {
			t.Errorf("node %d: GET with the quorum lost: %d %s after %v, %v; want 503 within %v", i, g.Status, g.Body, took, err, prompt)
		}
		for _, path := range []string{"/one", "/two"} {
			if r := do(t, c, "GET", n.g.url(path), "", nil, nil); r.status != 200 || r.body != "up" {
				t.Errorf("node %d with the quorum lost: GET %s = %d %q", i, path, r.status, r.body)
			}
		}
	}
	// C started again: it serves its local copy once its read of etcd
	// gave up (storesync.DefaultStartTimeout, 5 s), not after
	// deployment.etcd.timeout.
	start = time.Now()
	cn.g = cn.g.restart(t, 1)
	for _, path := range []string{"/one", "/two"} {
		if r := do(t, c, "GET", cn.g.url(path), "", nil, nil); r.status != 200 || r.body != "up" {
			t.Errorf("node C started with the quorum lost: GET %s = %d %q", path, r.status, r.body)
		}
	}
	t.Logf("node C started again with the quorum lost: serving its local copy after %v", time.Since(start).Round(time.Millisecond))
	if took := time.Since(start); took > 15*time.Second {
		t.Errorf("node C served its local copy %v after it was started again, want within 15 s", took)
	}

	// The quorum back: writes pass again through either node and arrive
	// on every node.
	cl.Start()
	for i, n := range []clusterNode{a, b} {
		id := fmt.Sprint(4 + i)
		eventually(t, 30*time.Second, func() error {
			if r, _, err := put(n, id, "/r"+id); err != nil || (r.status != 201 && r.status != 200) {
				return fmt.Errorf("node %d: PUT route %s with the quorum back: %d %s, %v", i, id, r.status, r.body, err)
			}
			return nil
		})
	}
	served(t, c, "/r4", a, b, cn)
	served(t, c, "/r5", a, b, cn)
	for i, n := range []clusterNode{a, b} {
		eventually(t, 30*time.Second, func() error {
			if v, err := reachable(c, n.mport); v != "1" {
				return fmt.Errorf("node %d: apisix_etcd_reachable %q (%v), want 1 with the quorum back", i, v, err)
			}
			return nil
		})
	}
	// The leader lost: a write through A passes once the two left
	// elected another (etcd's election timeout, 1 s by default).
	eventually(t, 10*time.Second, func() error {
		if leader = cl.Leader(); leader < 0 {
			return fmt.Errorf("no leader")
		}
		return nil
	})
	cl.Members[leader].Kill()
	start = time.Now()
	eventually(t, 15*time.Second, func() error {
		if r, _, err := put(a, "6", "/six"); err != nil || r.status != 201 {
			return fmt.Errorf("PUT route 6 with the leader lost: %d %s, %v", r.status, r.body, err)
		}
		return nil
	})
	t.Logf("a write passed %v after the leader was lost", time.Since(start).Round(time.Millisecond))
	served(t, c, "/six", a)
	endLoads()
	if got := workers(a); !slices.Equal(got, wa) {
		t.Errorf("node A's workers %v, were %v: restarted", got, wa)
	}
	if got := workers(b); !slices.Equal(got, wb) {
		t.Errorf("node B's workers %v, were %v: restarted", got, wb)
	}
}

// killNode ends the node g with SIGKILL, its supervisor and its workers,
// by pid, as a crash of the machine would, and waits until they exited.
func killNode(t *testing.T, g *supGateway) {
	t.Helper()
	ws := workerProcs(t, g.PID())
	g.stopped.Store(true)
	g.Signal(syscall.SIGKILL)
	for _, w := range ws {
		_ = syscall.Kill(w.pid, syscall.SIGKILL)
	}
	<-g.Done
	for _, w := range ws {
		if !e2e.WaitExited(w.pid, 5*time.Second) {
			t.Fatalf("worker %d still runs after SIGKILL", w.pid)
		}
	}
}

// TestEtcdDataPlane: a data plane (deployment.role data_plane,
// config_provider etcd) beside a control plane whose Admin API writes
// into the same external etcd:
//   - killed with SIGKILL, supervisor and workers, while a change is
//     made, and started again: it serves the current configuration;
//   - killed again, a change made, etcd stopped: started again, it
//     serves its local copy (config-cache.json), without the change it
//     did not see; etcd back, it catches up without a restart, and
//     follows the changes made afterwards.
func TestEtcdDataPlane(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an etcd, a control plane and a data plane")
	}
	etcd, put := etcdControlPlane(t)
	dp := startSupervisor(t, "", clusterConfig("data_plane", []string{etcd.Client}, 0, freePort(t), freePort(t)), 1)
	c := newClient(t)
	get := func(g *supGateway, path string) result {
		t.Helper()
		r, err := tryDo(c, "GET", g.url(path), "", nil, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		return r
	}
	servedOn := func(g *supGateway, path string) {
		t.Helper()
		eventually(t, 30*time.Second, func() error {
			if r := get(g, path); r.status != 200 || r.body != "up" {
				return fmt.Errorf("data plane: GET %s = %d %q", path, r.status, r.body)
			}
			return nil
		})
	}
	put("1", "/one")
	servedOn(dp, "/one")
	// Its local copy holds route 1 before it is killed.
	cacheOrigin(t, dp.dir, 1)

	killNode(t, dp)
	put("2", "/two")
	dp = dp.restart(t, 1)
	servedOn(dp, "/two")
	if r := get(dp, "/one"); r.status != 200 {
		t.Fatalf("data plane restarted: GET /one = %d", r.status)
	}
	cacheOrigin(t, dp.dir, 2)

	killNode(t, dp)
	put("3", "/three")
	etcd.Kill()
	dp = dp.restart(t, 1)
	for _, path := range []string{"/one", "/two"} {
		if r := get(dp, path); r.status != 200 || r.body != "up" {
			t.Fatalf("data plane started with etcd down: GET %s = %d %q, want its local copy's route", path, r.status, r.body)
		}
	}
	if r := get(dp, "/three"); r.status != 404 {
		t.Fatalf("data plane started with etcd down: GET /three = %d, want 404 (not in its copy)", r.status)
	}
	if !strings.Contains(dp.out.String(), "local copy") {
		t.Fatalf("the data plane did not say it serves its local copy:\n%s", dp.out.String())
	}
	workers := workerProcs(t, dp.PID())
	etcd.Start()
	servedOn(dp, "/three")
	put("4", "/four")
	servedOn(dp, "/four")
	if got := workerProcs(t, dp.PID()); len(got) != 1 || len(workers) != 1 || got[0].pid != workers[0].pid {
		t.Fatalf("the data plane's workers %v, were %v: restarted to catch up", got, workers)
	}
}

// TestEtcdDataPlaneSupervisorKilled: a data plane on etcd whose
// supervisor alone is killed with SIGKILL (the OOM killer's pick) serves
// on from its worker; a change made meanwhile is served once the
// supervisor is started again, which takes the worker over or replaces
// it; no request fails throughout.
func TestEtcdDataPlaneSupervisorKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("runs an etcd, a control plane and a data plane")
	}
	etcd, put := etcdControlPlane(t)
	c := newClient(t)
	dir, port := t.TempDir(), freePort(t)
	writeFile(t, filepath.Join(dir, "config.yaml"), clusterConfig("data_plane", []string{etcd.Client}, 0, freePort(t), freePort(t))(port))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	served := func(path string) {
		t.Helper()
		eventually(t, 30*time.Second, func() error {
			if r, err := tryDo(c, "GET", base+path, "", nil, nil); err != nil || r.status != 200 || r.body != "up" {
				return fmt.Errorf("data plane: GET %s = %d %q, %v", path, r.status, r.body, err)
			}
			return nil
		})
	}
	var pids []int
	e2e.KillAtEnd(t, &pids)
	first := startNodeProc(t, dir, "first")
	pids = workerPIDs(first.WaitLog(`msg="worker ready"`, 1, 30*time.Second))
	put("1", "/one")
	served("/one")
	load := e2e.StartSteadyLoad(base+"/one", 2*time.Millisecond, newClient(t))

	first.Stopped.Store(true)
	first.Signal(syscall.SIGKILL)
	<-first.Done
	first.WaitLog(`msg="supervisor gone: serving the last configuration`, 1, 5*time.Second)
	put("2", "/two")
	time.Sleep(500 * time.Millisecond) // served on without a supervisor
	if r, err := tryDo(c, "GET", base+"/two", "", nil, nil); err != nil || r.status != 404 {
		t.Fatalf("GET /two without a supervisor = %d, %v; want 404, the worker's configuration unchanged", r.status, err)
	}

	second := startNodeProc(t, dir, "second")
	served("/two")
	ok, failures := load.End()
	t.Logf("%d requests answered 200, %d failed across the supervisor's kill and restart", ok, len(failures))
	if len(failures) != 0 || ok == 0 {
		t.Errorf("%d requests failed (first: %v), %d answered", len(failures), failures[:min(3, len(failures))], ok)
	}
	second.Stopped.Store(true)
	second.Signal(syscall.SIGTERM)
	select {
	case <-second.Done:
	case <-time.After(15 * time.Second):
		t.Fatal("the second supervisor did not stop on SIGTERM")
	}
	for _, pid := range pids {
		if !e2e.WaitExited(pid, 10*time.Second) {
			t.Errorf("worker %d still runs after the supervisor stopped", pid)
		}
	}
}

// etcdControlPlane starts an external etcd, an upstream answering "up"
// and a control plane on that etcd; put writes a route of uri to the
// upstream through the control plane's Admin API.
func etcdControlPlane(t *testing.T) (etcd *e2e.Etcd, put func(id, uri string)) {
	etcd = e2e.NewEtcd(t)
	etcd.Start()
	up := textUpstream(t, "up")
	cpAdmin := freePort(t)
	startSupervisor(t, "", clusterConfig("control_plane", []string{etcd.Client}, 0, cpAdmin, freePort(t)), 1)
	admin, c := legacyAdmin(cpAdmin), newClient(t)
	return etcd, func(id, uri string) {
		t.Helper()
		r := admin.do(t, c, "PUT", "routes/"+id, fmt.Sprintf(`{"uri":%q,"upstream":{"nodes":{%q:1}}}`, uri, up.Addr()))
		if r.status != 201 {
			t.Fatalf("PUT route %s on the control plane: %d %s", id, r.status, r.body)
		}
	}
}
