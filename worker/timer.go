package worker

// Deadlines are kept on a coarse clock (Worker.now, refreshed on every tick)
// in a flat set of timed connections that each tick scans. Setting or moving
// a deadline is a store; only entering and leaving the set touches the slice.
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

func (w *Worker) clearDeadline(t timed) {
	s := t.slot()
	s.deadline = 0
	if s.idx >= 0 {
		w.timed.Remove(t)
	}
}

// expireDeadlines fires every deadline that has passed. A fired connection
// usually clears or moves its own deadline, so the scan restarts at the same
// index when the slot it looked at changed.
func (w *Worker) expireDeadlines() {
	for i := 0; i < w.timed.Len(); {
		t := w.timed.At(i)
		s := t.slot()
		if s.deadline != 0 && w.now >= s.deadline {
			w.clearDeadline(t)
			t.expire()
			continue
		}
		i++
	}
}
