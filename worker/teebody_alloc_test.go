//go:build !race

package worker

import (
	"bytes"
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
