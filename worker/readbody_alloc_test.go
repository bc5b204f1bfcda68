//go:build !race

package worker

import (
	"bytes"
	"testing"
)

// TestAllocReadBody guards the request path of a route whose plugin reads
// the body: a Content-Length body and a chunked one, each cut in two
// reads, read whole, seen by the plugin and sent upstream.
func TestAllocReadBody(t *testing.T) {
	h, rec := readerHarness(t, readerRoutes, nil, Config{})
	for _, tc := range []struct{ name, head, rest, want string }{
		{"length", "POST /read HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello", " world", "\r\n\r\nhello world"},
		{"chunked", "POST /read HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n", "6\r\n world\r\n0\r\n\r\n",
			"\r\n\r\nb\r\nhello world\r\n0\r\n\r\n"},
	} {
		run := func() {
			rec.reset()
			h.send(tc.head)
			h.send(tc.rest)
			h.up.in = append(h.up.in, upOK...)
			h.traffic(h.up)
		}
		for i := 0; i < 10; i++ {
			run()
		}
		h.cl.out, h.up.out = h.cl.out[:0], h.up.out[:0]
		rec.reset()
		h.send(tc.head)
		h.send(tc.rest)
		if !bytes.HasSuffix(h.up.out, []byte(tc.want)) || string(rec.seen) != "body=hello world;" {
			t.Fatalf("%s: upstream %q, plugin %q", tc.name, h.up.out, rec.seen)
		}
		h.up.in = append(h.up.in, upOK...)
		h.traffic(h.up)
		if allocs := testing.AllocsPerRun(200, run); allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", tc.name, allocs)
		}
	}
}
