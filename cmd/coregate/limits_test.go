package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestWorkerConnections: nginx_config.event.worker_connections bounds the
// connections a worker holds, client and upstream ones together, as nginx
// counts them. A client connection past the limit is accepted and closed
// at once, never left waiting; once a connection ends there is room again.
func TestWorkerConnections(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/ok", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		"  event:\n    worker_connections: 4\n")

	// Three kept-alive clients, each served once (so the worker has
	// accepted them), share one kept-alive upstream connection: 4 in all.
	var held []net.Conn
	for i := range 3 {
		c := dialGateway(t, g)
		br := newReader(c)
		_, _ = io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
		if r := readOne(t, br, "GET"); r.status != 200 || r.close {
			t.Fatalf("client %d: %d close=%v, want 200 kept alive", i, r.status, r.close)
		}
		held = append(held, c)
	}
	if n := up.Conns.Load(); n != 1 {
		t.Fatalf("the upstream saw %d connections, want 1 reused", n)
	}

	// A fourth client is closed at once, unanswered.
	c := dialGateway(t, g)
	start := time.Now()
	_, _ = io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the connection past worker_connections is still open after 5s")
	}
	if len(b) > 0 {
		t.Fatalf("the connection past worker_connections was answered: %q", b)
	}
	t.Logf("closed after %v (%v)", time.Since(start), err)
	eventually(t, 5*time.Second, func() error {
		if !strings.Contains(g.out.String(), "worker_connections are not enough") {
			return errString("no log line for the refused connection")
		}
		return nil
	})

	// One client leaves: a new one is served.
	held[0].Close()
	eventually(t, 5*time.Second, func() error {
		c, err := net.DialTimeout("tcp", g.Addr(), time.Second)
		if err != nil {
			return err
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(2 * time.Second))
		_, _ = io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		b, err := io.ReadAll(c)
		if !strings.HasPrefix(string(b), "HTTP/1.1 200 ") {
			return fmt.Errorf("after a client left: %q %v", b, err)
		}
		return nil
	})
}

// TestMaxBodySizeChunked: a chunked request body over
// client_max_body_size is answered 413 and no byte of the request reaches
// the upstream, however the body is split on the wire (the limit is small
// enough to wait for). A body within the limit is forwarded whole.
func TestMaxBodySizeChunked(t *testing.T) {
	t.Parallel()
	var bodies atomic.Int32
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(_ *http.Request, body []byte, _ int) (string, bool) {
			bodies.Add(1)
			return okResponse(fmt.Sprintf("got %d", len(body))), true
		})
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		"  http:\n    client_max_body_size: 1k\n")
	chunk := func(n int) string { return fmt.Sprintf("%x\r\n%s\r\n", n, bytes.Repeat([]byte("x"), n)) }
	head := "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"

	// Written in parts, with pauses long enough for the gateway to have
	// dialed and forwarded the head and first chunk if it were to.
	send := func(t *testing.T, parts ...string) result {
		t.Helper()
		c := dialGateway(t, g)
		for i, p := range parts {
			if i > 0 {
				time.Sleep(300 * time.Millisecond)
			}
			if _, err := io.WriteString(c, p); err != nil {
				break // the gateway answered and closed
			}
		}
		return readOne(t, newReader(c), "POST")
	}

	t.Run("over the limit in the second chunk", func(t *testing.T) {
		r := send(t, head+chunk(600), chunk(600), "0\r\n\r\n")
		if r.status != 413 || !r.close {
			t.Errorf("got %d close=%v, want 413 and close", r.status, r.close)
		}
	})
	t.Run("over the limit in one chunk's data", func(t *testing.T) {
		big := chunk(2000)
		r := send(t, head+big[:300], big[300:], "0\r\n\r\n")
		if r.status != 413 || !r.close {
			t.Errorf("got %d close=%v, want 413 and close", r.status, r.close)
		}
	})
	t.Run("malformed after a pause", func(t *testing.T) {
		r := send(t, head+chunk(100), "zz\r\n", "0\r\n\r\n")
		if r.status != 400 || !r.close {
			t.Errorf("got %d close=%v, want 400 and close", r.status, r.close)
		}
	})
	if got := up.Received(); got != "" || up.Accepted.Load() != 0 {
		t.Fatalf("the upstream got %d bytes on %d connections of refused requests: %q",
			len(got), up.Accepted.Load(), cut(got))
	}

	t.Run("within the limit", func(t *testing.T) {
		r := send(t, head+chunk(300), chunk(300), "0\r\n\r\n")
		if r.status != 200 || r.body != "got 600" {
			t.Errorf("got %d %q, want 200 \"got 600\"", r.status, r.body)
		}
	})
	if bodies.Load() != 1 {
		t.Errorf("the upstream read %d requests, want 1", bodies.Load())
	}
}

// TestMaxBodySizeChunkedStreamed: with a client_max_body_size too large to
// wait for, a chunked body is streamed; once it passes the limit the
// client gets 413 and the upstream connection is cut before the body's
// last chunk, so the upstream never receives a complete request.
func TestMaxBodySizeChunkedStreamed(t *testing.T) {
	t.Parallel()
	var complete, cutShort atomic.Int32
	up := newRawUpstream(t, func(c *rawConn) {
		if _, _, err := c.ReadRequest(); err != nil {
			cutShort.Add(1)
			return
		}
		complete.Add(1)
		_, _ = io.WriteString(c, okResponse("ok"))
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		"  http:\n    client_max_body_size: 1m\n")
	c := dialGateway(t, g)
	go func() {
		_, _ = io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n")
		part := fmt.Appendf(nil, "%x\r\n%s\r\n", 64<<10, bytes.Repeat([]byte("y"), 64<<10))
		for range 32 { // 2 MiB
			if _, err := c.Write(part); err != nil {
				return
			}
		}
		_, _ = io.WriteString(c, "0\r\n\r\n")
	}()
	r := readOne(t, newReader(c), "POST")
	if r.status != 413 || !r.close {
		t.Errorf("got %d close=%v, want 413 and close", r.status, r.close)
	}
	eventually(t, 5*time.Second, func() error {
		if cutShort.Load() != 1 {
			return errString("the upstream connection was not cut")
		}
		return nil
	})
	if complete.Load() != 0 {
		t.Errorf("the upstream read a complete request")
	}
}
