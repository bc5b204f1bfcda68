package workerproc

import (
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"time"
)

// releaseQuiet is how long a worker waits after a configuration it
// applied, no other coming, before it hands back to the operating system
// the heap its builds left unused (memRelease). A release's collection
// takes CPU from the worker's own CPU, beside its event loop: the wait is
// long enough that a bulk load through the Admin API, whose builds come
// every fraction of a second, is over (at one second, a load of 50 000
// routes slowed by a machine at load 25 was released eight times).
const releaseQuiet = 5 * time.Second

// releaseMin and releaseShare say when the unused heap is worth a
// release: at least releaseMin, and at least a releaseShare-th of the live
// heap. A release costs a collection, which marks what is live; it is
// made for an unused heap that is a sixteenth of the worker's memory or
// more, whatever the configuration's size. At bench admin -plugins'
// 50 000 routes (94 MB live) the builds leave some 10 MB unused, which a
// fixed floor of 32 MiB kept as the worker's RSS while it served: 2 236
// bytes a route settled, against 2 037 released. A configuration of a
// few thousand routes (a few MB live) leaves up to gcHeadroom, and a
// release of it costs a few milliseconds of CPU.
const (
	releaseMin   = 4 << 20
	releaseShare = 16
)

// releaseWorth says whether unused bytes of heap beside live are worth a
// release (releaseShare), with floor as releaseMin.
func releaseWorth(unused, live, floor uint64) bool {
	return unused >= max(floor, live/releaseShare)
}

// memRelease hands back to the operating system, once configurations
// stop coming (releaseQuiet), the heap the builds left unused: what the
// collector freed but the runtime keeps for the next allocations, up to
// the soft memory limit, and the builds' garbage. A worker allocates
// only while it builds, so that memory would stay the worker's RSS while
// it serves: at bench admin -plugins' 50 000 routes (115 MB live) about
// 60 MB, 1 200 bytes a route. A release is debug.FreeOSMemory: a whole
// collection, marked while the event loop serves, then the free pages
// given back: at BenchmarkRouteMemory's 50 000 routes (180 MB live)
// 180-300 ms of CPU and 0.1-2 ms stopped (load 15-24). It is made at most
// once per quiet period, and only when the unused heap is worth it
// (releaseWorth). Safe for concurrent use; applied does not block
// (the release runs on its timer's goroutine, never on the event loop).
type memRelease struct {
	quiet time.Duration
	min   uint64 // releaseWorth's floor
	// mu guards timer; run orders the releases themselves.
	mu    sync.Mutex
	timer *time.Timer
	run   sync.Mutex
	// done, if not nil, is called after each quiet period with whether
	// a release was made and the unused heap it was decided on (tests).
	done func(released bool, unused uint64)
}

// applied is called after a configuration is applied: it (re)starts the
// quiet period.
func (r *memRelease) applied() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.timer == nil {
		r.timer = time.AfterFunc(r.quiet, r.release)
		return
	}
	r.timer.Reset(r.quiet)
}

// release hands the unused heap back when it is worth it (releaseWorth,
// with r.min as its floor).
func (r *memRelease) release() {
	r.run.Lock()
	defer r.run.Unlock()
	unused, live := heapUnused()
	released := releaseWorth(unused, live, r.min)
	if released {
		debug.FreeOSMemory()
	}
	if r.done != nil {
		r.done(released, unused)
	}
}

// heapUnused is the heap the runtime holds beyond what the last
// collection left live: free spans not yet handed back, and the objects
// allocated since (mostly a build's garbage); and what it left live.
func heapUnused() (unused, live uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/free:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}, {Name: "/gc/heap/live:bytes"}}
	metrics.Read(s)
	for _, sm := range s {
		if sm.Value.Kind() != metrics.KindUint64 {
			return 0, 0
		}
	}
	held, live := s[0].Value.Uint64()+s[1].Value.Uint64(), s[2].Value.Uint64()
	if held < live {
		return 0, live
	}
	return held - live, live
}
