package workerproc

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"time"
)

// gcCost estimates what a configuration's build costs a worker's garbage
// collector, for the supervisor's pace (control.AppliedMsg.GCCPUUS): the
// bytes the build allocated, at the collector's CPU time per byte
// allocated since the worker's first configuration. A worker allocates
// only when it builds, so that rate is the builds': a collection marks
// the whole live configuration (at 50 000 routes, some 200 MB), and it
// comes once the builds have allocated the heap's headroom, so each build
// is charged its share of the next one. The collector's CPU is the
// runtime's estimate (/cpu/classes/gc), less what is not the CPU's on a
// worker's one CPU: the idle Ps' marking (a worker has Procs Ps, all on
// one CPU; their idle marking is the CPU the loop left idle) and the
// stop-the-world pauses counted once for each P. What is left counts
// the mark workers' time on their P, more than the CPU they get beside a
// busy loop: the pace errs towards fewer builds. Safe for concurrent use.
type gcCost struct {
	mu     sync.Mutex
	sample [4]metrics.Sample
	// allocs and gc are the figures when the first configuration was
	// applied (set): the start's own build, of the whole configuration
	// into an empty heap, is left out of the rate.
	allocs uint64
	gc     float64
	set    bool
}

func newGCCost() *gcCost {
	c := &gcCost{}
	c.sample[0].Name = "/gc/heap/allocs:bytes"
	c.sample[1].Name = "/cpu/classes/gc/total:cpu-seconds"
	c.sample[2].Name = "/cpu/classes/gc/mark/idle:cpu-seconds"
	c.sample[3].Name = "/cpu/classes/gc/pause:cpu-seconds"
	return c
}

// read returns the bytes allocated and the collector's CPU seconds so far
// (0 for a figure this runtime does not have).
func (c *gcCost) read() (allocs uint64, gc float64) {
	metrics.Read(c.sample[:])
	if c.sample[0].Value.Kind() == metrics.KindUint64 {
		allocs = c.sample[0].Value.Uint64()
	}
	var f [3]float64
	for i := range f {
		if v := c.sample[i+1].Value; v.Kind() == metrics.KindFloat64 {
			f[i] = v.Float64()
		}
	}
	// a pause is counted for every P; one thread's CPU is what it costs
	// the worker's CPU
	procs := float64(runtime.GOMAXPROCS(0))
	return allocs, max(f[0]-f[1]-f[2]*(procs-1)/procs, 0)
}

// allocated returns the bytes allocated so far: a build's start.
func (c *gcCost) allocated() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	a, _ := c.read()
	return a
}

// of returns the bytes allocated since start (allocated's) and the
// collector's CPU time they cost, at the rate since the first
// configuration: 0 until a collection has completed since then.
func (c *gcCost) of(start uint64) (bytes uint64, cpu time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	allocs, gc := c.read()
	if allocs > start {
		bytes = allocs - start
	}
	if !c.set {
		c.allocs, c.gc, c.set = allocs, gc, true
		return bytes, 0
	}
	return bytes, gcCPU(bytes, allocs-c.allocs, gc-c.gc)
}

// gcCPU is the collector's CPU time that bytes allocated cost, at gc
// seconds of its CPU for total bytes allocated.
func gcCPU(bytes, total uint64, gc float64) time.Duration {
	if total == 0 || gc <= 0 {
		return 0
	}
	return time.Duration(gc * float64(bytes) / float64(total) * float64(time.Second))
}
