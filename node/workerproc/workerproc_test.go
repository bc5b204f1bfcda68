package workerproc

import "testing"

// TestLoopTurned: a heartbeat goes out while the loop's tick count moves,
// and before its first tick; not while it stands still after that.
func TestLoopTurned(t *testing.T) {
	for _, c := range []struct {
		last, now uint64
		want      bool
	}{
		{0, 0, true},  // not ticking yet (no connection so far)
		{0, 3, true},  // started
		{3, 7, true},  // turning
		{7, 7, false}, // stuck in one event
		{9, 10, true}, // one tick is enough
		{10, 10, false},
	} {
		if got := loopTurned(c.last, c.now); got != c.want {
			t.Errorf("loopTurned(%d, %d) = %v, want %v", c.last, c.now, got, c.want)
		}
	}
}
