package main

import (
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

const shortClientTimeouts = "  http:\n" +
	"    client_header_timeout: 1s\n" +
	"    client_body_timeout: 1s\n" +
	"    keepalive_timeout: 2s\n"

// TestClientTimeouts: a stalled head gets 408 after client_header_timeout,
// an idle kept-alive client is closed silently after keepalive_timeout, a
// stalled body ends the exchange after client_body_timeout.
func TestClientTimeouts(t *testing.T) {
	t.Parallel()
	var bodyEOF atomic.Int32
	up := newRawUpstream(t, func(c *rawConn) {
		for {
			req, err := http.ReadRequest(c.BR)
			if err != nil {
				return
			}
			if _, err := io.ReadAll(req.Body); err != nil {
				if req.URL.Path == "/body" {
					bodyEOF.Add(1) // the gateway cut the truncated request
				}
				return
			}
			if _, err := io.WriteString(c, okResponse("ok")); err != nil {
				return
			}
		}
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), shortClientTimeouts)

	t.Run("header", func(t *testing.T) {
		t.Parallel()
		c := dialGateway(t, g)
		start := time.Now()
		_, _ = io.WriteString(c, "GET / HTTP/1.1\r\nHost:")
		br := newReader(c)
		r := readOne(t, br, "GET")
		took := time.Since(start)
		if r.status != 408 || !r.close {
			t.Errorf("got %d, close %v; want 408 and Connection: close", r.status, r.close)
		}
		expectClosed(t, c, br, time.Second)
		if took < 900*time.Millisecond || took > 2500*time.Millisecond {
			t.Errorf("answered after %v, want about 1s", took)
		}
	})
	t.Run("fresh connection", func(t *testing.T) {
		t.Parallel()
		// nginx waits for the first request no longer than client_header_timeout.
		c := dialGateway(t, g)
		start := time.Now()
		expectClosed(t, c, nil, 3*time.Second)
		if took := time.Since(start); took < 900*time.Millisecond || took > 1800*time.Millisecond {
			t.Errorf("closed after %v, want about 1s", took)
		}
	})
	t.Run("keepalive", func(t *testing.T) {
		t.Parallel()
		c := dialGateway(t, g)
		br := newReader(c)
		_, _ = io.WriteString(c, "GET /ka HTTP/1.1\r\nHost: x\r\n\r\n")
		if r := readOne(t, br, "GET"); r.status != 200 {
			t.Fatalf("status %d", r.status)
		}
		start := time.Now()
		expectClosed(t, c, br, 4*time.Second)
		if took := time.Since(start); took < 1800*time.Millisecond || took > 3*time.Second {
			t.Errorf("idle client closed after %v, want about 2s", took)
		}
	})
	t.Run("body", func(t *testing.T) {
		t.Parallel()
		c := dialGateway(t, g)
		br := newReader(c)
		start := time.Now()
		_, _ = io.WriteString(c, "POST /body HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n012")
		// nginx answers 408 when no answer started; a bare close is fine too.
		_ = c.SetReadDeadline(time.Now().Add(4 * time.Second))
		b, _ := io.ReadAll(br)
		took := time.Since(start)
		if len(b) > 0 && !strings.HasPrefix(string(b), "HTTP/1.1 408") {
			t.Errorf("answer %q, want 408 or nothing", b)
		}
		if took < 900*time.Millisecond || took > 2500*time.Millisecond {
			t.Errorf("closed after %v, want about 1s", took)
		}
		eventually(t, 2*time.Second, func() error {
			if bodyEOF.Load() != 1 {
				return errString("the origin's truncated request was not cut")
			}
			return nil
		})
	})
}

type errString string

func (e errString) Error() string { return string(e) }

// TestSendTimeouts: a client that stops reading a large answer is cut
// after send_timeout, and so is its origin connection; an origin that
// stops reading a large upload gets the request cut after the upstream's
// send timeout, and the client a 504.
func TestSendTimeouts(t *testing.T) {
	t.Parallel()
	var copyFailed atomic.Int32
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if _, err := io.Copy(w, randomBody(256<<20, 3)); err != nil {
			copyFailed.Add(1)
		}
	})
	deaf := newRawUpstream(t, func(c *rawConn) {
		_, _ = http.ReadRequest(c.BR) // the head only, never the body
		<-c.Quit
	})
	g := startGateway(t, routesYAML(
		obj{"id": 1, "uri": "/down", "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": 2, "uri": "/up", "upstream": upstreamOf(nodes(deaf.Addr()), obj{"timeout": obj{"connect": 0.5, "send": 0.5, "read": 0.5}})},
	), "  http:\n    send_timeout: 1s\n")
	t.Run("client does not read", func(t *testing.T) {
		t.Parallel()
		c := dialGateway(t, g)
		_, _ = io.WriteString(c, "GET /down HTTP/1.1\r\nHost: x\r\n\r\n")
		start := time.Now()
		eventually(t, 8*time.Second, func() error {
			if copyFailed.Load() != 1 {
				return errString("the origin connection of a client that stopped reading is still open")
			}
			return nil
		})
		t.Logf("origin cut after %v", time.Since(start))
		// The client's connection is gone too: draining it ends in EOF or reset.
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil {
			if ne, ok := err.(interface{ Timeout() bool }); ok && ne.Timeout() {
				t.Errorf("client connection still open")
			}
		}
	})
	t.Run("origin does not read", func(t *testing.T) {
		t.Parallel()
		c := dialGateway(t, g)
		go func() {
			_, _ = io.WriteString(c, "PUT /up HTTP/1.1\r\nHost: x\r\nContent-Length: 268435456\r\n\r\n")
			_, _ = io.Copy(c, randomBody(256<<20, 4))
		}()
		start := time.Now()
		r := readOne(t, newReader(c), "PUT")
		if r.status != 504 || !r.close {
			t.Errorf("got %d close=%v, want 504 with Connection: close", r.status, r.close)
		}
		if took := time.Since(start); took > 4*time.Second {
			t.Errorf("answered after %v", took)
		}
	})
}
