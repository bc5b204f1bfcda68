package workerproc

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/internal/e2e"
	"coregate/internal/syncbuf"
	"coregate/node"
	"coregate/worker/control"
)

// testConfig is config.yaml for a worker listening on loopback port %d,
// and for TLS on loopback port %d.
const testConfig = `apisix:
  node_listen:
    - ip: 127.0.0.1
      port: %d
  ssl:
    listen:
      - ip: 127.0.0.1
        port: %d
  enable_admin: false
  enable_control: false
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
plugin_attr:
  prometheus:
    enable_export_server: false
nginx_config:
  error_log_level: info
  http:
    enable_access_log: false
`

// frame is one frame the worker sent.
type frame struct {
	t       control.Type
	payload []byte
}

// testWorker is Run in this process, driven over a socketpair as the
// supervisor drives a worker process: ctrl is the supervisor's end.
type testWorker struct {
	t      *testing.T
	ctrl   *control.Conn
	frames chan frame // closed when the worker's end is closed
	port   int
	tls    int    // the TLS listen port
	config string // config.yaml's path
	key    string // the takeover key
	log    syncbuf.Buffer
	cancel context.CancelFunc
	done   chan error
}

// startWorker runs a worker whose config.yaml listens on a free loopback
// port, and for TLS on another; with takeover, it waits to be taken over when its control socket
// closes. The worker is stopped, and Run waited for, when the test ends.
func startWorker(t *testing.T, takeover bool) *testWorker {
	t.Helper()
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := control.FromFile(os.NewFile(uintptr(fds[0]), "control-parent"))
	if err != nil {
		t.Fatal(err)
	}
	w := &testWorker{t: t, ctrl: ctrl, frames: make(chan frame, 64), port: e2e.FreePort(t), done: make(chan error, 1)}
	w.tls = e2e.TLSPort(w.port)
	w.config = filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(w.config, fmt.Appendf(nil, testConfig, w.port, w.tls), 0o644); err != nil {
		t.Fatal(err)
	}
	if takeover {
		w.key = fmt.Sprintf("test-%d-%d", os.Getpid(), time.Now().UnixNano())
	}
	go w.read(ctrl)
	ctx, cancel := context.WithCancel(context.Background())
	w.cancel = cancel
	o := Options{
		CPU: -1, Selector: "plain", Mode: "hash", Config: w.config, Takeover: w.key,
		Control: os.NewFile(uintptr(fds[1]), "control-child"),
		Log:     slog.New(slog.NewTextHandler(&w.log, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	go func() { w.done <- Run(ctx, o) }()
	t.Cleanup(func() {
		cancel()
		_ = w.ctrl.Close()
		select {
		case <-w.done:
		case <-time.After(15 * time.Second):
			t.Errorf("Run did not return after the test; log:\n%s", w.log.String())
		}
	})
	return w
}

// read passes the frames received on c to w.frames until c fails.
func (w *testWorker) read(c *control.Conn) {
	defer close(w.frames)
	for {
		t, payload, err := c.Recv()
		if err != nil {
			return
		}
		w.frames <- frame{t, payload}
	}
}

// next returns the next frame of type want, skipping the heartbeat's
// Stats unless it is what is wanted, into v (when not nil).
func (w *testWorker) next(want control.Type, v any) {
	w.t.Helper()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case f, ok := <-w.frames:
			if !ok {
				w.t.Fatalf("control socket closed waiting for frame %d; log:\n%s", want, w.log.String())
			}
			if f.t == control.Stats && want != control.Stats {
				continue
			}
			if f.t != want {
				w.t.Fatalf("frame %d (%s), want %d; log:\n%s", f.t, f.payload, want, w.log.String())
			}
			if v != nil {
				if err := json.Unmarshal(f.payload, v); err != nil {
					w.t.Fatalf("frame %d: %v: %s", f.t, err, f.payload)
				}
			}
			return
		case <-timeout:
			w.t.Fatalf("no frame %d in 10 s; log:\n%s", want, w.log.String())
		}
	}
}

// send sends a frame to the worker.
func (w *testWorker) send(t control.Type, v any) {
	w.t.Helper()
	if err := w.ctrl.Send(t, v); err != nil {
		w.t.Fatal(err)
	}
}

// sendSpec sends s whole, as Config.
func (w *testWorker) sendSpec(s *spec.Spec) {
	w.t.Helper()
	payload, err := control.EncodeSpec(s)
	if err != nil {
		w.t.Fatal(err)
	}
	if err := w.ctrl.SendPayload(control.Config, payload); err != nil {
		w.t.Fatal(err)
	}
}

// configure sends s whole and waits for its Applied and the worker's
// Ready.
func (w *testWorker) configure(s *spec.Spec) {
	w.t.Helper()
	w.sendSpec(s)
	var a control.AppliedMsg
	w.next(control.Applied, &a)
	if a.Error != "" || a.Routes != len(s.Routes) {
		w.t.Fatalf("Applied %+v, want %d routes", a, len(s.Routes))
	}
	var r control.ReadyMsg
	w.next(control.Ready, &r)
	if r.ID != 0 || r.PID != os.Getpid() || r.Selector != "plain" {
		w.t.Fatalf("Ready %+v", r)
	}
}

// wait waits for Run to return, and returns its error.
func (w *testWorker) wait() error {
	w.t.Helper()
	select {
	case err := <-w.done:
		w.done <- err // for the cleanup
		return err
	case <-time.After(10 * time.Second):
		w.t.Fatalf("Run did not return in 10 s; log:\n%s", w.log.String())
		return nil
	}
}

// get requests path from the worker and returns the status and body.
func (w *testWorker) get(path string) (int, string, error) {
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d%s", w.port, path))
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// upstream is an origin on loopback that answers every request with its
// path.
func upstream(t *testing.T) string {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "origin "+r.URL.Path)
	}))
	t.Cleanup(s.Close)
	return strings.TrimPrefix(s.URL, "http://")
}

// routes is a configuration of one route per uri to origin.
func routes(t *testing.T, origin string, uris ...string) *spec.Spec {
	t.Helper()
	return more(t, &spec.Spec{}, origin, uris...)
}

// more is base with one more route per uri to origin: base's own routes
// are kept, so that base to it is a Delta.
func more(t *testing.T, base *spec.Spec, origin string, uris ...string) *spec.Spec {
	t.Helper()
	s := &spec.Spec{Routes: slices.Clone(base.Routes)}
	for _, uri := range uris {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r%d","uri":%q,"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, len(s.Routes), uri, origin))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, r)
	}
	s.SetHash()
	return s
}

// TestRunServes: a worker listens (on its listen port and its TLS port)
// only once its first configuration is built, says Ready, serves it,
// applies a Delta against it, beats with Stats that count what it served,
// and on Drain stops listening and returns.
func TestRunServes(t *testing.T) {
	origin := upstream(t)
	w := startWorker(t, false)
	time.Sleep(100 * time.Millisecond) // Run is waiting for its configuration
	for _, p := range []int{w.port, w.tls} {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			_ = c.Close()
			t.Fatalf("the worker listens on %d before its first configuration", p)
		}
	}

	base := routes(t, origin, "/one")
	w.configure(base)
	if status, body, err := w.get("/one"); err != nil || status != 200 || body != "origin /one" {
		t.Fatalf("GET /one: %d %q %v", status, body, err)
	}
	c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", w.tls))
	if err != nil {
		t.Fatalf("the TLS listener: %v", err)
	}
	_ = c.Close()

	payload, ok, err := control.EncodeDelta(base, more(t, base, origin, "/two"))
	if err != nil || !ok {
		t.Fatalf("EncodeDelta: %v %v", ok, err)
	}
	if err := w.ctrl.SendPayload(control.Delta, payload); err != nil {
		t.Fatal(err)
	}
	var a control.AppliedMsg
	w.next(control.Applied, &a)
	if a.Error != "" || a.Routes != 2 {
		t.Fatalf("Applied %+v after the Delta, want 2 routes", a)
	}
	// its CPU time, which the supervisor paces by, is counted
	if a.BuildCPUUS <= 0 || a.BuildCPUUS > a.BuildUS+1000 {
		t.Errorf("Applied %+v: a build's CPU time is not counted, or more than its wall clock", a)
	}
	// (its garbage, AllocBytes, is counted as the runtime counts small
	// objects, a span at a time as a P's cache takes or returns one: a
	// Delta of one route may read 0; TestGCCost counts builds of MiBs)
	if status, body, err := w.get("/two"); err != nil || status != 200 || body != "origin /two" {
		t.Fatalf("GET /two: %d %q %v", status, body, err)
	}

	// The heartbeat counts what was served: two connections, two requests.
	deadline := time.Now().Add(5 * time.Second)
	for {
		var s control.StatsMsg
		w.next(control.Stats, &s)
		if s.Accepted >= 2 && s.Requests >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Stats %+v 5 s after two requests", s)
		}
	}

	w.send(control.Drain, control.DrainMsg{TimeoutMS: 1000})
	if err := w.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	for _, line := range []string{`msg=draining timeout=1s`, `msg=drained`} {
		if !strings.Contains(w.log.String(), line) {
			t.Errorf("log without %q:\n%s", line, w.log.String())
		}
	}
	for _, p := range []int{w.port, w.tls} {
		if c, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", p)); err == nil {
			_ = c.Close()
			t.Errorf("the worker still listens on %d after it drained", p)
		}
	}
}

// TestRunRefusesConfig: a configuration that does not decode is answered
// with its error and not served; a Delta against nothing held asks for the
// whole configuration; the next good Config is served.
func TestRunRefusesConfig(t *testing.T) {
	origin := upstream(t)
	w := startWorker(t, false)
	if err := w.ctrl.SendPayload(control.Config, []byte(`{"routes":`)); err != nil {
		t.Fatal(err)
	}
	var a control.AppliedMsg
	w.next(control.Applied, &a)
	if a.Error == "" || a.Resync {
		t.Fatalf("Applied %+v for a Config that does not decode, want its error", a)
	}
	base := routes(t, origin, "/one")
	payload, ok, err := control.EncodeDelta(base, more(t, base, origin, "/two"))
	if err != nil || !ok {
		t.Fatalf("EncodeDelta: %v %v", ok, err)
	}
	if err := w.ctrl.SendPayload(control.Delta, payload); err != nil {
		t.Fatal(err)
	}
	w.next(control.Applied, &a)
	if a.Error == "" || !a.Resync {
		t.Fatalf("Applied %+v for a Delta against nothing held, want Resync", a)
	}
	w.configure(routes(t, origin, "/one"))
	if status, _, err := w.get("/one"); err != nil || status != 200 {
		t.Fatalf("GET /one: %d %v", status, err)
	}
}

// TestRunDrainBeforeConfig: a worker told to drain before its first
// configuration returns at once, having served nothing.
func TestRunDrainBeforeConfig(t *testing.T) {
	w := startWorker(t, false)
	w.send(control.Drain, control.DrainMsg{TimeoutMS: 1000})
	if err := w.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestRunFatal: a worker that cannot read its config.yaml says why
// (Fatal) and Run returns the error.
func TestRunFatal(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	ctrl, err := control.FromFile(os.NewFile(uintptr(fds[0]), "control-parent"))
	if err != nil {
		t.Fatal(err)
	}
	defer ctrl.Close()
	missing := filepath.Join(t.TempDir(), "config.yaml")
	err = Run(context.Background(), Options{
		CPU: -1, Selector: "plain", Mode: "hash", Config: missing,
		Control: os.NewFile(uintptr(fds[1]), "control-child"),
		Log:     slog.New(slog.DiscardHandler),
	})
	if err == nil || !strings.Contains(err.Error(), missing) {
		t.Fatalf("Run with no config.yaml: %v", err)
	}
	typ, payload, rerr := ctrl.Recv()
	var m control.FatalMsg
	if rerr != nil || typ != control.Fatal || json.Unmarshal(payload, &m) != nil || m.Error != err.Error() {
		t.Fatalf("frame %d %s (%v), want Fatal %q", typ, payload, rerr, err)
	}
}

// TestRunSupervisorGone: a worker whose control socket closes drains when
// it has no takeover key, and stops when its context ends.
func TestRunSupervisorGone(t *testing.T) {
	origin := upstream(t)
	t.Run("closed", func(t *testing.T) {
		w := startWorker(t, false)
		w.configure(routes(t, origin, "/one"))
		_ = w.ctrl.Close()
		if err := w.wait(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if !strings.Contains(w.log.String(), `msg="control socket closed: draining"`) {
			t.Errorf("log:\n%s", w.log.String())
		}
	})
	t.Run("context", func(t *testing.T) {
		w := startWorker(t, false)
		w.configure(routes(t, origin, "/one"))
		w.cancel()
		if err := w.wait(); err != nil {
			t.Fatalf("Run: %v", err)
		}
		if !strings.Contains(w.log.String(), `msg=draining`) {
			t.Errorf("log:\n%s", w.log.String())
		}
	})
}

// TestRunTakenOver: a worker with a takeover key whose control socket
// closes serves on, and waits on its takeover socket; a supervisor that
// connects is sent Hello (the worker listens, the fingerprint of its
// config.yaml), the connection is its control socket from then on, and it
// takes a Config and a Drain on it.
func TestRunTakenOver(t *testing.T) {
	origin := upstream(t)
	w := startWorker(t, true)
	w.configure(routes(t, origin, "/one"))
	_ = w.ctrl.Close()

	addr := control.TakeoverAddr(w.key, 0, os.Getpid())
	var uc *net.UnixConn
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: addr, Net: "unix"})
		if err == nil {
			uc = c
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no takeover socket %s in 5 s: %v; log:\n%s", addr, err, w.log.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Served meanwhile, with the configuration held.
	if status, _, err := w.get("/one"); err != nil || status != 200 {
		t.Fatalf("GET /one without a supervisor: %d %v", status, err)
	}
	typ, payload, files, err := control.RecvFiles(uc)
	if err != nil || typ != control.Hello {
		t.Fatalf("frame %d %s (%v), want Hello", typ, payload, err)
	}
	for _, f := range files {
		_ = f.Close()
	}
	var h control.HelloMsg
	if err := json.Unmarshal(payload, &h); err != nil {
		t.Fatal(err)
	}
	nc, _, err := nodeconf.Load(w.config)
	if err != nil {
		t.Fatal(err)
	}
	if h.Proto != control.TakeoverProto || h.ID != 0 || h.PID != os.Getpid() || !h.Ready || h.Settings != node.Settings(nc) || len(h.Files) != 0 {
		t.Fatalf("Hello %+v", h)
	}

	w.ctrl = control.New(uc)
	w.frames = make(chan frame, 64)
	go w.read(w.ctrl)
	w.sendSpec(routes(t, origin, "/one", "/two"))
	var a control.AppliedMsg
	w.next(control.Applied, &a)
	if a.Error != "" || a.Routes != 2 {
		t.Fatalf("Applied %+v from the new supervisor, want 2 routes", a)
	}
	if status, _, err := w.get("/two"); err != nil || status != 200 {
		t.Fatalf("GET /two: %d %v", status, err)
	}
	w.send(control.Drain, control.DrainMsg{TimeoutMS: 1000})
	if err := w.wait(); err != nil {
		t.Fatalf("Run: %v", err)
	}
}

// TestLoopTurned: a heartbeat goes out while the loop's tick count moves,
// and before its first tick; not while it stands still after that.
func TestLoopTurned(t *testing.T) {
	for _, c := range []struct {
		last, now uint64
		want      bool
	}{
		{0, 0, true},  // not ticking yet (no connection so far)
		{0, 3, true},  // started
		{3, 7, true},  // turning
		{7, 7, false}, // stuck in one event
		{9, 10, true}, // one tick is enough
		{10, 10, false},
	} {
		if got := loopTurned(c.last, c.now); got != c.want {
			t.Errorf("loopTurned(%d, %d) = %v, want %v", c.last, c.now, got, c.want)
		}
	}
}
