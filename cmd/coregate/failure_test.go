package main

import (
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// resetConn closes c with an RST instead of a FIN.
func resetConn(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		_ = tc.SetLinger(0)
	}
	_ = c.Close()
}

// TestUpstreamMisbehaves: origins that reset, cut an answer short or send
// garbage. Failures before an answer are retried or answered 502; a cut
// answer reaches the client cut, and the gateway keeps serving.
func TestUpstreamMisbehaves(t *testing.T) {
	t.Parallel()
	resetter := newRawUpstream(t, func(c *rawConn) { resetConn(c.Conn) })
	resetAfterHead := newRawUpstream(t, func(c *rawConn) {
		_, _, _ = c.ReadRequest()
		resetConn(c.Conn)
	})
	cut := newRawUpstream(t, func(c *rawConn) {
		req, _, err := c.ReadRequest()
		if err != nil {
			return
		}
		if req.URL.Path == "/cut-chunked" {
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n10\r\n0123456789")
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"+strings.Repeat("x", 50))
	})
	garbage := newRawUpstream(t, func(c *rawConn) {
		_, _, _ = c.ReadRequest()
		_, _ = io.WriteString(c, "SSH-2.0-OpenSSH_9.6\r\n\r\n")
	})
	badChunk := newRawUpstream(t, func(c *rawConn) {
		_, _, _ = c.ReadRequest()
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4\r\nabcd\r\nzz\r\n")
		_, _ = c.BR.ReadByte()
	})
	good := textUpstream(t, "good")
	g := startGateway(t, routesYAML(
		obj{"id": "reset", "uri": "/reset", "upstream": upstreamOf(nodes(resetter.Addr()), nil)},
		obj{"id": "reset-after-head", "uri": "/reset-after-head", "upstream": upstreamOf(nodes(resetAfterHead.Addr()), nil)},
		obj{"id": "reset-then-good", "uri": "/reset-then-good", "upstream": upstreamOf(nodes(resetter.Addr(), good.Addr()), nil)},
		obj{"id": "cut", "uri": "/cut*", "upstream": upstreamOf(nodes(cut.Addr()), nil)},
		obj{"id": "garbage", "uri": "/garbage", "upstream": upstreamOf(nodes(garbage.Addr()), nil)},
		obj{"id": "bad-chunk", "uri": "/bad-chunk", "upstream": upstreamOf(nodes(badChunk.Addr()), nil)},
		obj{"id": "good", "uri": "/good", "upstream": upstreamOf(nodes(good.Addr()), nil)},
	), "")
	c := newClient(t)
	for _, p := range []string{"/reset", "/reset-after-head", "/garbage"} {
		r := do(t, c, "GET", g.url(p), "", nil, nil)
		if r.status != 502 || r.header.Get("X-APISIX-Upstream-Status") != "502" {
			t.Errorf("%s: %d %q, want 502", p, r.status, r.header.Get("X-APISIX-Upstream-Status"))
		}
	}
	for i := range 4 {
		if r := do(t, c, "GET", g.url("/reset-then-good"), "", nil, nil); r.status != 200 || r.body != "good" {
			t.Errorf("/reset-then-good %d: %d %q", i, r.status, r.body)
		}
	}
	for _, p := range []string{"/cut", "/cut-chunked", "/bad-chunk"} {
		_, err := tryDo(c, "GET", g.url(p), "", nil, nil)
		if err == nil {
			t.Errorf("%s: a cut answer reached the client whole", p)
		}
	}
	if r := do(t, c, "GET", g.url("/good"), "", nil, nil); r.status != 200 || r.body != "good" {
		t.Errorf("after the failures: %d %q", r.status, r.body)
	}
}

// TestCloseDelimitedCut: an origin that resets its connection in the
// middle of a body it delimits by closing. The gateway sends such a body
// to an HTTP/1.1 client chunked, so that the reset reaches the client as
// a cut (no last chunk, the connection closed), not as a whole answer;
// the same body ending with a clean close ends with the last chunk.
func TestCloseDelimitedCut(t *testing.T) {
	t.Parallel()
	reset := make(chan struct{}, 1)
	up := newRawUpstream(t, func(c *rawConn) {
		req, _, err := c.ReadRequest()
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n0123456789")
		if req.URL.Path == "/clean" {
			return
		}
		select {
		case <-reset: // the client saw the first bytes
		case <-c.Quit:
		}
		resetConn(c.Conn)
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")

	c := dialGateway(t, g)
	_, _ = io.WriteString(c, "GET /clean HTTP/1.1\r\nHost: x\r\n\r\n")
	br := newReader(c)
	if r := readOne(t, br, "GET"); r.status != 200 || r.body != "0123456789" || r.close {
		t.Errorf("clean close: %d %q close=%v", r.status, r.body, r.close)
	}

	c = dialGateway(t, g)
	_, _ = io.WriteString(c, "GET /reset HTTP/1.1\r\nHost: x\r\n\r\n")
	var got []byte
	buf := make([]byte, 4096)
	for !strings.Contains(string(got), "0123456789\r\n") {
		n, err := c.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("before the reset: %v after %q", err, got)
		}
	}
	reset <- struct{}{}
	rest, err := io.ReadAll(c)
	got = append(got, rest...)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("after the reset: %v", err)
	}
	head, body, _ := strings.Cut(string(got), "\r\n\r\n")
	if !strings.Contains(head, "\r\nTransfer-Encoding: chunked\r\n") || body != "a\r\n0123456789\r\n" {
		t.Errorf("a reset answer reached the client as:\n%q", got)
	}
	g.waitLog(`upstream connection failed while .*connection reset by peer`, 1, 5*time.Second)
}

// TestUpstreamSendsTooMuch: bytes after the end of an answer (a second,
// unasked answer; a body after a HEAD answer) never reach the client and
// never answer a later request.
func TestUpstreamSendsTooMuch(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(req *http.Request, _ []byte, _ int) (string, bool) {
			switch {
			case req.URL.Path == "/extra":
				return okResponse("ok") + okResponse("WRONG"), true
			case req.Method == "HEAD":
				return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG", true
			}
			return okResponse("right"), true
		})
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	br := newReader(c)
	type ans struct {
		Status int
		Body   string
	}
	var got []ans
	for _, req := range []struct{ method, path string }{
		{"GET", "/extra"}, {"GET", "/next"}, {"HEAD", "/head"}, {"GET", "/next"}, {"GET", "/next"},
	} {
		_, _ = io.WriteString(c, req.method+" "+req.path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		r := readOne(t, br, req.method)
		got = append(got, ans{r.status, r.body})
	}
	want := []ans{{200, "ok"}, {200, "right"}, {200, ""}, {200, "right"}, {200, "right"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
}

// TestEarlyAnswer: the origin answers before it read the whole request
// body. The client gets the answer with Connection: close, and the
// connection ends.
func TestEarlyAnswer(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		req, err := http.ReadRequest(c.BR)
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, okResponse("early"))
		_, _ = io.Copy(io.Discard, req.Body)
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	_, _ = io.WriteString(c, "POST /e HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\nsome")
	br := newReader(c)
	r := readOne(t, br, "POST")
	if r.status != 200 || r.body != "early" || !r.close {
		t.Errorf("got %d %q close=%v; want 200 early with Connection: close", r.status, r.body, r.close)
	}
	expectClosed(t, c, br, 2*time.Second)
}

// TestClientGoes: a client that leaves in the middle of an answer, or
// while the origin is still thinking, frees the upstream connection; the
// gateway serves on.
func TestClientGoes(t *testing.T) {
	t.Parallel()
	var copyFailed atomic.Int32
	release := make(chan struct{})
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/big":
			if _, err := io.Copy(w, randomBody(64<<20, 2)); err != nil {
				copyFailed.Add(1)
			}
		case "/slow":
			select {
			case <-release:
			case <-time.After(3 * time.Second):
			}
			_, _ = io.WriteString(w, "late")
		default:
			_, _ = io.WriteString(w, "ok")
		}
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	_, _ = io.WriteString(c, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	eventually(t, 5*time.Second, func() error {
		if copyFailed.Load() != 1 {
			return errString("the origin is still sending to a client that left")
		}
		return nil
	})
	c2 := dialGateway(t, g)
	_, _ = io.WriteString(c2, "GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")
	time.Sleep(100 * time.Millisecond)
	c2.Close()
	close(release)
	cl := newClient(t)
	for i := range 5 {
		if r := do(t, cl, "GET", g.url("/after"), "", nil, nil); r.status != 200 || r.body != "ok" {
			t.Fatalf("request %d after clients left: %d %q", i, r.status, r.body)
		}
	}
}

// TestConcurrentClients: many clients at once, each with its own bodies,
// get exactly their own answers.
func TestConcurrentClients(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	up2 := echoUpstream(t)
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr(), up2.Addr()), nil)}), "")
	var wg sync.WaitGroup
	var failed atomic.Int32
	for w := range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newClient(t)
			for i := range 40 {
				path := fmt.Sprintf("/w%d/r%d", w, i)
				var body io.Reader
				method := "GET"
				wantBody := ""
				if i%3 == 1 {
					method = "POST"
					wantBody = strings.Repeat(path, 1+i*50)
					body = strings.NewReader(wantBody)
				} else if i%3 == 2 {
					method = "PUT"
					wantBody = strings.Repeat(path, 1+i)
					body = io.MultiReader(strings.NewReader(wantBody)) // chunked: length unknown
				}
				r, err := tryDo(c, method, g.url(path), "", nil, body)
				want := method + " " + path + " " + wantBody
				if err != nil || r.status != 200 || r.body != want {
					if failed.Add(1) < 5 {
						t.Errorf("%s %s: %v %d %q", method, path, err, r.status, cut(r.body))
					}
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n > 0 {
		t.Errorf("%d of 640 requests failed", n)
	}
}

func cut(s string) string {
	if len(s) > 80 {
		return s[:80] + "..."
	}
	return s
}
