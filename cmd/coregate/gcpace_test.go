package main

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
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

// The pacer sets GOGC from the heap a collection left live, and leaves a
// GOGC from the environment alone.
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

	t.Setenv("GOGC", "100")
	debug.SetGCPercent(100)
	p = newGCPacer()
	p.applied()
	if got := debug.SetGCPercent(100); got != 100 || !p.off {
		t.Errorf("GOGC from the environment: the pacer set %d", got)
	}
}
