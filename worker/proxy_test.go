package worker

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"coregate/admin/spec"
)

// testSpec decodes upstreams and routes given as APISIX JSON objects.
func testSpec(t testing.TB, upstreams []string, routes ...string) *spec.Spec {
	t.Helper()
	s := &spec.Spec{}
	for _, u := range upstreams {
		x, err := spec.DecodeUpstream([]byte(u))
		if err != nil {
			t.Fatal(err)
		}
		s.Upstreams = append(s.Upstreams, x)
	}
	for _, r := range routes {
		x, err := spec.DecodeRoute([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, x)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

// runWorker runs a worker with cfg (listening on a free loopback port
// unless cfg.Listen says where) and s; done receives Run's result. The
// worker stops with the test.
func runWorker(t *testing.T, cfg Config, s *spec.Spec) (*Worker, chan error) {
	t.Helper()
	if cfg.Listen == nil {
		cfg.Listen = []string{"127.0.0.1:0"}
	}
	w := New(cfg)
	if err := w.SetSpec(s, nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	stopped := make(chan struct{}) // closed when Run returned, whoever reads done
	go func() {
		done <- w.Run(context.Background())
		close(stopped)
	}()
	select {
	case <-w.Ready():
	case <-stopped:
		t.Fatal(<-done)
	case <-time.After(5 * time.Second):
		t.Fatal("worker did not start")
	}
	t.Cleanup(func() {
		select {
		case <-stopped:
			return
		default:
		}
		// Stop returns once the loops are done (COREGATE.md, change
		// 13); Run returns then too.
		go func() { _ = w.Stop(context.Background()) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
			t.Error("worker did not stop")
		}
	})
	return w, done
}

// startWorker runs a worker with default settings on upstreams and routes
// given as APISIX JSON objects.
func startWorker(t *testing.T, upstreams []string, routes ...string) *Worker {
	t.Helper()
	w, _ := runWorker(t, Config{}, testSpec(t, upstreams, routes...))
	return w
}

func hostPort(u string) string { return strings.TrimPrefix(u, "http://") }

func TestProxyBasic(t *testing.T) {
	var conns atomic.Int32
	up := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "path=%s xff=%s real=%s host=%s", r.URL.Path, r.Header.Get("X-Forwarded-For"), r.Header.Get("X-Real-IP"), r.Host)
	}))
	up.Config.ConnState = func(c net.Conn, s http.ConnState) {
		if s == http.StateNew {
			conns.Add(1)
		}
	}
	up.Start()
	defer up.Close()
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/hello*","upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL)))
	base := "http://" + w.Addr().String()
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	for i := 0; i < 20; i++ {
		resp, err := cl.Get(base + "/hello/x")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		want := "path=/hello/x xff=127.0.0.1 real=127.0.0.1 host=" + w.Addr().String()
		if resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, b, want)
		}
		if got := resp.Header.Get("Server"); got != "APISIX/"+spec.CompatVersion {
			t.Fatalf("Server = %q", got)
		}
	}
	if n := conns.Load(); n != 1 {
		t.Fatalf("upstream saw %d connections, want 1 (keep-alive reuse)", n)
	}
	resp, err := cl.Get(base + "/nothing")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 404 || string(b) != `{"error_msg":"404 Route Not Found"}`+"\n" {
		t.Fatalf("got %d %q", resp.StatusCode, b)
	}
}

// unusedAddr is a loopback address that nothing listens on: a port the
// kernel gave out and that was closed again.
func unusedAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	return addr
}

func TestProxyRefused(t *testing.T) {
	dead := unusedAddr(t)
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/x","upstream":{"nodes":{"%s":1}}}`, dead))
	// Two requests on one connection: a 502 for a request that has no
	// body leaves the connection open, as nginx does.
	c, err := net.Dial("tcp", w.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		_, _ = io.WriteString(c, "GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 502 || resp.Header.Get("X-APISIX-Upstream-Status") != "502" || !strings.Contains(string(b), "502 Bad Gateway") || resp.Close {
			t.Fatalf("request %d: got %d close=%v %v %q", i, resp.StatusCode, resp.Close, resp.Header, b)
		}
	}
}

func TestProxyPipelined(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, r.URL.Path)
	}))
	defer up.Close()
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/*","upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL)))
	c, err := net.Dial("tcp", w.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var req strings.Builder
	for i := 0; i < 5; i++ {
		fmt.Fprintf(&req, "GET /p%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
	}
	_, _ = io.WriteString(c, req.String())
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	for i := 0; i < 5; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != fmt.Sprintf("/p%d", i) {
			t.Fatalf("response %d: %q", i, b)
		}
	}
}

// scriptedOrigin accepts connections on loopback and runs serve for each;
// it returns the address and how many connections it accepted.
func scriptedOrigin(t *testing.T, serve func(n int, c net.Conn, br *bufio.Reader)) (string, *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var accepted atomic.Int32
	var conns []net.Conn
	var mu sync.Mutex
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := int(accepted.Add(1))
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				serve(n, c, bufio.NewReader(c))
			}()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return l.Addr().String(), &accepted
}

// TestProxyStaleKeepAliveRetried: the origin takes the second request of a
// kept-alive connection and closes without answering. An idempotent
// request is replayed on a new connection (no retry is configured); a POST
// is not, and gets 502.
func TestProxyStaleKeepAliveRetried(t *testing.T) {
	var posts atomic.Int32
	addr, accepted := scriptedOrigin(t, func(n int, c net.Conn, br *bufio.Reader) {
		for i := 1; ; i++ {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.Method == "POST" {
				posts.Add(1)
				return
			}
			if n == 1 && i == 2 {
				return
			}
			if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(req.URL.Path), req.URL.Path); err != nil {
				return
			}
		}
	})
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/*","upstream":{"nodes":{"%s":1},"retries":0}}`, addr))
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 5 * time.Second}
	defer cl.CloseIdleConnections()
	base := "http://" + w.Addr().String()
	for i := range 3 {
		resp, err := cl.Get(fmt.Sprintf("%s/g%d", base, i))
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("/g%d", i); resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("GET %d: %d %q, want 200 %q", i, resp.StatusCode, b, want)
		}
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("origin accepted %d connections, want 2", n)
	}
	resp, err := cl.Post(base+"/p", "text/plain", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 || posts.Load() != 1 {
		t.Errorf("POST on a connection that fails: %d, origin saw it %d times; want 502, once", resp.StatusCode, posts.Load())
	}
}

// TestProxyInvalidChunkedBody: an invalid chunk in a request body that came
// with its head, on a new upstream connection, is answered 400 at once and
// nothing of the body reaches the origin.
func TestProxyInvalidChunkedBody(t *testing.T) {
	var got atomic.Value
	got.Store("")
	addr, _ := scriptedOrigin(t, func(_ int, c net.Conn, br *bufio.Reader) {
		b, _ := io.ReadAll(br)
		got.Store(string(b))
	})
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/*","upstream":{"nodes":{"%s":1}}}`, addr))
	c, err := net.Dial("tcp", w.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(3 * time.Second))
	_, _ = io.WriteString(c, "POST /u HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"+
		"5\r\nhello\r\nzz\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 400 || !resp.Close {
		t.Errorf("got %d close=%v, want 400 with Connection: close", resp.StatusCode, resp.Close)
	}
	time.Sleep(50 * time.Millisecond)
	if s := got.Load().(string); strings.Contains(s, "hello") || strings.Contains(s, "smuggled") {
		t.Errorf("origin read %q", s)
	}
}

func TestChunkedBodyOverMaxSize(t *testing.T) {
	var got atomic.Int64
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n, _ := io.Copy(io.Discard, r.Body)
		got.Add(n)
	}))
	defer up.Close()
	w, _ := runWorker(t, Config{MaxBodySize: 1000},
		testSpec(t, nil, fmt.Sprintf(`{"id":"1","uri":"/up","upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL))))
	c, err := net.Dial("tcp", w.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	chunk := strings.Repeat("x", 600)
	req := "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" +
		fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk) + fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk) + "0\r\n\r\n"
	_, _ = io.WriteString(c, req)
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 413 || !resp.Close {
		t.Fatalf("got %d close=%v, want 413 and close", resp.StatusCode, resp.Close)
	}
	// A body under the limit passes.
	c2, err := net.Dial("tcp", w.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	small := "POST /up HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + fmt.Sprintf("%x\r\n%s\r\n", len(chunk), chunk) + "0\r\n\r\n"
	_, _ = io.WriteString(c2, small)
	_ = c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err = http.ReadResponse(bufio.NewReader(c2), nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("small body: %v %v", resp, err)
	}
}

func TestPrunePools(t *testing.T) {
	h := newHarness(t, helloSpec(t, 1))
	w := h.w
	if len(w.pools) != 1 {
		t.Fatalf("pools = %d, want 1", len(w.pools))
	}
	u, err := spec.DecodeUpstream([]byte(`{"id":"1","nodes":{"127.0.0.1:1981":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	r, err := spec.DecodeRoute([]byte(`{"id":"1","uri":"/hello","upstream_id":"1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if err := w.SetSpec(&spec.Spec{Routes: []*spec.Route{r}, Upstreams: []*spec.Upstream{u}}, nil); err != nil {
		t.Fatal(err)
	}
	w.prunePools()
	if len(w.pools) != 1 {
		t.Fatal("a pool with an idle connection was dropped")
	}
	uc := w.pools["127.0.0.1:1980"].get()
	uc.close()
	w.prunePools()
	if len(w.pools) != 0 {
		t.Fatalf("pool of a removed node kept: %d pools", len(w.pools))
	}
}

// TestCutAnswerReset: an answer whose end, for the client, is the close of
// its connection (HTTP/1.0, a body without a length) and that the upstream
// cuts short with a reset reaches the client as a reset, not as a close
// that would pass it off as whole. The same answer ended by the
// upstream's FIN still ends with a close; an HTTP/1.1 client of the cut
// answer gets it chunked without the last chunk, then a close.
func TestCutAnswerReset(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/x","upstream":{"nodes":{"%s":1}}}`, l.Addr()))
	for _, tc := range []struct {
		name, req, resp string
		cut             bool   // the upstream resets after resp, else sends FIN
		seen            string // what the client has before the upstream's end
		wantReset       bool
	}{
		{"HTTP/1.0, close-delimited, cut", "GET /x HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\npartial", true, "\r\n\r\npartial", true},
		{"HTTP/1.0, chunked, cut", "GET /x HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n7\r\npartial\r\n", true, "\r\n\r\npartial", true},
		{"HTTP/1.0, close-delimited, whole", "GET /x HTTP/1.0\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\npartial", false, "\r\n\r\npartial", false},
		{"HTTP/1.1, close-delimited, cut", "GET /x HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200 OK\r\n\r\npartial", true, "\r\n7\r\npartial\r\n", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			end := make(chan struct{})
			upErr := make(chan error, 1)
			go func() {
				c, err := l.Accept()
				if err != nil {
					upErr <- err
					return
				}
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						upErr <- err
						return
					}
					if line == "\r\n" {
						break
					}
				}
				if _, err := io.WriteString(c, tc.resp); err != nil {
					upErr <- err
					return
				}
				<-end
				if tc.cut {
					_ = c.(*net.TCPConn).SetLinger(0)
				}
				upErr <- nil
			}()
			c, err := net.Dial("tcp", w.Addr().String())
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			if _, err := io.WriteString(c, tc.req); err != nil {
				t.Fatal(err)
			}
			var got []byte
			buf := make([]byte, 4096)
			for !strings.Contains(string(got), tc.seen) {
				n, err := c.Read(buf)
				got = append(got, buf[:n]...)
				if err != nil {
					close(end)
					t.Fatalf("before the upstream's end: %v after %q", err, got)
				}
			}
			close(end)
			if err := <-upErr; err != nil {
				t.Fatal(err)
			}
			for err == nil {
				var n int
				n, err = c.Read(buf)
				got = append(got, buf[:n]...)
			}
			if reset := errors.Is(err, syscall.ECONNRESET); reset != tc.wantReset || !reset && err != io.EOF {
				t.Fatalf("the client's connection ended with %v after %q; want a reset: %v", err, got, tc.wantReset)
			}
			if strings.HasSuffix(string(got), "0\r\n\r\n") {
				t.Fatalf("a cut answer ended with the last chunk: %q", got)
			}
		})
	}
}
