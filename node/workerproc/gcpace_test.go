package workerproc

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

func TestGCPercent(t *testing.T) {
	for _, tc := range []struct {
		live uint64
		want int
	}{
		{0, 100},                  // nothing read: the default
		{1, 10_000},               // capped
		{1 << 20, 1600},           // 1 MiB live: 16 MiB of headroom
		{4 << 20, 400},            // 4 MiB live
		{8 << 20, 200},            // 8 MiB live
		{gcHeadroom, 100},         // the default's headroom is as large
		{100 << 20, 100},          // a large configuration keeps the default
		{gcHeadroom * 3 / 2, 100}, // never below the default
	} {
		if got := gcPercent(tc.live); got != tc.want {
			t.Errorf("gcPercent(%d) = %d, want %d", tc.live, got, tc.want)
		}
	}
}

// The pacer sets GOGC from the heap a collection left live, after a
// configuration and after each collection, and leaves a GOGC from the
// environment alone.
func TestGCPacer(t *testing.T) {
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)

	keep := make([]byte, 2<<20) // live across the collection below
	runtime.GC()
	p := newGCPacer()
	p.off = false // whatever GOGC the test process was started with
	p.applied()
	runtime.KeepAlive(keep)
	got := debug.SetGCPercent(100)
	metrics.Read(p.sample)
	live := p.sample[0].Value.Uint64() // other tests' collections may have moved it
	if got != p.percent || got < 100 || (live < gcHeadroom/2 && got <= 100) {
		t.Errorf("GOGC after applying with %d bytes live: %d (pacer says %d)", live, got, p.percent)
	}

	// A heap that grows between two configurations: the next collection
	// sets the percent for it, not the one made for the small heap.
	debug.SetGCPercent(100)
	runtime.GC()
	p = newGCPacer()
	p.off = false
	p.applied()
	small := p.current()
	p.start()
	defer p.stop()
	grown := make([][]byte, 0, 64)
	for range 64 {
		grown = append(grown, make([]byte, 1<<20)) // 64 MiB live, 4 × gcHeadroom
	}
	deadline := time.Now().Add(10 * time.Second)
	for p.current() != 100 && time.Now().Before(deadline) {
		runtime.GC() // the pacer's finalizer runs after the cycle
		time.Sleep(10 * time.Millisecond)
	}
	runtime.KeepAlive(grown)
	if got := debug.SetGCPercent(100); got != 100 || p.current() != 100 {
		t.Errorf("GOGC after the live heap grew to 64 MiB: %d (pacer says %d), want 100", got, p.current())
	}
	if small <= 100 {
		t.Logf("the test process's live heap was already large: GOGC %d before it grew", small)
	}

	t.Setenv("GOGC", "100")
	debug.SetGCPercent(100)
	p = newGCPacer()
	p.applied()
	if got := debug.SetGCPercent(100); got != 100 || !p.off {
		t.Errorf("GOGC from the environment: the pacer set %d", got)
	}
}
