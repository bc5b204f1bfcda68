package worker

import (
	"testing"
)

// TestClientClosedInsideWrite: gnet closes a connection inside a Write that
// fails (a client that reset), so the code that wrote goes on with the
// connection closed under it. It must neither use the connection nor go on
// with the exchange: nothing reaches the upstream, nothing panics.
func TestClientClosedInsideWrite(t *testing.T) {
	for _, tc := range []struct{ name, req string }{
		// start writes 100 Continue, then would dispatch.
		{"100-continue", "POST /hello HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n"},
		// answerLocal writes 404, then would read and drop the body.
		{"local answer with a body", "POST /nope HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhel"},
		// answerAndClose writes 400, then would linger.
		{"refused head", "GET /hello HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, helloSpec(t, 1))
			h.cl.failWrites = true
			h.cl.in = append(h.cl.in, tc.req...)
			h.w.OnTraffic(h.cl)
			if !h.cl.closed {
				t.Fatal("the client connection is still open")
			}
			if len(h.up.out) != 0 {
				t.Fatalf("the upstream got %q", h.up.out)
			}
			if h.w.live.Len() != 0 {
				t.Fatalf("%d live client connections left", h.w.live.Len())
			}
			for _, x := range h.w.timed.Items() {
				if _, ok := x.(*clientConn); ok {
					t.Fatal("a client deadline is left")
				}
			}
		})
	}
}
