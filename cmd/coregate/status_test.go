package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"coregate/internal/e2e"
	"coregate/node/supervisor"
)

// The live status page (/status, /status.json on the export server), read
// through the real binary: two workers under load, a route with the
// prometheus plugin, a health-checked upstream with a dead node.

// statusLoad sends GETs of paths in turn on new connections (so that the
// socket selector spreads them over the workers) from conc goroutines,
// until stopped, for at most 60 s and 100000 requests.
type statusLoad struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	sent   atomic.Int64
}

func startStatusLoad(t *testing.T, base string, paths []string, conc int) *statusLoad {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	l := &statusLoad{cancel: cancel}
	for g := range conc {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
			for i := g; ctx.Err() == nil && l.sent.Add(1) <= 100000; i++ {
				req, _ := http.NewRequestWithContext(ctx, "GET", base+paths[i%len(paths)], nil)
				if resp, err := c.Do(req); err == nil {
					_, _ = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
				}
				time.Sleep(2 * time.Millisecond)
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

func (l *statusLoad) stop() { l.cancel(); l.wg.Wait() }

// getStatus reads /status.json from the export server at base.
func getStatus(base string, hdr map[string]string) (supervisor.Status, int, error) {
	var st supervisor.Status
	req, err := http.NewRequest("GET", base+"/status.json", nil)
	if err != nil {
		return st, 0, err
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return st, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return st, resp.StatusCode, err
	}
	if resp.StatusCode != 200 {
		return st, resp.StatusCode, fmt.Errorf("/status.json: %d %s", resp.StatusCode, b)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/json" {
		return st, resp.StatusCode, fmt.Errorf("/status.json: Content-Type %q", ct)
	}
	return st, resp.StatusCode, json.Unmarshal(b, &st)
}

// TestStatusPage: under load over two workers, /status.json shows both
// running with non-zero request and connection rates and CPU, a share of
// the selector's connections each, fresh heartbeats; the route with the
// prometheus plugin with its status mix and p99; the checked upstream's
// dead node unhealthy. Headless Chromium renders /status: with JavaScript
// the page refreshes itself from /status.json, without it the server's
// table holds the same figures. A worker stopped shows stalled, its
// heartbeat old; one killed shows in its slot's restarts.
func TestStatusPage(t *testing.T) {
	cpus := requirePerCore(t)
	up := textUpstream(t, "ok")
	dead := deadAddr(t)
	mport := freePort(t)
	const workers = 2
	g := startSupervisor(t, routesYAML(
		obj{"id": "web", "uri": "/web/*", "plugins": obj{"prometheus": obj{}},
			"upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "teapot", "uri": "/teapot", "plugins": obj{"prometheus": obj{},
			"mocking": obj{"response_example": "tea", "response_status": 418}}},
		obj{"id": "checked", "uri": "/checked", "upstream": obj{"type": "roundrobin",
			"nodes": nodeList(t, nodeSpec{addr: up.Addr(), weight: 1}, nodeSpec{addr: dead, weight: 1}),
			"checks": obj{"active": obj{"type": "tcp", "timeout": 0.5,
				"healthy":   obj{"interval": 1, "successes": 1},
				"unhealthy": obj{"interval": 1, "tcp_failures": 1}}}}},
	), exportConfig(workers, mport), workers, "--cpus", cpuList(cpus))
	base := fmt.Sprintf("http://127.0.0.1:%d", mport)
	ws := waitWorkers(t, g.cmd.Process.Pid, workers, 10*time.Second)
	pids := map[int]bool{}
	for _, w := range ws {
		pids[w.pid] = true
	}
	l := startStatusLoad(t, g.url(""), []string{"/web/a", "/web/b", "/teapot", "/web/c"}, 4)

	var st supervisor.Status
	eventually(t, 20*time.Second, func() error {
		var err error
		if st, _, err = getStatus(base, nil); err != nil {
			return err
		}
		if len(st.Workers) != workers {
			return fmt.Errorf("workers: %+v", st.Workers)
		}
		for _, w := range st.Workers {
			if w.State != "running" || !pids[w.PID] {
				return fmt.Errorf("worker %d: %+v, want running as one of %v", w.ID, w, pids)
			}
			if w.RequestsPerS <= 0 || w.AcceptedPerS <= 0 || w.CPUPercent <= 0 || w.SelectorShare <= 0 {
				return fmt.Errorf("worker %d idle under load: %+v", w.ID, w)
			}
		}
		if len(st.Routes) != 2 {
			return fmt.Errorf("routes: %+v, want web and teapot (those with prometheus)", st.Routes)
		}
		for _, r := range st.Routes {
			if r.RequestsPerS <= 0 || r.P99MS == nil {
				return fmt.Errorf("route %s idle under load: %+v", r.Route, r)
			}
		}
		if len(st.Upstreams) != 1 || len(st.Upstreams[0].Nodes) != 2 {
			return fmt.Errorf("upstreams: %+v", st.Upstreams)
		}
		for _, n := range st.Upstreams[0].Nodes {
			if want := map[bool]string{true: "unhealthy", false: "healthy"}[fmt.Sprintf("%s:%d", n.IP, n.Port) == dead]; n.Status != want {
				return fmt.Errorf("node %s:%d %s, want %s", n.IP, n.Port, n.Status, want)
			}
		}
		return nil
	})
	var share float64
	for _, w := range st.Workers {
		share += w.SelectorShare
		if w.HeartbeatAgeMS < 0 || w.HeartbeatAgeMS > 2000 {
			t.Errorf("worker %d: heartbeat %v ms old", w.ID, w.HeartbeatAgeMS)
		}
		if w.Restarts != 0 {
			t.Errorf("worker %d: %d restarts", w.ID, w.Restarts)
		}
	}
	if share < 0.999 || share > 1.001 {
		t.Errorf("selector shares add up to %v: %+v", share, st.Workers)
	}
	if st.Selector == "" || st.IntervalS < 0.5 || st.IntervalS > 3 {
		t.Errorf("selector %q, interval %v s", st.Selector, st.IntervalS)
	}
	for _, r := range st.Routes {
		mix := r.Status
		switch r.Route {
		case "web":
			if mix.S2xx == 0 || mix.S4xx != 0 || r.StatusPerS.S2xx <= 0 || mix.S2xx != r.RequestsTotal {
				t.Errorf("route web: %+v, want 2xx only", r)
			}
		case "teapot":
			if mix.S4xx == 0 || mix.S2xx != 0 || r.StatusPerS.S4xx <= 0 || mix.S4xx != r.RequestsTotal {
				t.Errorf("route teapot: %+v, want 4xx only", r)
			}
		default:
			t.Errorf("route %q listed", r.Route)
		}
	}

	t.Run("chromium", func(t *testing.T) {
		chromium := requireChromium(t)
		dir := t.TempDir()
		shot := filepath.Join(dir, "status.png")
		runChromium(t, chromium, dir, "--screenshot="+shot, base+"/status")
		if fi, err := os.Stat(shot); err != nil || fi.Size() < 10000 {
			t.Fatalf("screenshot %s: %v %v", shot, fi, err)
		}
		t.Logf("screenshot: %s", shot)

		// After its script ran: refreshed from /status.json, both
		// workers with a rate.
		dom := runChromium(t, chromium, dir, "--dump-dom", base+"/status")
		if m := regexp.MustCompile(`data-updates="(\d+)"`).FindStringSubmatch(dom); m == nil || m[1] == "0" {
			t.Errorf("the page's script did not refresh it:\n%s", dom)
		}
		checkWorkerRows(t, dom, workers)
		if strings.Contains(dom, "<script") && !strings.Contains(dom, `data-route="teapot"`) {
			t.Errorf("no teapot route row:\n%s", dom)
		}

		// Without JavaScript: the server's table, the same figures.
		dom = domWithoutScript(t, chromium, dir, base+"/status")
		if !strings.Contains(dom, `data-updates="0"`) {
			t.Errorf("the page changed with JavaScript off:\n%s", dom)
		}
		checkWorkerRows(t, dom, workers)
		for _, want := range []string{`data-route="web"`, `data-route="teapot"`, `class="status-unhealthy"`, `<table id="workers">`} {
			if !strings.Contains(dom, want) {
				t.Errorf("no %s in the page without JavaScript:\n%s", want, dom)
			}
		}
	})

	// A worker stopped: its heartbeat ages past a second and it shows
	// stalled; once it runs again it is back, beating.
	victim := ws[0]
	if err := syscall.Kill(victim.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	t.Cleanup(func() {
		if stopped {
			_ = syscall.Kill(victim.pid, syscall.SIGCONT)
		}
	})
	workerState := func(want string, age func(ms float64) bool) error {
		st, _, err := getStatus(base, nil)
		if err != nil {
			return err
		}
		for _, w := range st.Workers {
			if w.ID == victim.id && w.PID == victim.pid {
				if w.State != want || !age(w.HeartbeatAgeMS) {
					return fmt.Errorf("worker %d: %s, heartbeat %v ms old; want %s", w.ID, w.State, w.HeartbeatAgeMS, want)
				}
				return nil
			}
		}
		return fmt.Errorf("no worker %d (pid %d) in %+v", victim.id, victim.pid, st.Workers)
	}
	eventually(t, 10*time.Second, func() error {
		return workerState("stalled", func(ms float64) bool { return ms > 1000 })
	})
	if err := syscall.Kill(victim.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	stopped = false
	eventually(t, 10*time.Second, func() error {
		return workerState("running", func(ms float64) bool { return ms < 1000 })
	})

	// A worker killed: its slot counts the restart and shows the new
	// process.
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker respawned"`, 1, 10*time.Second)
	eventually(t, 10*time.Second, func() error {
		st, _, err := getStatus(base, nil)
		if err != nil {
			return err
		}
		for _, w := range st.Workers {
			want := uint64(0)
			if w.ID == victim.id {
				want = 1
			}
			if w.Restarts != want || w.State != "running" || w.PID == victim.pid || w.PID == 0 {
				return fmt.Errorf("after worker %d (pid %d) was killed: %+v", victim.id, victim.pid, st.Workers)
			}
		}
		return nil
	})
	l.stop()
	if l.sent.Load() < 100 {
		t.Errorf("only %d requests sent", l.sent.Load())
	}
}

var workerRowRE = regexp.MustCompile(`<tr data-worker="(\d+)">(?:<td[^>]*>[^<]*</td>){4}<td class="rps">([0-9.]+)</td>`)

// checkWorkerRows checks that the page's worker table has n rows, each
// with a non-zero request rate.
func checkWorkerRows(t *testing.T, dom string, n int) {
	t.Helper()
	rows := workerRowRE.FindAllStringSubmatch(dom, -1)
	if len(rows) != n {
		t.Errorf("%d worker rows, want %d:\n%s", len(rows), n, dom)
	}
	for _, r := range rows {
		if r[2] == "0.0" {
			t.Errorf("worker %s: %s req/s under load", r[1], r[2])
		}
	}
}

// requireChromium returns Debian's chromium, or skips the test when it is
// not installed unless CI=true, where that is a failure.
func requireChromium(t *testing.T) string {
	t.Helper()
	const path = "/usr/bin/chromium"
	if _, err := os.Stat(path); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s: %v (apt-get install chromium)", path, err)
		}
		t.Skipf("%s not installed (apt-get install chromium): %v", path, err)
	}
	return path
}

// runChromium runs headless Chromium on args (flags, then the URL) with a
// profile of its own under dir and 3 s of virtual time, and returns its
// output.
func runChromium(t *testing.T, chromium, dir string, args ...string) string {
	t.Helper()
	profile, err := os.MkdirTemp(dir, "profile")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, chromium, append([]string{"--headless", "--no-sandbox", "--disable-gpu",
		"--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update",
		"--disable-sync", "--user-data-dir=" + profile, "--window-size=1200,900", "--virtual-time-budget=3000"},
		args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.Output()
	endGroup(cmd)
	if err != nil {
		t.Fatalf("chromium %v: %v\n%s", args, err, stderr.String())
	}
	return string(out)
}

// endGroup ends what is left of the process group a Chromium started
// (Setpgid) once its first process exited: its helpers (zygote,
// renderer, crash handler) may outlive it a moment and still write to the
// profile the test's clean-up removes. It waits, up to 5 s, for the group
// to be gone.
func endGroup(cmd *exec.Cmd) {
	pgid := cmd.Process.Pid
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if syscall.Kill(-pgid, 0) == syscall.ESRCH {
			return
		}
	}
}

// domWithoutScript loads url in headless Chromium with JavaScript off
// (--blink-settings=scriptEnabled=false) and returns its DOM, read over
// the DevTools protocol's DOM domain: --dump-dom reads it with a script,
// which prints nothing when scripts are off.
func domWithoutScript(t *testing.T, chromium, dir, url string) string {
	t.Helper()
	profile, err := os.MkdirTemp(dir, "profile")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
		"--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--user-data-dir="+profile, "--window-size=1200,900", "--blink-settings=scriptEnabled=false",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0", url)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		e2e.Terminate(cmd, 10*time.Second)
		endGroup(cmd)
	}()
	// "DevTools listening on ws://127.0.0.1:PORT/devtools/browser/ID"
	found := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := regexp.MustCompile(`DevTools listening on ws://([^/\s]+)/`).FindStringSubmatch(sc.Text()); m != nil {
				select {
				case found <- m[1]:
				default:
				}
			}
		}
	}()
	var hostPort string
	select {
	case hostPort = <-found:
	case <-time.After(30 * time.Second):
		t.Fatal("chromium: no DevTools address on its stderr")
	}
	var dom string
	eventually(t, 20*time.Second, func() error {
		var targets []struct {
			Type, URL            string
			WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
		}
		resp, err := http.Get("http://" + hostPort + "/json/list")
		if err != nil {
			return err
		}
		err = json.NewDecoder(resp.Body).Decode(&targets)
		resp.Body.Close()
		if err != nil {
			return err
		}
		for _, tg := range targets {
			if tg.Type != "page" || tg.URL != url {
				continue
			}
			if dom, err = outerHTML(tg.WebSocketDebuggerURL); err != nil {
				return err
			}
			// The script is the body's last element: once the parser
			// reached it, the tables before it are whole.
			if !strings.Contains(dom, "<title>coregate status</title>") || !strings.Contains(dom, "<script") {
				return fmt.Errorf("page not loaded yet: %s", dom)
			}
			return nil
		}
		return fmt.Errorf("no page target of %s in %+v", url, targets)
	})
	return dom
}

// outerHTML asks the DevTools page target at ws for its document's HTML.
func outerHTML(ws string) (string, error) {
	c, _, err := websocket.DefaultDialer.Dial(ws, nil)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	call := func(id int, method string, params any) (json.RawMessage, error) {
		if err := c.WriteJSON(map[string]any{"id": id, "method": method, "params": params}); err != nil {
			return nil, err
		}
		for {
			var m struct {
				ID     int
				Result json.RawMessage
				Error  *struct{ Message string }
			}
			if err := c.ReadJSON(&m); err != nil {
				return nil, err
			}
			if m.ID != id {
				continue // an event
			}
			if m.Error != nil {
				return nil, fmt.Errorf("%s: %s", method, m.Error.Message)
			}
			return m.Result, nil
		}
	}
	res, err := call(1, "DOM.getDocument", map[string]any{"depth": 0})
	if err != nil {
		return "", err
	}
	var doc struct{ Root struct{ NodeID int } }
	if err := json.Unmarshal(res, &doc); err != nil {
		return "", err
	}
	res, err = call(2, "DOM.getOuterHTML", map[string]any{"nodeId": doc.Root.NodeID})
	if err != nil {
		return "", err
	}
	var out struct{ OuterHTML string }
	err = json.Unmarshal(res, &out)
	return out.OuterHTML, err
}

// TestStatusKey: on an export address other than loopback, the status
// pages ask for an Admin API key as the Admin API takes it (X-API-KEY,
// api_key, the x_api_key cookie); without one, or with a wrong one, 401.
func TestStatusKey(t *testing.T) {
	up := textUpstream(t, "ok")
	mport := freePort(t)
	const key = "status-test-key-0123456789abcdef"
	startGatewayConfig(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string {
			return fmt.Sprintf(`apisix:
  node_listen: [%d]
  enable_control: false
%sdeployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
  admin:
    admin_key:
      - name: viewer
        key: %s
        role: viewer
nginx_config:
  worker_processes: 1
  error_log_level: info
plugin_attr:
  prometheus:
    export_uri: /m
    export_addr:
      ip: 0.0.0.0
      port: %d
`, port, e2e.SSLListen(port), key, mport)
		})
	base := fmt.Sprintf("http://127.0.0.1:%d", mport)
	get := func(path string, hdr map[string]string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest("GET", base+path, nil)
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	// The first sample may be older than the worker.
	eventually(t, 5*time.Second, func() error {
		st, _, err := getStatus(base, map[string]string{"X-API-KEY": key})
		if err == nil && len(st.Workers) != 1 {
			err = fmt.Errorf("workers: %+v", st.Workers)
		}
		return err
	})
	for _, x := range []struct {
		path string
		hdr  map[string]string
		want int
		body string
	}{
		{"/status.json", nil, 401, "missing apikey"},
		{"/status", nil, 401, "missing apikey"},
		{"/status.json", map[string]string{"X-API-KEY": "wrong"}, 401, "wrong apikey"},
		{"/status.json?api_key=wrong", nil, 401, "wrong apikey"},
		{"/status.json", map[string]string{"X-API-KEY": key}, 200, `"workers":[{"id":0`},
		{"/status?api_key=" + key, nil, 200, `<tr data-worker="0">`},
		{"/status", map[string]string{"Cookie": "x_api_key=" + key}, 200, `<table id="workers">`},
	} {
		code, body := get(x.path, x.hdr)
		if code != x.want || !strings.Contains(body, x.body) {
			t.Errorf("GET %s %v: %d %s, want %d with %q", x.path, x.hdr, code, body, x.want, x.body)
		}
	}
}
