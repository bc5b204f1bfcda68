package worker

import (
	"context"

	"coregate/plugins"
)

// A plugin's Await (plugins.Ctx.Await): the request phases stop, the
// exchange waits in csAwait, and the operation's goroutine hands the
// request back to the loop through a ticket. Wake pushes the ticket on the
// worker's stack of wakes, lock-free; the push that finds the stack empty
// has the loop run runWakes (EventLoop.Execute), which takes every ticket
// pushed by then. A burst of completions (a pipelined batch of Redis
// replies) costs the loop one wake-up.

// ticket is one Await, from the call on the loop to its Wake on the loop.
// Tickets are recycled through Worker.freeTickets (loop-owned); between
// Wake and runWakes only the stack links them.
type ticket struct {
	w    *Worker
	cc   *clientConn
	seq  uint64 // cc.awaitSeq at the Await
	r    plugins.Resumer
	next *ticket // in Worker.wakes
}

// Wake implements plugins.Waker, from any goroutine.
func (t *ticket) Wake() {
	w := t.w
	for {
		old := w.wakes.Load()
		t.next = old
		if w.wakes.CompareAndSwap(old, t) {
			if old == nil {
				w.scheduleWakes()
			}
			return
		}
	}
}

// scheduleWakes has the loop run runWakes.
func (w *Worker) scheduleWakes() {
	if h := w.loopRef.Load(); h != nil {
		_ = h.el.Execute(context.Background(), w.wakeFn)
	}
}

// runWakes, on the loop, resumes the exchanges whose operations are done,
// in the order they were woken; one whose request is gone (the client
// closed, awaitLimit passed) has its plugin abandon it.
func (w *Worker) runWakes(context.Context) error {
	var fifo *ticket
	for t := w.wakes.Swap(nil); t != nil; {
		n := t.next
		t.next = fifo
		fifo, t = t, n
	}
	for t := fifo; t != nil; {
		n := t.next
		cc, seq, r := t.cc, t.seq, t.r
		t.cc, t.r, t.next = nil, nil, nil
		w.freeTickets = append(w.freeTickets, t)
		if cc.awaitSeq == seq && cc.state == csAwait && cc.plugin.waiting && !cc.closed {
			cc.resumeAwait(r)
		} else {
			r.Abandon()
		}
		t = n
	}
	return nil
}

// Await implements plugins.Ctx.
func (x *pluginCtx) Await(r plugins.Resumer) (plugins.Waker, bool) {
	cc := x.cc()
	p := &cc.plugin
	if !p.active || p.phase > plugins.BeforeProxy || p.exited || p.waiting || cc.closed || r == nil {
		return nil, false
	}
	w := cc.w
	var t *ticket
	if n := len(w.freeTickets); n > 0 {
		t = w.freeTickets[n-1]
		w.freeTickets = w.freeTickets[:n-1]
	} else {
		t = &ticket{w: w}
	}
	cc.awaitSeq++
	t.cc, t.seq, t.r = cc, cc.awaitSeq, r
	p.waiting = true
	return t, true
}
