package workerproc

import (
	"math"
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
	quietWorkerGC(t)
	prev := debug.SetGCPercent(100)
	defer debug.SetGCPercent(prev)
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1)) // the 64 MiB below may set one

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

func TestGCLimit(t *testing.T) {
	for _, tc := range []struct {
		live, other uint64
		want        int64
	}{
		{0, 0, math.MaxInt64},                                 // nothing read: no limit
		{gcLargeLive - 1, 8 << 20, math.MaxInt64},             // a small configuration: GOGC alone
		{gcLargeLive, 8 << 20, 2*gcLargeLive + 8<<20},         // at least gcLargeLive of room
		{200 << 20, 10 << 20, 200<<20 + gcLargeLive + 10<<20}, // 50 000 routes: 264 MiB where GOGC let 400
		{1 << 30, 20 << 20, 1<<30 + 1<<30/4 + 20<<20},         // a quarter of live past that
	} {
		if got := gcLimit(tc.live, tc.other); got != tc.want {
			t.Errorf("gcLimit(%d, %d) = %d, want %d", tc.live, tc.other, got, tc.want)
		}
	}
}

// TestGCPacerLimit: a live heap past gcLargeLive gets a soft memory
// limit above it, well under twice it; once the heap is small again the
// limit goes; GOMEMLIMIT in the environment is left alone.
func TestGCPacerLimit(t *testing.T) {
	quietWorkerGC(t)
	defer debug.SetGCPercent(debug.SetGCPercent(100))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(math.MaxInt64))
	big := make([][]byte, 0, 96)
	for range 96 {
		big = append(big, make([]byte, 1<<20)) // 96 MiB live
	}
	runtime.GC()
	p := newGCPacer()
	p.off, p.limitOff = false, false // whatever the test process was started with
	p.applied()
	metrics.Read(p.sample)
	live := p.sample[0].Value.Uint64()
	limit := debug.SetMemoryLimit(-1)
	runtime.KeepAlive(big)
	if limit != p.limit || limit < int64(live)+gcLargeLive || limit > int64(live)*2 {
		t.Errorf("memory limit %d with %d bytes live (pacer says %d), want live + %d and some, under twice live", limit, live, p.limit, gcLargeLive)
	}

	big = nil
	runtime.GC()
	p.applied()
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 || p.limit != math.MaxInt64 {
		t.Errorf("memory limit %d once the live heap is small again (pacer says %d), want none", got, p.limit)
	}

	t.Setenv("GOMEMLIMIT", "1GiB")
	debug.SetMemoryLimit(math.MaxInt64)
	p = newGCPacer()
	p.off = false
	big = make([][]byte, 0, 96)
	for range 96 {
		big = append(big, make([]byte, 1<<20))
	}
	runtime.GC()
	p.applied()
	runtime.KeepAlive(big)
	if got := debug.SetMemoryLimit(-1); got != math.MaxInt64 || !p.limitOff {
		t.Errorf("GOMEMLIMIT from the environment: the pacer set a limit of %d", got)
	}
}

// quietWorkerGC stops the process's own pacer (workerGC), which a Run
// earlier in the test binary started and which would set GOGC and the
// memory limit from its own collections while a test judges its pacer's,
// and starts it again when the test ends.
func quietWorkerGC(t *testing.T) {
	if workerGC.following.Swap(false) {
		t.Cleanup(workerGC.start)
	}
}
