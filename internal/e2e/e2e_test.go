package e2e

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"coregate/admin/nodeconf"
)

// The harness's own tests run a stand-in for the gateway: this test
// binary, run again with E2E_FAKE_GATEWAY set, reads the port from the
// config.yaml its -c names, listens on it, says msg="worker ready" and
// exits 0 on SIGTERM (or with the status E2E_FAKE_EXIT names at once).
func TestMain(m *testing.M) {
	if os.Getenv("E2E_FAKE_GATEWAY") != "" {
		os.Exit(fakeGateway())
	}
	os.Exit(m.Run())
}

func fakeGateway() int {
	if code := os.Getenv("E2E_FAKE_EXIT"); code != "" {
		n, _ := strconv.Atoi(code)
		fmt.Printf("exiting at once gorace=%q\n", os.Getenv("GORACE"))
		return n
	}
	if len(os.Args) < 3 || os.Args[1] != "-c" {
		fmt.Println("usage: -c config.yaml")
		return 2
	}
	b, err := os.ReadFile(os.Args[2])
	if err != nil {
		fmt.Println(err)
		return 1
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM)
	l, err := net.Listen("tcp", "127.0.0.1:"+strings.TrimSpace(string(b)))
	if err != nil {
		fmt.Println(err)
		return 1
	}
	go func() {
		_ = http.Serve(l, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "fake") }))
	}()
	fmt.Printf("level=INFO msg=\"worker ready\" pid=%d args=%q gorace=%q\n", os.Getpid(), strings.Join(os.Args[3:], " "), os.Getenv("GORACE"))
	<-sig
	fmt.Println("level=INFO msg=\"stopped\"")
	return 0
}

func fakeOptions(t *testing.T) Options {
	bin, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	return Options{Bin: bin, Env: []string{"E2E_FAKE_GATEWAY=1"},
		Config: func(port int) string { return strconv.Itoa(port) }, APISIX: "routes: []\n#END\n"}
}

// TestStartStop: Start writes both files, waits until the process
// listens and says it is ready; a request is answered; Stop ends it with
// SIGTERM and exit status 0; Restart runs it again on the same directory
// and port.
func TestStartStop(t *testing.T) {
	o := fakeOptions(t)
	o.Listen, o.Ready, o.Args = true, 1, []string{"--x"}
	g := Start(t, o)
	if b, err := os.ReadFile(filepath.Join(g.Dir, "apisix.yaml")); err != nil || string(b) != o.APISIX {
		t.Fatalf("apisix.yaml: %q %v", b, err)
	}
	if r := Do(t, NewClient(t), "GET", g.URL("/"), "", nil, nil); r.Status != 200 || r.Body != "fake" {
		t.Fatalf("GET: %d %q", r.Status, r.Body)
	}
	if line := g.WaitLog(`msg="worker ready"`, 1, time.Second)[0]; LogField(line, "args") != "--x" || LogField(line, "pid") != strconv.Itoa(g.PID()) {
		t.Fatalf("ready line %q", line)
	}
	g2 := g.Restart(t, Options{Bin: o.Bin, Env: o.Env, Listen: true})
	if g2.Dir != g.Dir || g2.Port != g.Port || g2.PID() == g.PID() {
		t.Fatalf("restart: %s:%d pid %d, was %s:%d pid %d", g2.Dir, g2.Port, g2.PID(), g.Dir, g.Port, g.PID())
	}
	if code := g.Cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(g.Log(), `msg="stopped"`) {
		t.Fatalf("stopped with status %d:\n%s", code, g.Log())
	}
	g2.Stop()
	g2.Stopped.Store(true)
	if Alive(g2.PID()) {
		t.Fatalf("pid %d alive after Stop", g2.PID())
	}
}

// TestRaceExitSleepOff: the processes Start and Run run have GORACE with
// atexit_sleep_ms=0 after the options the test process has, and an Env
// entry of the test's own replaces it.
func TestRaceExitSleepOff(t *testing.T) {
	t.Setenv("GORACE", "halt_on_error=1")
	const want = "halt_on_error=1 atexit_sleep_ms=0"
	o := fakeOptions(t)
	o.Ready = 1
	g := Start(t, o)
	if got := LogField(g.WaitLog(`msg="worker ready"`, 1, time.Second)[0], "gorace"); got != want {
		t.Errorf("Start: GORACE %q, want %q", got, want)
	}
	o.Env = []string{"E2E_FAKE_GATEWAY=1", "GORACE=halt_on_error=0"}
	g = Start(t, o)
	if got := LogField(g.WaitLog(`msg="worker ready"`, 1, time.Second)[0], "gorace"); got != "halt_on_error=0" {
		t.Errorf("Start with GORACE in Env: GORACE %q, want halt_on_error=0", got)
	}
	t.Setenv("E2E_FAKE_GATEWAY", "1")
	t.Setenv("E2E_FAKE_EXIT", "0")
	out, err := Run(o.Bin, 10*time.Second)
	if got := LogField(strings.TrimSpace(out), "gorace"); err != nil || got != want {
		t.Errorf("Run: GORACE %q (%v), want %q; output %q", got, err, want, out)
	}
}

// TestStartFailsOnExit: a process that exits at start fails the test at
// once, naming its output, instead of waiting out the bound.
func TestStartFailsOnExit(t *testing.T) {
	o := fakeOptions(t)
	o.Env = append(o.Env, "E2E_FAKE_EXIT=3")
	o.Listen = true
	start := time.Now()
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }() // Fatalf on fakeT panics to stop the helper
		Start(ft, o)
	}()
	if !strings.Contains(ft.msg, "gateway exited at start") || !strings.Contains(ft.msg, "exiting at once") {
		t.Fatalf("fatal message %q", ft.msg)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("took %v to see the exit", d)
	}
}

// fakeT records a Fatalf and stops the caller by panicking; its cleanups
// are the test's.
type fakeT struct {
	testing.TB
	msg string
}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	panic(f.msg)
}

func (f *fakeT) Errorf(format string, args ...any) { f.msg += fmt.Sprintf(format, args...) }

// TestLogFile: with a LogFile the output is read from the file, and
// WaitLog goes on waiting after the process exited (workers would write).
func TestLogFile(t *testing.T) {
	o := fakeOptions(t)
	o.LogFile = filepath.Join(t.TempDir(), "out.log")
	o.Ready = 1
	g := Start(t, o)
	if g.Out != nil || !strings.Contains(g.Log(), `msg="worker ready"`) {
		t.Fatalf("log %q", g.Log())
	}
	g.Stopped.Store(true)
	g.Signal(syscall.SIGTERM)
	<-g.Done
	go func() {
		time.Sleep(100 * time.Millisecond)
		f, err := os.OpenFile(o.LogFile, os.O_APPEND|os.O_WRONLY, 0)
		if err == nil {
			_, _ = io.WriteString(f, "level=INFO msg=\"late line\"\n")
			f.Close()
		}
	}()
	g.WaitLog(`msg="late line"`, 1, 5*time.Second)
}

// TestFreePort: the ports handed out are distinct and free.
func TestFreePort(t *testing.T) {
	seen := map[int]bool{}
	for range 50 {
		p := FreePort(t)
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			t.Fatalf("port %d not free: %v", p, err)
		}
		l.Close()
	}
}

// TestTLSPort: the TLS port paired with a listen port is free, another
// than any listen port's, and the same each time it is asked for; the
// section SSLListen writes has the gateway listen there; Start refuses a
// config.yaml that would listen for TLS on APISIX's fixed 9443, and takes
// one that listens where SSLListen says or not at all.
func TestTLSPort(t *testing.T) {
	p, q := FreePort(t), FreePort(t)
	tp := TLSPort(p)
	if tp == p || tp == q || TLSPort(q) == tp || TLSPort(p) != tp {
		t.Fatalf("TLSPort(%d) = %d, TLSPort(%d) = %d, then %d", p, tp, q, TLSPort(q), TLSPort(p))
	}
	l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(tp))
	if err != nil {
		t.Fatalf("port %d not free: %v", tp, err)
	}
	l.Close()
	conf := func(ssl string) func(int) string {
		return func(port int) string {
			return fmt.Sprintf("apisix:\n  node_listen: [%d]\n  enable_control: false\n%s", port, ssl)
		}
	}
	c, _, err := nodeconf.Parse([]byte(conf(SSLListen(p))(p)), "config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if got, want := c.APISIX.SSL.Listen, []nodeconf.Listen{{IP: "127.0.0.1", Port: tp}}; !c.APISIX.SSL.Enable ||
		len(got) != 1 || got[0] != want[0] {
		t.Fatalf("SSLListen(%d): ssl %+v, want enabled on %v", p, c.APISIX.SSL, want)
	}
	o := fakeOptions(t)
	o.Config = conf("")
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }() // Fatalf on fakeT panics to stop the helper
		Start(ft, o)
	}()
	if !strings.Contains(ft.msg, "listens for TLS on port 9443") {
		t.Fatalf("a config.yaml without apisix.ssl: fatal message %q", ft.msg)
	}
	for _, ssl := range []string{SSLListen(p), "  ssl:\n    enable: false\n"} {
		ft := &fakeT{TB: t}
		checkTLSPorts(ft, conf(ssl)(p))
		if ft.msg != "" {
			t.Errorf("%q: %s", ssl, ft.msg)
		}
	}
	// The Control API on APISIX's fixed 9090 is refused alike.
	ft = &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		checkTLSPorts(ft, fmt.Sprintf("apisix:\n  node_listen: [%d]\n%s", p, SSLListen(p)))
	}()
	if !strings.Contains(ft.msg, "serves the Control API on port 9090") {
		t.Fatalf("a config.yaml without enable_control: false: fatal message %q", ft.msg)
	}
}

// TestRawUpstream: a scripted origin records what it read and counts its
// connections; Eventually sees the count.
func TestRawUpstream(t *testing.T) {
	u := NewRawUpstream(t, func(c *RawConn) {
		c.ServeKeepAlive(func(req *http.Request, body []byte, n int) (string, bool) {
			return OKResponse(fmt.Sprintf("%s %s %d %d", req.Method, body, n, c.N)), n < 2
		})
	})
	c := Dial(t, u.Addr())
	_, _ = io.WriteString(c, "POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhiGET /b HTTP/1.1\r\nHost: x\r\n\r\n")
	br := NewReader(c)
	if r := ReadOne(t, br, "POST"); r.Body != "POST hi 1 1" {
		t.Fatalf("first answer %q", r.Body)
	}
	if r := ReadOne(t, br, "GET"); r.Body != "GET  2 1" {
		t.Fatalf("second answer %q", r.Body)
	}
	ExpectClosed(t, c, br, 5*time.Second)
	Eventually(t, 5*time.Second, func() error {
		if n := u.Accepted.Load(); n != 1 {
			return fmt.Errorf("%d connections", n)
		}
		return nil
	})
	if got := u.Received(); !strings.HasPrefix(got, "POST /a HTTP/1.1\r\n") || !strings.HasSuffix(got, "GET /b HTTP/1.1\r\nHost: x\r\n\r\n") {
		t.Fatalf("received %q", got)
	}
}

// TestStandaloneYAML: sections in name order, each a flow sequence, then
// the end flag.
func TestStandaloneYAML(t *testing.T) {
	got := StandaloneYAML(map[string][]Obj{
		"upstreams": {{"id": 1, "nodes": Nodes("a:1")}},
		"routes":    {{"uri": "/x", "upstream": UpstreamOf(Nodes("b:2"), Obj{"timeout": 1})}},
	})
	want := `routes: [{"upstream":{"nodes":{"b:2":1},"timeout":1,"type":"roundrobin"},"uri":"/x"}]` + "\n" +
		`upstreams: [{"id":1,"nodes":{"a:1":1}}]` + "\n#END\n"
	if got != want {
		t.Fatalf("got\n%s\nwant\n%s", got, want)
	}
}

// TestAdmin: the Admin API's URL, and its key sent as X-API-KEY.
func TestAdmin(t *testing.T) {
	u := NewHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.Method+" "+r.URL.Path+" "+r.Header.Get("X-API-KEY"))
	})
	port, _ := strconv.Atoi(u.Addr()[strings.LastIndexByte(u.Addr(), ':')+1:])
	a := Admin{Port: port, Key: "k1"}
	if r := a.Do(t, NewClient(t), "PUT", "routes/1", "{}"); r.Body != "PUT /apisix/admin/routes/1 k1" {
		t.Fatalf("%q", r.Body)
	}
	if r := (Admin{Port: port}).Do(t, NewClient(t), "GET", "routes", ""); r.Body != "GET /apisix/admin/routes " {
		t.Fatalf("no key: %q", r.Body)
	}
}

// TestHTTPSClient: every connection goes to the address given, with the
// URL's host as SNI and Host, verified against the roots; without keep-
// alive each request has a handshake of its own. DialTLS fails on a
// certificate not for the name.
func TestHTTPSClient(t *testing.T) {
	var conns atomic.Int32
	s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.TLS.ServerName+" "+r.Host+" "+r.URL.Path)
	}))
	s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
		if st == http.StateNew {
			conns.Add(1)
		}
	}
	s.StartTLS()
	t.Cleanup(s.Close)
	roots := x509.NewCertPool()
	roots.AddCert(s.Certificate())
	addr := strings.TrimPrefix(s.URL, "https://")
	for _, keepAlive := range []bool{false, true} {
		conns.Store(0)
		c := HTTPSClient(t, addr, &tls.Config{RootCAs: roots}, keepAlive)
		for range 3 {
			if r := Do(t, c, "GET", "https://example.com/x", "", nil, nil); r.Body != "example.com example.com /x" {
				t.Fatalf("%q", r.Body)
			}
		}
		if want := map[bool]int32{false: 3, true: 1}[keepAlive]; conns.Load() != want {
			t.Errorf("keep-alive %v: %d connections, want %d", keepAlive, conns.Load(), want)
		}
	}
	if c, err := DialTLS(t, addr, &tls.Config{RootCAs: roots, ServerName: "example.com"}); err != nil {
		t.Fatal(err)
	} else if c.ConnectionState().ServerName != "example.com" {
		t.Errorf("server name %q", c.ConnectionState().ServerName)
	}
	if _, err := DialTLS(t, addr, &tls.Config{RootCAs: roots, ServerName: "other.test"}); err == nil {
		t.Error("DialTLS took a certificate not for the name")
	}
}

// TestEtcdCluster: three members elect a leader; a value written through
// one is read through another; with one member killed the other two keep
// the quorum (a write passes, once a new leader is elected if the killed
// one led), with two killed the last one has no leader (/health 503, a
// write fails); started again by pid, the killed members rejoin and the
// value written meanwhile is on each.
func TestEtcdCluster(t *testing.T) {
	c := NewEtcdCluster(t, 3)
	c.Start()
	if n := len(c.Endpoints()); n != 3 {
		t.Fatalf("%d endpoints, want 3", n)
	}
	hc := &http.Client{Timeout: 3 * time.Second}
	kv := func(m *Etcd, op, body string) (string, error) {
		r, err := hc.Post(m.Client+"/v3/kv/"+op, "application/json", strings.NewReader(body))
		if err != nil {
			return "", err
		}
		defer r.Body.Close()
		b, err := io.ReadAll(r.Body)
		if err == nil && r.StatusCode != 200 {
			err = fmt.Errorf("%s: %d %s", op, r.StatusCode, b)
		}
		return string(b), err
	}
	// "k" is azE=, "v1" djE=, "v2" djI=.
	if _, err := kv(c.Members[0], "put", `{"key":"aw==","value":"djE="}`); err != nil {
		t.Fatal(err)
	}
	if b, err := kv(c.Members[2], "range", `{"key":"aw=="}`); err != nil || !strings.Contains(b, `"value":"djE="`) {
		t.Fatalf("read through another member: %s, %v", b, err)
	}
	if l := c.Leader(); l < 0 {
		t.Fatal("no member is the leader")
	}
	pid := c.Members[2].PID()
	c.Members[2].Kill()
	if Alive(pid) || c.Members[2].PID() != 0 {
		t.Fatalf("member 2 (pid %d) still runs", pid)
	}
	// Member 2 may have been the leader: a write waits for the next.
	Eventually(t, 10*time.Second, func() error {
		_, err := kv(c.Members[0], "put", `{"key":"aw==","value":"djI="}`)
		return err
	})
	c.Members[1].Kill()
	Eventually(t, 10*time.Second, func() error {
		r, err := hc.Get(c.Members[0].Client + "/health")
		if err != nil {
			return err
		}
		r.Body.Close()
		if r.StatusCode != 503 {
			return fmt.Errorf("/health of the last member: %d, want 503", r.StatusCode)
		}
		return nil
	})
	// To another key: a write that timed out may still be applied
	// once the quorum is back, if the last member held it as leader.
	if _, err := kv(c.Members[0], "put", `{"key":"cQ==","value":"djE="}`); err == nil {
		t.Fatal("a write passed with the quorum lost")
	}
	if l := c.Leader(); l != -1 {
		t.Fatalf("member %d leads with the quorum lost", l)
	}
	c.Start()
	for i, m := range c.Members {
		Eventually(t, 10*time.Second, func() error {
			if b, err := kv(m, "range", `{"key":"aw=="}`); err != nil || !strings.Contains(b, `"value":"djI="`) {
				return fmt.Errorf("member %d after the restart: %s, %v", i, b, err)
			}
			return nil
		})
	}
}
