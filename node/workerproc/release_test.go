package workerproc

import (
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// TestMemRelease: once configurations stop coming for the quiet period,
// a worker holding more unused heap than min hands it back to the
// operating system, once for the period however many configurations
// came before it; with less unused, it hands nothing back.
func TestMemRelease(t *testing.T) {
	quietWorkerGC(t)
	quietWorkerRelease()
	const quiet, min = 50 * time.Millisecond, 16 << 20
	type outcome struct {
		released bool
		unused   uint64
	}
	done := make(chan outcome, 4)
	r := &memRelease{quiet: quiet, min: min, done: func(released bool, unused uint64) { done <- outcome{released, unused} }}
	wait := func() outcome {
		t.Helper()
		select {
		case o := <-done:
			return o
		case <-time.After(10 * time.Second):
			t.Fatal("no release 10 s after the quiet period began")
			return outcome{}
		}
	}

	debug.FreeOSMemory()
	if u, _ := heapUnused(); u >= min {
		t.Fatalf("%d bytes unused after a release", u)
	}
	r.applied()
	if o := wait(); o.released {
		t.Fatalf("released with %d bytes unused, less than min", o.unused)
	}

	// A build's garbage: 128 MiB, collected, its pages kept by the runtime.
	keep := make([][]byte, 0, 128)
	for range 128 {
		keep = append(keep, make([]byte, 1<<20))
	}
	runtime.KeepAlive(keep)
	keep = nil
	runtime.GC()
	before, _ := heapUnused()
	if before < 2*min {
		t.Fatalf("%d bytes unused after 128 MiB of garbage, want at least %d", before, 2*min)
	}
	rel := []metrics.Sample{{Name: "/memory/classes/heap/released:bytes"}}
	metrics.Read(rel)
	released0 := rel[0].Value.Uint64()
	start := time.Now()
	for range 3 { // each within the quiet period of the one before
		r.applied()
		time.Sleep(quiet / 5)
	}
	// The runtime's background scavenger hands free pages back too, at
	// its own pace: on a loaded machine, where the quiet period's timer
	// fires late, it may have handed back most of the garbage before the
	// release looks, which then rightly finds too little unused to make
	// one. Either way the pages must be back by the end.
	if o := wait(); !o.released {
		metrics.Read(rel)
		if releaseWorth(o.unused, 0, min) || rel[0].Value.Uint64() < released0+uint64(before)/2 {
			t.Fatalf("%d bytes unused, %d when the quiet period ended: not released (%d handed back by the runtime)",
				before, o.unused, rel[0].Value.Uint64()-released0)
		}
		t.Logf("the runtime handed back %d bytes before the quiet period ended, leaving %d unused", rel[0].Value.Uint64()-released0, o.unused)
	}
	if since := time.Since(start); since < quiet {
		t.Errorf("released %v after the first configuration of three, want after the last's quiet period", since)
	}
	metrics.Read(rel)
	after, _ := heapUnused()
	t.Logf("unused %d -> %d bytes, %d handed back", before, after, rel[0].Value.Uint64()-released0)
	if after >= min || rel[0].Value.Uint64() < released0+uint64(before)/2 {
		t.Errorf("unused %d -> %d bytes, released %d -> %d: not handed back", before, after, released0, rel[0].Value.Uint64())
	}
	select {
	case o := <-done:
		t.Errorf("a second release (%v) for one quiet period", o.released)
	case <-time.After(3 * quiet):
	}
}

// quietWorkerRelease stops the quiet period of the process's own
// memRelease (workerRelease), which a Run earlier in the test binary may
// have begun, so that its release does not come during a test's.
func quietWorkerRelease() {
	workerRelease.mu.Lock()
	defer workerRelease.mu.Unlock()
	if workerRelease.timer != nil {
		workerRelease.timer.Stop()
	}
}

// TestReleaseWorth: a release is worth a sixteenth of the live heap, and
// never less than the floor.
func TestReleaseWorth(t *testing.T) {
	const mib = 1 << 20
	for _, c := range []struct {
		unused, live uint64
		want         bool
	}{
		{3 * mib, 0, false},           // below the floor, nothing live
		{4 * mib, 0, true},            // the floor
		{4 * mib, 32 * mib, true},     // a sixteenth of 32 MiB is below the floor
		{5 * mib, 94 * mib, false},    // 50 000 routes: a sixteenth is 5.9 MiB
		{10 * mib, 94 * mib, true},    // what their builds leave
		{40 * mib, 1024 * mib, false}, // a sixteenth of 1 GiB is 64 MiB
		{64 * mib, 1024 * mib, true},
	} {
		if got := releaseWorth(c.unused, c.live, releaseMin); got != c.want {
			t.Errorf("releaseWorth(%d MiB unused, %d MiB live) = %v, want %v", c.unused/mib, c.live/mib, got, c.want)
		}
	}
}
