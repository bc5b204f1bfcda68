package worker

import (
	"slices"
	"testing"
	"time"
)

// A request sets and clears its connections' deadlines without moving the
// set: the kept-alive client and its upstream connection keep their
// entries, in their places, across requests. A cleared deadline leaves the
// set at the next scan, a closed connection at once, and a deadline that
// passed fires once.
func TestDeadlineSet(t *testing.T) {
	h := newHarness(t, helloSpec(t, 1))
	req := []byte("GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	h.roundTrip(req, resp)
	cc, uc := h.cl.ctx.(*clientConn), h.up.ctx.(*upConn)
	before := slices.Clone(h.w.timed.Items())
	if !slices.Contains(before, timed(cc)) || !slices.Contains(before, timed(uc)) {
		t.Fatalf("after a request: %d entries, want the client's keep-alive and the upstream's idle deadlines", len(before))
	}
	for range 50 {
		if _, out := h.roundTrip(req, resp); len(out) == 0 {
			t.Fatal("no answer")
		}
		if !slices.Equal(h.w.timed.Items(), before) {
			t.Fatalf("the set moved during a request: %v, was %v", h.w.timed.Items(), before)
		}
	}

	// Cleared: still an entry, with no deadline, until the next scan.
	h.w.clearDeadline(uc)
	if uc.idx < 0 || uc.deadline != 0 {
		t.Fatalf("cleared: idx %d, deadline %d; want in the set with none", uc.idx, uc.deadline)
	}
	h.w.expireDeadlines()
	if uc.idx >= 0 || slices.Contains(h.w.timed.Items(), timed(uc)) || cc.idx < 0 {
		t.Fatalf("after a scan: upstream idx %d, client idx %d; want the upstream out, the client in", uc.idx, cc.idx)
	}
	if h.up.closed {
		t.Fatal("a cleared deadline fired")
	}

	// Passed: fires once (the idle upstream connection closes) and leaves.
	h.w.setDeadline(uc, int64(time.Second))
	h.w.now += int64(2 * time.Second)
	h.w.setDeadline(cc, int64(time.Hour))
	h.w.expireDeadlines()
	if !h.up.closed || uc.idx >= 0 {
		t.Fatalf("passed: upstream closed %v, idx %d; want closed and out", h.up.closed, uc.idx)
	}

	// Closed: out at once, without a scan.
	_ = h.cl.loop.Close(h.cl)
	if cc.idx >= 0 || h.w.timed.Len() != 0 {
		t.Fatalf("after the client's close: idx %d, %d entries; want none", cc.idx, h.w.timed.Len())
	}
}
