package worker

// Deadlines are kept on a coarse clock (Worker.now, refreshed on every tick)
// in a flat set of timed connections that each tick scans. Setting, moving
// or clearing a deadline is a store; a connection enters the set when it
// first gets a deadline and leaves it at the first scan that finds it
// without one, or when it closes (dropDeadline). A request sets and clears
// its connections' deadlines several times (the client's keep-alive, the
// upstream's send, read and idle timeouts), and leaving the set at every
// clear would move two entries of the slice for each.
// The set is owned by the event loop.

// timerSlot is embedded in every connection that can time out.
type timerSlot struct {
	deadline int64 // Worker.now units (ns); 0: none
	idx      int32 // position in Worker.timed, -1 when absent
}

type timed interface {
	slot() *timerSlot
	expire()
}

func (w *Worker) setDeadline(t timed, after int64) {
	s := t.slot()
	s.deadline = w.now + after
	if s.idx < 0 {
		w.timed.Add(t)
	}
}

// clearDeadline takes t's deadline off; t stays in the set until the next
// scan, unless a deadline is set again before it.
func (w *Worker) clearDeadline(t timed) {
	t.slot().deadline = 0
}

// dropDeadline takes t's deadline off and t out of the set, for a
// connection that closed: the set keeps no reference to it.
func (w *Worker) dropDeadline(t timed) {
	s := t.slot()
	s.deadline = 0
	if s.idx >= 0 {
		w.timed.Remove(t)
	}
}

// expireDeadlines fires every deadline that has passed, and takes out of the
// set the connections whose deadline was cleared. Either takes the entry
// out (the last one moves into its place), so the scan looks at the same
// index again; a fired connection that sets a new deadline enters again
// at the end.
func (w *Worker) expireDeadlines() {
	for i := 0; i < w.timed.Len(); {
		t := w.timed.At(i)
		s := t.slot()
		switch {
		case s.deadline == 0:
			w.timed.Remove(t) // cleared since it entered
			continue
		case w.now >= s.deadline:
			w.dropDeadline(t)
			t.expire()
			continue
		}
		i++
	}
}
