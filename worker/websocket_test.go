package worker

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorilla/websocket"
	"github.com/panjf2000/gnet/v2"

	"coregate/admin/spec"
	"coregate/worker/accesslog"
)

// wsOrigin is a WebSocket server on loopback. serve runs for each
// connection upgraded; ended counts the connections whose handler
// returned, and errs their last read's error.
type wsOrigin struct {
	url   string
	ended atomic.Int32
	mu    sync.Mutex
	errs  []error
}

func newWSOrigin(t *testing.T, serve func(c *websocket.Conn) error) *wsOrigin {
	t.Helper()
	o := &wsOrigin{}
	srv := httptest.NewServer(o.handler(serve))
	t.Cleanup(srv.Close)
	o.url = srv.URL
	return o
}

// handler upgrades each request and runs serve on its connection.
func (o *wsOrigin) handler(serve func(c *websocket.Conn) error) http.Handler {
	up := websocket.Upgrader{ReadBufferSize: 64 << 10, WriteBufferSize: 64 << 10}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer c.Close()
		err = serve(c)
		o.mu.Lock()
		o.errs = append(o.errs, err)
		o.mu.Unlock()
		o.ended.Add(1)
	})
}

// echo sends every message back as it came, streamed.
func echo(c *websocket.Conn) error {
	for {
		typ, r, err := c.NextReader()
		if err != nil {
			return err
		}
		wr, err := c.NextWriter(typ)
		if err != nil {
			return err
		}
		if _, err := io.Copy(wr, r); err != nil {
			return err
		}
		if err := wr.Close(); err != nil {
			return err
		}
	}
}

func wsRoute(origin string, extra string) string {
	return fmt.Sprintf(`{"id":"1","uri":"/ws*","enable_websocket":true%s,"upstream":{"nodes":{"%s":1}}}`, extra, hostPort(origin))
}

func wsDial(t *testing.T, d *websocket.Dialer, url string) *websocket.Conn {
	t.Helper()
	c, resp, err := d.Dial(url, nil)
	if err != nil {
		t.Fatalf("dial %s: %v (%v)", url, err, resp)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// echoRound sends msg and checks it comes back whole, the read running
// beside the write so that neither direction waits for the other.
func echoRound(t *testing.T, c *websocket.Conn, msg []byte) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	got := make(chan []byte, 1)
	rerr := make(chan error, 1)
	go func() {
		_, b, err := c.ReadMessage()
		if err != nil {
			rerr <- err
			return
		}
		got <- b
	}()
	if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
		t.Fatal(err)
	}
	select {
	case b := <-got:
		if !bytes.Equal(b, msg) {
			t.Fatalf("echo: got %d bytes, want %d (equal: false)", len(b), len(msg))
		}
	case err := <-rerr:
		t.Fatal(err)
	}
}

// onWorkerLoop runs f on w's event loop, which owns its connections.
func onWorkerLoop(t *testing.T, w *Worker, f func()) {
	t.Helper()
	done := make(chan struct{})
	h := w.loopRef.Load()
	if h == nil {
		t.Fatal("no event loop")
	}
	err := h.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		f()
		close(done)
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("loop did not run the task")
	}
}

// tunnels counts the client connections in csTunnel.
func tunnels(t *testing.T, w *Worker) int {
	n := 0
	onWorkerLoop(t, w, func() {
		for i := 0; i < w.live.Len(); i++ {
			if w.live.At(i).state == csTunnel {
				n++
			}
		}
	})
	return n
}

// waitFor polls cond for up to d.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	end := time.Now().Add(d)
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func TestWebsocketEcho(t *testing.T) {
	o := newWSOrigin(t, echo)
	w := startWorker(t, nil, wsRoute(o.url, ""))
	c, resp, err := websocket.DefaultDialer.Dial("ws://"+w.Addr().String()+"/ws/echo", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if resp.StatusCode != 101 || !strings.EqualFold(resp.Header.Get("Upgrade"), "websocket") ||
		!strings.EqualFold(resp.Header.Get("Connection"), "upgrade") || resp.Header.Get("Server") == "" {
		t.Fatalf("101 head: %d %v", resp.StatusCode, resp.Header)
	}
	for i := 0; i < 50; i++ {
		echoRound(t, c, []byte(fmt.Sprintf("message %d %s", i, strings.Repeat("x", i*100))))
	}
	if n := tunnels(t, w); n != 1 {
		t.Fatalf("%d tunnels, want 1", n)
	}
}

// TestWebsocketBigMessage: a 16 MiB message each way, through the
// back-pressure of both directions.
func TestWebsocketBigMessage(t *testing.T) {
	o := newWSOrigin(t, echo)
	w := startWorker(t, nil, wsRoute(o.url, ""))
	c := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
	msg := make([]byte, 16<<20)
	for i := range msg {
		msg[i] = byte(i * 7)
	}
	echoRound(t, c, msg)
	echoRound(t, c, []byte("after"))
}

// TestWebsocketClientCloses: the client's close ends the upstream
// connection, and the tunnel.
func TestWebsocketClientCloses(t *testing.T) {
	o := newWSOrigin(t, echo)
	w := startWorker(t, nil, wsRoute(o.url, ""))
	for _, graceful := range []bool{true, false} {
		c := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
		echoRound(t, c, []byte("hello"))
		before := o.ended.Load()
		if graceful {
			_ = c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseNormalClosure, "bye"))
		}
		c.Close()
		waitFor(t, 5*time.Second, "the origin's handler to end", func() bool { return o.ended.Load() == before+1 })
		waitFor(t, 5*time.Second, "the tunnel to end", func() bool { return tunnels(t, w) == 0 })
		o.mu.Lock()
		err := o.errs[len(o.errs)-1]
		o.mu.Unlock()
		var ce *websocket.CloseError
		if graceful && !(errors.As(err, &ce) && ce.Code == websocket.CloseNormalClosure) {
			t.Fatalf("origin's read ended with %v, want the client's close frame", err)
		}
	}
}

// TestWebsocketServerCloses: the origin's close reaches the client,
// after the message it sent just before.
func TestWebsocketServerCloses(t *testing.T) {
	o := newWSOrigin(t, func(c *websocket.Conn) error {
		if err := c.WriteMessage(websocket.TextMessage, []byte(strings.Repeat("last words ", 10000))); err != nil {
			return err
		}
		return c.WriteMessage(websocket.CloseMessage, websocket.FormatCloseMessage(websocket.CloseGoingAway, "done"))
	})
	w := startWorker(t, nil, wsRoute(o.url, ""))
	c := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	_, b, err := c.ReadMessage()
	if err != nil || string(b) != strings.Repeat("last words ", 10000) {
		t.Fatalf("read: %d bytes, %v", len(b), err)
	}
	_, _, err = c.ReadMessage()
	var ce *websocket.CloseError
	if !errors.As(err, &ce) || ce.Code != websocket.CloseGoingAway {
		t.Fatalf("read after the origin's close: %v", err)
	}
	// Then the TCP close, passed on by the worker.
	_ = c.UnderlyingConn().SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.UnderlyingConn().Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatal("the connection stayed open after the origin closed")
	}
	waitFor(t, 5*time.Second, "the tunnel to end", func() bool { return tunnels(t, w) == 0 })
}

// TestWebsocketNotEnabled: on a route without enable_websocket, an
// Upgrade goes as a plain request, without Upgrade nor Connection, and
// the client gets the upstream's answer, no 101.
func TestWebsocketNotEnabled(t *testing.T) {
	var upgrade, conn atomic.Value
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		upgrade.Store(r.Header.Get("Upgrade"))
		conn.Store(r.Header.Get("Connection"))
		fmt.Fprint(w, "plain")
	}))
	defer up.Close()
	// Also a route that says false, and one whose service would say true
	// but which says false itself.
	for _, route := range []string{
		fmt.Sprintf(`{"id":"1","uri":"/ws*","upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL)),
		fmt.Sprintf(`{"id":"1","uri":"/ws*","enable_websocket":false,"upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL)),
	} {
		w := startWorker(t, nil, route)
		c, br := dialWorker(t, w)
		fmt.Fprint(c, "GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"+
			"Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || string(b) != "plain" {
			t.Fatalf("got %d %q, want 200 plain", resp.StatusCode, b)
		}
		if u, cn := upgrade.Load(), conn.Load(); u != "" || cn != "" {
			t.Fatalf("the upstream saw Upgrade %q, Connection %q", u, cn)
		}
		c.Close()
	}
}

// TestWebsocketServiceEnables: a service's enable_websocket holds for
// its routes, unless a route says otherwise.
func TestWebsocketServiceEnables(t *testing.T) {
	o := newWSOrigin(t, echo)
	s := &spec.Spec{}
	svc, err := spec.DecodeService([]byte(fmt.Sprintf(`{"id":"s","enable_websocket":true,"upstream":{"nodes":{"%s":1}}}`, hostPort(o.url))))
	if err != nil {
		t.Fatal(err)
	}
	s.Services = append(s.Services, svc)
	for _, r := range []string{
		`{"id":"1","uri":"/ws","service_id":"s"}`,
		`{"id":"2","uri":"/no","service_id":"s","enable_websocket":false}`,
	} {
		x, err := spec.DecodeRoute([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, x)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	w, _ := runWorker(t, Config{}, s)
	c := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
	echoRound(t, c, []byte("through the service"))
	if _, resp, err := websocket.DefaultDialer.Dial("ws://"+w.Addr().String()+"/no", nil); err == nil || resp == nil || resp.StatusCode == 101 {
		t.Fatalf("the route that says false upgraded: %v %v", err, resp)
	}
}

// TestWebsocketTLS: the tunnel over a TLS client connection, a big
// message included.
func TestWebsocketTLS(t *testing.T) {
	o := newWSOrigin(t, echo)
	w, ccfg := runTLSWorker(t, Config{}, nil, wsRoute(o.url, ""))
	ccfg = ccfg.Clone()
	ccfg.NextProtos = nil
	d := &websocket.Dialer{TLSClientConfig: ccfg, NetDial: func(network, addr string) (net.Conn, error) {
		return net.Dial(network, w.TLSAddr().String())
	}}
	c := wsDial(t, d, "wss://test.local/ws")
	if _, ok := c.UnderlyingConn().(*tls.Conn); !ok {
		t.Fatal("not a TLS connection")
	}
	echoRound(t, c, []byte("over tls"))
	echoRound(t, c, bytes.Repeat([]byte("0123456789abcdef"), 256<<10)) // 4 MiB
	c.Close()
	waitFor(t, 5*time.Second, "the tunnel to end", func() bool { return tunnels(t, w) == 0 })
}

// TestWebsocketIdleTimeout: a tunnel quiet for the route's timeout.read
// is closed, as nginx closes one quiet for proxy_read_timeout; one that
// keeps talking is not.
func TestWebsocketIdleTimeout(t *testing.T) {
	o := newWSOrigin(t, echo)
	w := startWorker(t, nil, wsRoute(o.url, `,"timeout":{"connect":1,"send":1,"read":0.6}`))
	talker := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
	quiet := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
	echoRound(t, quiet, []byte("once"))
	start := time.Now()
	closed := make(chan time.Duration, 1)
	go func() {
		_ = quiet.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, _, err := quiet.ReadMessage()
		if err != nil {
			closed <- time.Since(start)
		}
	}()
	// The talker speaks every 0.2 s for 1.5 s, over twice the timeout.
	for time.Since(start) < 1500*time.Millisecond {
		time.Sleep(200 * time.Millisecond)
		echoRound(t, talker, []byte("tick"))
	}
	select {
	case d := <-closed:
		if d < 500*time.Millisecond {
			t.Fatalf("closed after %v, before its timeout", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the quiet tunnel was not closed")
	}
}

// TestWebsocketManyIdle: 200 tunnels open and quiet at once, each still
// echoing, counted as active connections; all gone once the clients close.
func TestWebsocketManyIdle(t *testing.T) {
	const n = 200
	o := newWSOrigin(t, echo)
	w := startWorker(t, nil, wsRoute(o.url, ""))
	cs := make([]*websocket.Conn, n)
	for i := range cs {
		cs[i] = wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
	}
	if k := tunnels(t, w); k != n {
		t.Fatalf("%d tunnels, want %d", k, n)
	}
	if a := w.Stats().Active; a < n {
		waitFor(t, 3*time.Second, "the stats", func() bool { return w.Stats().Active >= n })
	}
	for i, c := range cs {
		echoRound(t, c, []byte(fmt.Sprint("socket ", i)))
	}
	for _, c := range cs {
		c.Close()
	}
	waitFor(t, 10*time.Second, "every tunnel to end", func() bool { return tunnels(t, w) == 0 })
	waitFor(t, 10*time.Second, "every origin handler to end", func() bool { return o.ended.Load() == n })
}

// TestWebsocketBackPressure: a client that does not read while the
// origin floods it: the worker holds at most about highWater for it
// (the origin's writes block instead), and the flood arrives whole once
// the client reads. The flood is larger than what the kernel's socket
// buffers between origin and client could take (tcpBufferMax): with a
// receive buffer that may grow to 32 MiB (tcp_rmem here), a flood of a
// fixed 16 MiB sometimes fitted in them whole, and the test failed with
// the worker holding nothing.
func TestWebsocketBackPressure(t *testing.T) {
	const size = 64 << 10
	msgs := (tcpBufferMax(t, "tcp_rmem")+2*tcpBufferMax(t, "tcp_wmem"))/size + 256 // and 16 MiB more
	var written atomic.Int64
	o := newWSOrigin(t, func(c *websocket.Conn) error {
		msg := bytes.Repeat([]byte{'f'}, size)
		for i := 0; i < msgs; i++ {
			_ = c.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if err := c.WriteMessage(websocket.BinaryMessage, msg); err != nil {
				return err
			}
			written.Add(size)
		}
		_, _, err := c.ReadMessage()
		return err
	})
	w := startWorker(t, nil, wsRoute(o.url, ""))
	d := &websocket.Dialer{ReadBufferSize: 4 << 10, NetDial: func(network, addr string) (net.Conn, error) {
		c, err := net.Dial(network, addr)
		if err == nil {
			_ = c.(*net.TCPConn).SetReadBuffer(16 << 10)
		}
		return c, err
	}}
	c := wsDial(t, d, "ws://"+w.Addr().String()+"/ws")
	// Let the flood fill what it can: the origin stops once the kernel's
	// buffers and the worker's are full.
	var last int64 = -1
	for i := 0; i < 100; i++ {
		time.Sleep(50 * time.Millisecond)
		if n := written.Load(); n == last {
			break
		} else {
			last = n
		}
	}
	if written.Load() >= int64(msgs*size) {
		t.Fatalf("the origin wrote all %d bytes to a client that reads nothing", msgs*size)
	}
	var in, out, paused int
	onWorkerLoop(t, w, func() {
		for i := 0; i < w.live.Len(); i++ {
			cc := w.live.At(i)
			out += cc.c.OutboundBuffered()
			if uc := cc.up; uc != nil {
				in += uc.io.InboundBuffered()
				if uc.pause.on {
					paused++
				}
			}
		}
	})
	if out > highWater+size || in > 1<<20 || paused != 1 {
		t.Fatalf("worker holds %d bytes out to the client, %d in from the origin, %d paused", out, in, paused)
	}
	_ = c.SetReadDeadline(time.Now().Add(30 * time.Second))
	for i := 0; i < msgs; i++ {
		_, b, err := c.ReadMessage()
		if err != nil || len(b) != size {
			t.Fatalf("message %d: %d bytes, %v", i, len(b), err)
		}
	}
}

// tcpBufferMax is the largest size the kernel lets a TCP socket's buffer
// grow to on its own (the third field of net.ipv4.tcp_rmem or tcp_wmem).
func tcpBufferMax(t *testing.T, name string) int {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/net/ipv4/" + name)
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b))
	if len(f) != 3 {
		t.Fatalf("%s: %q", name, b)
	}
	n, err := strconv.Atoi(f[2])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestWebsocketAccessLog: the tunnel's exchange is logged when it ends,
// with status 101 and the bytes sent to the client.
func TestWebsocketAccessLog(t *testing.T) {
	o := newWSOrigin(t, echo)
	path := filepath.Join(t.TempDir(), "access.log")
	f, err := accesslog.Compile("$status $upstream_status $request_uri", accesslog.EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	l, err := accesslog.Open(accesslog.Options{Path: path, Flush: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	w, _ := runWorker(t, Config{AccessLog: l, AccessLogFormat: f}, testSpec(t, nil, wsRoute(o.url, "")))
	c := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws?a=1")
	echoRound(t, c, []byte("logged later"))
	time.Sleep(200 * time.Millisecond)
	if b, _ := os.ReadFile(path); len(b) != 0 {
		t.Fatalf("logged while the tunnel is open: %q", b)
	}
	c.Close()
	want := "101 101 /ws?a=1\n"
	waitFor(t, 5*time.Second, "the access log line", func() bool {
		b, _ := os.ReadFile(path)
		return string(b) == want
	})
}

// TestWebsocketDrain: a draining worker keeps its tunnels until they
// close, and closes those left at the drain's deadline.
func TestWebsocketDrain(t *testing.T) {
	o := newWSOrigin(t, echo)
	t.Run("closed by the client", func(t *testing.T) {
		w, done := runWorker(t, Config{}, testSpec(t, nil, wsRoute(o.url, "")))
		c := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
		echoRound(t, c, []byte("before"))
		w.Drain(10 * time.Second)
		// Past drainIdle, the tunnel still works.
		time.Sleep(time.Duration(drainIdle) + 300*time.Millisecond)
		echoRound(t, c, []byte("while draining"))
		c.Close()
		waitRun(t, done, 3*time.Second)
	})
	t.Run("deadline", func(t *testing.T) {
		w, done := runWorker(t, Config{}, testSpec(t, nil, wsRoute(o.url, "")))
		c := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
		echoRound(t, c, []byte("before"))
		w.Drain(time.Second)
		if d := waitRun(t, done, 5*time.Second); d < 800*time.Millisecond {
			t.Fatalf("stopped after %v, before the deadline", d)
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, _, err := c.ReadMessage(); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
			t.Fatalf("the tunnel outlived the drain's deadline: %v", err)
		}
	})
}

// TestWebsocketHTTPSUpstream: the tunnel to an https node, through its
// TLS connection.
func TestWebsocketHTTPSUpstream(t *testing.T) {
	o := &wsOrigin{}
	origin := newTLSOrigin(t, o.handler(echo), nil)
	addr := hostPort(strings.Replace(origin.URL, "https://", "http://", 1))
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/ws","enable_websocket":true,"upstream":{"scheme":"https","nodes":{"%s":1}}}`, addr))
	c := wsDial(t, websocket.DefaultDialer, "ws://"+w.Addr().String()+"/ws")
	echoRound(t, c, []byte("to an https node"))
	echoRound(t, c, bytes.Repeat([]byte("z"), 4<<20))
	c.Close()
	waitFor(t, 5*time.Second, "the origin's handler to end", func() bool { return o.ended.Load() == 1 })
	waitFor(t, 5*time.Second, "the tunnel to end", func() bool { return tunnels(t, w) == 0 })
}
