package main

import (
	"fmt"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// A supervisor killed with SIGKILL leaves its workers serving; the
// supervisor started next takes them over (takeover.go). These tests run
// the node as an operator would: two supervisors one after the other on
// the same config.yaml, under load.

// startNodeProc starts a supervisor of the node in dir whose output goes
// to the file <dir>/<name>.log: its workers outlive it and keep writing to
// the same file.
func startNodeProc(t *testing.T, dir, name string) *e2e.Gateway {
	t.Helper()
	return e2e.Start(t, e2e.Options{Bin: binPath, Dir: dir, LogFile: filepath.Join(dir, name+".log"),
		Env: []string{"GORACE=atexit_sleep_ms=0"}})
}

// workerPIDs are the pids of the "worker ready" lines of the output.
func workerPIDs(lines []string) []int {
	var pids []int
	for _, l := range lines {
		var pid int
		if _, err := fmt.Sscan(logField(l, "pid"), &pid); err == nil {
			pids = append(pids, pid)
		}
	}
	slices.Sort(pids)
	return pids
}

// startSteadyLoad sends requests until ended: keep-alive clients, and
// clients that open a connection per request (so that the socket
// selector's choice is exercised all along). Every request must succeed.
func startSteadyLoad(url string) *e2e.SteadyLoad {
	var clients []*http.Client
	for i := range 4 {
		tr := &http.Transport{DisableKeepAlives: i%2 == 1, MaxIdleConnsPerHost: 2}
		clients = append(clients, &http.Client{Transport: tr, Timeout: 10 * time.Second})
	}
	// Bounded: about 5000 requests a second at most here, for well under
	// a minute.
	return e2e.StartSteadyLoad(url, 0, clients...)
}

// takeoverNode writes a node's config.yaml (two workers, the standalone
// apisix.yaml beside it) and returns its directory and port.
func takeoverNode(t *testing.T, apisixYAML string) (dir string, port int) {
	dir, port = t.TempDir(), freePort(t)
	writeFile(t, filepath.Join(dir, "config.yaml"), perCoreConfig(port, 2))
	writeFile(t, filepath.Join(dir, "apisix.yaml"), apisixYAML)
	return dir, port
}

// TestSupervisorKilledUnderLoad: the supervisor is killed with SIGKILL
// while clients send; its workers serve on with their configuration, the
// supervisor started again takes the same processes over (their shared
// counters go on: a limit of 5 admits 5 across the two supervisors), a
// configuration change reaches them, and its SIGTERM drains them. No
// request fails at any point.
func TestSupervisorKilledUnderLoad(t *testing.T) {
	requirePerCore(t)
	up := textUpstream(t, strings.Repeat("x", 1024))
	routes := func(extra ...obj) string {
		return routesYAML(append([]obj{
			{"id": 1, "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)},
			{"id": 2, "uri": "/limited", "upstream": upstreamOf(nodes(up.Addr()), nil),
				"plugins": obj{"limit-count": obj{"count": 5, "time_window": 60, "key_type": "constant", "key": "all", "rejected_code": 429}}},
		}, extra...)...)
	}
	dir, port := takeoverNode(t, routes())
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var pids []int
	e2e.KillAtEnd(t, &pids)

	first := startNodeProc(t, dir, "first")
	pids = workerPIDs(first.WaitLog(`msg="worker ready"`, 2, 10*time.Second))
	c := newClient(t)
	for i := range 3 {
		if r := do(t, c, "GET", base+"/limited", "", nil, nil); r.status != 200 {
			t.Fatalf("limited request %d: %d, want 200", i+1, r.status)
		}
	}
	load := startSteadyLoad(base + "/hello")
	time.Sleep(300 * time.Millisecond)

	first.Stopped.Store(true)
	first.Signal(syscall.SIGKILL)
	<-first.Done
	first.WaitLog(`msg="supervisor gone: serving the last configuration`, 2, 5*time.Second)
	// Orphaned, the workers serve: the load goes on for a while with no
	// supervisor at all.
	time.Sleep(time.Second)
	for _, pid := range pids {
		if !e2e.Alive(pid) {
			t.Fatalf("worker %d exited with its supervisor", pid)
		}
	}
	served := load.OK.Load()

	second := startNodeProc(t, dir, "second")
	second.WaitLog(`msg="took over the workers a previous supervisor left".* kept=2 replaced=0`, 1, 10*time.Second)
	// The TLS session ticket keys are the workers', not new ones.
	second.WaitLog(`msg="TLS session ticket keys taken over".* gen=1`, 1, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	ok, failures := load.End()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed across the supervisor's kill and restart; first: %v", len(failures), ok+int64(len(failures)), failures[:min(5, len(failures))])
	}
	if served == 0 || ok == served {
		t.Errorf("requests served: %d before the restart, %d in all: the load did not run across it", served, ok)
	}
	t.Logf("%d requests, %d failed, across a supervisor SIGKILL and restart", ok, len(failures))
	for _, pid := range pids {
		if !e2e.Alive(pid) {
			t.Errorf("worker %d is gone: it was not taken over", pid)
		}
	}

	// The counter table is the same: 3 counted before, 2 more admitted.
	for i := range 3 {
		want := 200
		if i == 2 {
			want = 429
		}
		if r := do(t, c, "GET", base+"/limited", "", nil, nil); r.status != want {
			t.Errorf("limited request %d after the takeover: %d, want %d", i+4, r.status, want)
		}
	}

	// A configuration change reaches the workers taken over.
	writeFile(t, filepath.Join(dir, "apisix.yaml"), routes(obj{"id": 3, "uri": "/new", "plugins": obj{"mocking": obj{"response_example": "new"}}}))
	eventually(t, 10*time.Second, func() error {
		// both workers: new connections each time
		for range 8 {
			r, err := tryDo(&http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}, "GET", base+"/new", "", nil, nil)
			if err != nil || r.status != 200 || r.body != "new" {
				return fmt.Errorf("/new: %v %d %q", err, r.status, r.body)
			}
		}
		return nil
	})

	second.Stopped.Store(true)
	second.Signal(syscall.SIGTERM)
	select {
	case <-second.Done:
	case <-time.After(15 * time.Second):
		t.Fatal("the second supervisor did not stop on SIGTERM")
	}
	if code := second.Cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("the second supervisor exited with %d", code)
	}
	for _, pid := range pids {
		if !e2e.WaitExited(pid, 5*time.Second) {
			t.Errorf("worker %d still runs after its new supervisor stopped", pid)
		}
	}
}

// TestSupervisorRestartedOnChangedConfig: config.yaml changes while the
// node has no supervisor; the one started then replaces the orphaned
// workers one by one, as a SIGHUP would (each serves until its successor
// is ready, then drains), without a failed request.
func TestSupervisorRestartedOnChangedConfig(t *testing.T) {
	requirePerCore(t)
	up := textUpstream(t, "ok")
	dir, port := takeoverNode(t, routesYAML(obj{"id": 1, "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}))
	base := fmt.Sprintf("http://127.0.0.1:%d", port)
	var pids []int
	e2e.KillAtEnd(t, &pids)

	first := startNodeProc(t, dir, "first")
	pids = workerPIDs(first.WaitLog(`msg="worker ready"`, 2, 10*time.Second))
	load := startSteadyLoad(base + "/hello")
	time.Sleep(300 * time.Millisecond)
	first.Stopped.Store(true)
	first.Signal(syscall.SIGKILL)
	<-first.Done
	first.WaitLog(`msg="supervisor gone`, 2, 5*time.Second)
	// A setting every worker reads: the workers are replaced.
	conf := strings.Replace(perCoreConfig(port, 2), "error_log_level: info", "error_log_level: info\n  http:\n    keepalive_requests: 500", 1)
	writeFile(t, filepath.Join(dir, "config.yaml"), conf)

	second := startNodeProc(t, dir, "second")
	second.WaitLog(`msg="took over the workers a previous supervisor left"`, 1, 10*time.Second)
	replaced := second.WaitLog(`msg="worker replaced"`, 2, 15*time.Second)
	// the old ones drain and exit
	for _, pid := range pids {
		if !e2e.WaitExited(pid, 15*time.Second) {
			t.Errorf("replaced worker %d did not exit", pid)
		}
	}
	pids = append(pids, workerPIDs(replaced)...)
	time.Sleep(300 * time.Millisecond)
	ok, failures := load.End()
	if len(failures) > 0 {
		t.Errorf("%d of %d requests failed across the restart on a changed config.yaml; first: %v", len(failures), ok+int64(len(failures)), failures[:min(5, len(failures))])
	}
	t.Logf("%d requests, %d failed", ok, len(failures))
	for _, pid := range workerPIDs(replaced) {
		if slices.Contains(pids[:2], pid) {
			t.Errorf("worker %d was kept, want it replaced", pid)
		}
	}
}
