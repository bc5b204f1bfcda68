package main

import (
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestBadRequestsRejected: malformed or ambiguous requests are answered by
// the gateway with the right status and Connection: close, the connection
// closes, and nothing reaches the origin.
func TestBadRequestsRejected(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(*http.Request, []byte, int) (string, bool) { return okResponse("ok"), true })
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	const host = "Host: x\r\n"
	manyHeaders := strings.Repeat("X-H: 1\r\n", 101)
	bigHeader := "X-Big: " + strings.Repeat("a", 33<<10) + "\r\n"
	tests := []struct {
		name   string
		raw    string
		status int
	}{
		{"CL and TE", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"TE and CL", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n0\r\n\r\n", 400},
		{"two different CL", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400},
		{"CL list", "POST / HTTP/1.1\r\n" + host + "Content-Length: 5, 6\r\n\r\nhello!", 400},
		{"CL negative", "POST / HTTP/1.1\r\n" + host + "Content-Length: -1\r\n\r\n", 400},
		{"CL plus sign", "POST / HTTP/1.1\r\n" + host + "Content-Length: +5\r\n\r\nhello", 400},
		{"CL inner space", "POST / HTTP/1.1\r\n" + host + "Content-Length: 1 0\r\n\r\n0123456789", 400},
		{"CL hex", "POST / HTTP/1.1\r\n" + host + "Content-Length: 0x10\r\n\r\n", 400},
		{"CL empty", "POST / HTTP/1.1\r\n" + host + "Content-Length: \r\n\r\n", 400},
		{"CL overflow", "POST / HTTP/1.1\r\n" + host + "Content-Length: 99999999999999999999999\r\n\r\n", 400},
		{"TE gzip", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: gzip\r\n\r\n", 501},
		{"TE chunked then gzip", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked, gzip\r\n\r\n0\r\n\r\n", 501},
		{"TE chunked twice", "POST / HTTP/1.1\r\n" + host + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"TE in HTTP/1.0", "POST / HTTP/1.0\r\n" + host + "Transfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n", 400},
		{"obs-fold", "GET / HTTP/1.1\r\n" + host + "X-A: 1\r\n folded\r\n\r\n", 400},
		{"space before colon", "GET / HTTP/1.1\r\n" + host + "X-A : 1\r\n\r\n", 400},
		{"NUL in value", "GET / HTTP/1.1\r\n" + host + "X-A: a\x00b\r\n\r\n", 400},
		{"bare CR in value", "GET / HTTP/1.1\r\n" + host + "X-A: a\rb\r\n\r\n", 400},
		{"bad name byte", "GET / HTTP/1.1\r\n" + host + "X(A): 1\r\n\r\n", 400},
		{"HTTP/2.0", "GET / HTTP/2.0\r\n" + host + "\r\n", 505},
		{"bad version", "GET / HTTP/1.x\r\n" + host + "\r\n", 400},
		{"HTTP/0.9", "GET /\r\n\r\n", 400},
		{"bad method", "G(T / HTTP/1.1\r\n" + host + "\r\n", 400},
		{"URI too long", "GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\n" + host + "\r\n", 414},
		{"too many headers", "GET / HTTP/1.1\r\n" + host + manyHeaders + "\r\n", 431},
		{"header too large", "GET / HTTP/1.1\r\n" + host + bigHeader + "\r\n", 431},
		{"missing Host", "GET / HTTP/1.1\r\nX-A: 1\r\n\r\n", 400},
		{"two Hosts", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", 400},
		{"bad path escape", "GET /%zz HTTP/1.1\r\n" + host + "\r\n", 400},
		{"path above root", "GET /../etc HTTP/1.1\r\n" + host + "\r\n", 400},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := dialGateway(t, g)
			// The gateway may answer before it read everything: write on
			// the side so that a reset cannot hide the answer.
			go func() { _, _ = io.WriteString(c, tc.raw) }()
			br := newReader(c)
			r := readOne(t, br, "GET")
			if r.status != tc.status {
				t.Errorf("status %d, want %d", r.status, tc.status)
			}
			if !r.close {
				t.Errorf("no Connection: close")
			}
			if got := r.header.Get("Server"); got != "APISIX/3.18.0" {
				t.Errorf("Server %q", got)
			}
			expectClosed(t, c, br, 2*time.Second)
		})
	}
	t.Cleanup(func() {
		// Runs after the parallel subtests.
		if n, got := up.Accepted.Load(), up.Received(); n != 0 || got != "" {
			t.Errorf("origin accepted %d connections and read %q", n, got)
		}
	})
}

// TestBadFieldLineInPieces: a bad field line that arrives after the start
// of its head, in a piece of its own, is answered 400 at once, as nginx
// answers it, while the client still waits for the head's end to matter
// (the header timeout is a minute away); nothing reaches the origin.
func TestBadFieldLineInPieces(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(*http.Request, []byte, int) (string, bool) { return okResponse("ok"), true })
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	for _, line := range []string{"X-A: 1\r\n folded\r\n", "X-A : 1\r\n", "X-A: a\x00b\r\n", "X(A): 1\r\n", "NoColon\r\n"} {
		t.Run(strings.TrimSpace(line), func(t *testing.T) {
			t.Parallel()
			c := dialGateway(t, g)
			if _, err := io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n"); err != nil {
				t.Fatal(err)
			}
			time.Sleep(100 * time.Millisecond) // read as a piece of its own
			sent := time.Now()
			go func() { _, _ = io.WriteString(c, line) }()
			_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
			br := newReader(c)
			r := readOne(t, br, "GET")
			if r.status != 400 || !r.close {
				t.Errorf("status %d (close %v), want 400 and the close", r.status, r.close)
			}
			if d := time.Since(sent); d > 5*time.Second {
				t.Errorf("answered %v after the bad line", d)
			}
			expectClosed(t, c, br, 2*time.Second)
		})
	}
	t.Cleanup(func() {
		if n, got := up.Accepted.Load(), up.Received(); n != 0 || got != "" {
			t.Errorf("origin accepted %d connections and read %q", n, got)
		}
	})
}

// TestInvalidChunkedBody: a request whose chunked body turns invalid after
// its head was forwarded is cut: the client gets 400 and the close, the
// origin a truncated request and never the request smuggled after it.
func TestInvalidChunkedBody(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(req *http.Request, _ []byte, _ int) (string, bool) {
			return okResponse(req.URL.Path), true
		})
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	const head = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	const bad = "5\r\nhello\r\nzz\r\n\r\nGET /smuggled HTTP/1.1\r\nHost: x\r\n\r\n"
	for _, tc := range []struct {
		name  string
		warm  bool // an idle upstream connection is waiting
		split bool // the bad chunk comes after the head was forwarded
	}{
		{"fresh connection", false, false},
		{"fresh connection, split", false, true},
		{"kept-alive connection", true, false},
		{"kept-alive connection, split", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.warm {
				if r := do(t, newClient(t), "GET", g.url("/warm"), "", nil, nil); r.status != 200 {
					t.Fatalf("warm-up: %d", r.status)
				}
			}
			c := dialGateway(t, g)
			if tc.split {
				_, _ = io.WriteString(c, head)
				time.Sleep(100 * time.Millisecond)
				_, _ = io.WriteString(c, bad)
			} else {
				_, _ = io.WriteString(c, head+bad)
			}
			br := newReader(c)
			start := time.Now()
			r := readOne(t, br, "POST")
			if r.status != 400 || !r.close {
				t.Errorf("answer %d, close %v; want 400 and Connection: close", r.status, r.close)
			}
			expectClosed(t, c, br, 2*time.Second)
			if took := time.Since(start); took > 2*time.Second {
				t.Errorf("closed after %v", took)
			}
		})
	}
	time.Sleep(100 * time.Millisecond)
	if got := up.Received(); strings.Contains(got, "smuggled") || strings.Contains(got, "zz") {
		t.Errorf("origin read past the invalid chunk:\n%q", got)
	}
}

// TestHostEmptyLabel: a Host with an empty label ("secure.test..") does
// not slip past a route bound to secure.test to the host-less route: it
// is answered 400 with the close, as nginx answers it
// (ngx_http_validate_host), in the Host field and in the authority of an
// absolute-form target, and nothing reaches either origin. One trailing
// dot is nginx's $host without it: the bound route's, whose upstream sees
// X-Forwarded-Host without the dot.
func TestHostEmptyLabel(t *testing.T) {
	t.Parallel()
	secure := headEchoUpstream(t)
	open := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(*http.Request, []byte, int) (string, bool) { return okResponse("open"), true })
	})
	g := startGateway(t, routesYAML(
		obj{"id": "secure", "uri": "/*", "hosts": []string{"secure.test"}, "upstream": upstreamOf(nodes(secure.Addr()), nil)},
		obj{"id": "open", "uri": "/*", "upstream": upstreamOf(nodes(open.Addr()), nil)},
	), "")
	for _, raw := range []string{
		"GET /x HTTP/1.1\r\nHost: secure.test..\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: secure.test..:80\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: secure..test\r\n\r\n",
		"GET /x HTTP/1.1\r\nHost: .\r\n\r\n",
		"GET http://secure.test../x HTTP/1.1\r\nHost: secure.test\r\n\r\n",
		"GET http://secure.test..:80/x HTTP/1.1\r\nHost: secure.test\r\n\r\n",
	} {
		c := dialGateway(t, g)
		go func() { _, _ = io.WriteString(c, raw) }()
		br := newReader(c)
		r := readOne(t, br, "GET")
		if r.status != 400 || !r.close {
			t.Errorf("%q: status %d (close %v), want 400 and the close: %s", raw, r.status, r.close, r.body)
		}
		expectClosed(t, c, br, 2*time.Second)
	}
	if n, got := open.Accepted.Load(), open.Received(); n != 0 || got != "" {
		t.Errorf("the open origin accepted %d connections and read %q", n, got)
	}
	if n := secure.Conns.Load(); n != 0 {
		t.Errorf("the secure origin accepted %d connections", n)
	}
	for _, raw := range []string{
		"GET /x HTTP/1.1\r\nHost: secure.test.\r\n\r\n",
		"GET http://Secure.Test.:80/x HTTP/1.1\r\nHost: other\r\n\r\n",
	} {
		r, _, _ := rawRequest(t, g, raw)
		if e := upstreamSaw(t, r); e.get("X-Forwarded-Host") != "secure.test" {
			t.Errorf("%q: X-Forwarded-Host %q, want secure.test", raw, e.get("X-Forwarded-Host"))
		}
	}
}
