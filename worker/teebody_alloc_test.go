//go:build !race

package worker

import (
	"bytes"
	"strconv"
	"strings"
	"testing"
)

// TestAllocTeeBody guards the request path of a route whose plugin copies
// the body: a Content-Length body and a chunked one, each cut in two
// reads, streamed upstream and copied for the log phase, one under the
// copy's limit and one over it, and a request without a body; the copy's
// buffer comes from the worker's pool, and goes back to it.
func TestAllocTeeBody(t *testing.T) {
	h, rec := teeHarness(t, teeRoutes, nil, Config{})
	long := strings.Repeat("x", 40)
	for _, tc := range []struct{ name, head, rest, seen string }{
		{"length", "POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello", " world", "pre=nil;tee=hello world,whole=true;"},
		{"length, over", "POST /tee HTTP/1.1\r\nHost: x\r\nContent-Length: 45\r\n\r\nhello", long, "pre=nil;tee=hello" + long[:11] + ",whole=false;"},
		{"chunked", "POST /tee HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", "6\r\n world\r\n0\r\n\r\n",
			"pre=nil;tee=hello world,whole=true;"},
		{"no body", "GET /tee HTTP/1.1\r\nHost: x\r\n\r\n", "", "pre=nil;tee=nil,whole=true;"},
	} {
		run := func() {
			rec.reset()
			h.send(tc.head)
			if tc.rest != "" {
				h.send(tc.rest)
			}
			h.up.in = append(h.up.in, upOK...)
			h.traffic(h.up)
		}
		for i := 0; i < 10; i++ {
			run()
		}
		run()
		if string(rec.seen) != tc.seen || !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) {
			t.Fatalf("%s: answer %q, plugin %q, want %q", tc.name, h.cl.out, rec.seen, tc.seen)
		}
		if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", tc.name, allocs)
		}
	}
}

// TestAllocTeeBodyLarge: a body over the small buffers' size, under a
// copy limit of 1 MiB (proxy-mirror's), copied whole, takes its buffer
// from the pool's large ones: no allocation in steady state either.
func TestAllocTeeBodyLarge(t *testing.T) {
	h, rec := teeHarness(t, []string{
		`{"id":"r1","uri":"/big","plugins":{"p-tee":{"limit":1048576}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, Config{})
	body := strings.Repeat("b", 200<<10)
	head := "POST /big HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	run := func() {
		rec.reset()
		h.send(head)
		h.send(body[:100<<10])
		h.send(body[100<<10:])
		h.up.in = append(h.up.in, upOK...)
		h.traffic(h.up)
	}
	for i := 0; i < 10; i++ {
		run()
	}
	if string(rec.seen) != "pre=nil;tee="+body+",whole=true;" || !bytes.HasPrefix(h.cl.out, []byte("HTTP/1.1 200 OK\r\n")) {
		t.Fatalf("answer %q, plugin saw %d bytes", h.cl.out, len(rec.seen))
	}
	if n := len(h.w.largeBufs); n != 1 {
		t.Fatalf("%d large buffers pooled, want 1", n)
	}
	if allocs := testing.AllocsPerRun(50, run); allocs != 0 {
		t.Errorf("%.1f allocations per request, want 0", allocs)
	}
}
