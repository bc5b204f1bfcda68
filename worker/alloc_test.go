//go:build !race

package worker

import (
	"bytes"
	"testing"
)

// TestAllocRequestPath guards the whole request path of a worker: parse,
// route, upstream head, kept-alive upstream, response parse and forward.
func TestAllocRequestPath(t *testing.T) {
	h := newHarness(t, helloSpec(t, 100))
	req := []byte("GET /hello HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"), bytes.Repeat([]byte("x"), 1024)...)
	for i := 0; i < 10; i++ {
		h.roundTrip(req, resp)
	}
	_, got := h.roundTrip(req, resp)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(got, resp[len(resp)-1024:]) {
		t.Fatalf("unexpected answer:\n%s", got)
	}
	allocs := testing.AllocsPerRun(200, func() { h.roundTrip(req, resp) })
	if allocs != 0 {
		t.Fatalf("request path allocates %.1f times per request, want 0", allocs)
	}
	// Bodies both ways, re-framed by the gateway: a chunked request with
	// extensions and a trailer, a chunked response.
	post := []byte("POST /hello HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n")
	chunked := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x\r\nabcd\r\n0\r\n\r\n")
	for i := 0; i < 10; i++ {
		h.roundTrip(post, chunked)
	}
	up, got := h.roundTrip(post, chunked)
	if !bytes.HasSuffix(up, []byte("\r\n\r\nb\r\nhello world\r\n0\r\n\r\n")) || !bytes.HasSuffix(got, []byte("\r\n\r\n4\r\nabcd\r\n0\r\n\r\n")) {
		t.Fatalf("unexpected exchange:\n%s\n%s", up, got)
	}
	allocs = testing.AllocsPerRun(200, func() { h.roundTrip(post, chunked) })
	if allocs != 0 {
		t.Fatalf("chunked request path allocates %.1f times per request, want 0", allocs)
	}
	// No route: answered by the worker itself.
	nf := []byte("GET /nope HTTP/1.1\r\nHost: example.com\r\n\r\n")
	h.roundTrip(nf, nil)
	allocs = testing.AllocsPerRun(200, func() { h.roundTrip(nf, nil) })
	if allocs != 0 {
		t.Fatalf("404 path allocates %.1f times per request, want 0", allocs)
	}
}
