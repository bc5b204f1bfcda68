package workerproc

import (
	"runtime"
	"testing"
	"time"
)

// gcSink keeps TestGCCost's allocations on the heap.
var gcSink [][]byte

// TestGCCost: a build is charged the bytes it allocated, and once the
// collector has run since the first configuration, the collector's CPU
// time those bytes cost at the rate measured since then; before, none.
func TestGCCost(t *testing.T) {
	c := newGCCost()
	if _, cpu := c.of(c.allocated()); cpu != 0 {
		t.Errorf("the first configuration is charged %v of the collector's CPU, want none: it sets the rate's origin", cpu)
	}
	// builds, and collections of their garbage
	for range 4 {
		for range 64 {
			gcSink = append(gcSink, make([]byte, 64<<10))
		}
		gcSink = nil
		runtime.GC()
	}
	start := c.allocated()
	for range 128 {
		gcSink = append(gcSink, make([]byte, 64<<10))
	}
	gcSink = nil
	bytes, cpu := c.of(start)
	if bytes < 8<<20 || bytes > 16<<20 {
		t.Errorf("a build of 8 MiB is charged %d bytes", bytes)
	}
	if cpu <= 0 || cpu > time.Second {
		t.Errorf("a build of 8 MiB after 16 MiB and four collections is charged %v of the collector's CPU", cpu)
	}
}

// TestGCCPU: the collector's CPU per byte allocated, charged to a
// build's bytes.
func TestGCCPU(t *testing.T) {
	if got := gcCPU(1<<20, 100<<20, 0.5); got != 5*time.Millisecond {
		t.Errorf("1 MiB at 0.5 s per 100 MiB: %v, want 5ms", got)
	}
	if got := gcCPU(1<<20, 0, 0); got != 0 {
		t.Errorf("with nothing allocated since the origin: %v, want 0", got)
	}
}
