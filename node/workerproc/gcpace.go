package workerproc

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"
	"sync/atomic"
)

// gcHeadroom is how far a worker's heap may grow past what the last
// collection left live before the next one starts, when that is more than
// the runtime's default (GOGC=100: as far again as what is live).
//
// A worker allocates only when it builds a configuration; serving
// requests allocates nothing. A build of 5 000 routes allocates about
// 3 MB beside the 2–8 MB a worker keeps live, so at GOGC=100 a bulk load
// through the Admin API ran a collection about every build, each with
// 2–16 ms of concurrent marking on the worker's one CPU, where the event
// loop waits for it. With the headroom a collection comes every several builds; the
// cost is at most this much heap, and only while configurations change.
const gcHeadroom = 16 << 20

// gcPercent is the GOGC value that lets the heap grow by gcHeadroom past
// live bytes, and never less than the runtime's default of 100.
func gcPercent(live uint64) int {
	if live == 0 {
		return 100
	}
	return max(100, int(min(gcHeadroom*100/live, 10_000)))
}

// gcLargeLive is the live heap past which a worker's heap is also held
// to a soft memory limit (gcLimit): a configuration of tens of thousands
// of routes, which GOGC=100 let grow twice over (a worker at 50 000 routes
// and 200 MB live held 400 MB), though it allocates only while it builds
// a change. Below it no limit is set.
const gcLargeLive = 64 << 20

// gcLimit is the soft memory limit (debug.SetMemoryLimit) of a worker
// with live bytes of live heap and other bytes of the runtime's memory
// besides its heap (stacks, metadata): room for a quarter of live more,
// and never less than gcLargeLive; no limit (math.MaxInt64) below
// gcLargeLive live. The collector then runs before the heap doubles, and
// the scavenger hands back what lies past the limit.
func gcLimit(live, other uint64) int64 {
	if live < gcLargeLive {
		return math.MaxInt64
	}
	return int64(live + max(live/4, gcLargeLive) + other)
}

// gcPacer sets the worker's GOGC from its live heap after each
// configuration it applies and after each collection, unless GOGC is set
// in the environment. Set once per configuration only, a percent made for
// a small live heap would stay while the live heap grows (the buffers of
// slow clients, of large bodies), and the heap's goal, a multiple of live,
// with it: 10 000 % of 30 MiB live is 3 GiB. Set again after each
// collection, the goal is never more than max(live, gcHeadroom) past
// what the last collection left live. Past gcLargeLive it also sets the
// soft memory limit (gcLimit) the same way, unless GOMEMLIMIT is set (or
// GOGC, which leaves the pacer off).
type gcPacer struct {
	off bool
	// limitOff: GOMEMLIMIT is set in the environment; the pacer sets
	// no limit (gcLimit).
	limitOff bool
	// following is set from start until stop: the finalizers re-pace
	// and re-arm only while it is.
	following atomic.Bool
	// mu orders the configuration's and the collector's calls; neither
	// runs on the event loop.
	mu      sync.Mutex
	percent int
	limit   int64
	sample  []metrics.Sample
}

// The metrics the pacer reads: the live heap, and what the runtime holds
// besides its heap's spans (gcLimit's other).
var gcSamples = []string{
	"/gc/heap/live:bytes",
	"/memory/classes/total:bytes",
	"/memory/classes/heap/released:bytes",
	"/memory/classes/heap/free:bytes",
	"/memory/classes/heap/objects:bytes",
	"/memory/classes/heap/unused:bytes",
}

func newGCPacer() *gcPacer {
	_, set := os.LookupEnv("GOGC")
	_, limitSet := os.LookupEnv("GOMEMLIMIT")
	p := &gcPacer{off: set, limitOff: limitSet, percent: 100, limit: math.MaxInt64}
	for _, name := range gcSamples {
		p.sample = append(p.sample, metrics.Sample{Name: name})
	}
	return p
}

// start has the pacer follow every collection from now on (see arm).
func (p *gcPacer) start() {
	if !p.off && !p.following.Swap(true) {
		p.arm()
	}
}

// stop ends start's following: the finalizer armed last runs and stops.
func (p *gcPacer) stop() { p.following.Store(false) }

// gcSentinel is an object nothing references, whose finalizer runs after
// the collection that found it unreachable. It holds a pointer so that it
// is not a tiny allocation, which shares its block with others and may
// never be finalized.
type gcSentinel struct{ _ *byte }

// arm has repace called once the next collection ends, and arms the one
// after: one small allocation per collection, none per request.
func (p *gcPacer) arm() {
	runtime.SetFinalizer(new(gcSentinel), func(*gcSentinel) {
		if p.following.Load() {
			p.repace()
			p.arm()
		}
	})
}

// applied is called after a configuration is applied.
func (p *gcPacer) applied() {
	if !p.off {
		p.repace()
	}
}

// repace sets GOGC from the live heap of the last collection.
func (p *gcPacer) repace() {
	p.mu.Lock()
	defer p.mu.Unlock()
	metrics.Read(p.sample)
	var v [6]uint64
	for i, sm := range p.sample {
		if sm.Value.Kind() != metrics.KindUint64 {
			return
		}
		v[i] = sm.Value.Uint64()
	}
	live := v[0]
	if pc := gcPercent(live); pc != p.percent {
		debug.SetGCPercent(pc)
		p.percent = pc
	}
	if p.limitOff {
		return
	}
	total, released, spans := v[1], v[2], v[3]+v[4]+v[5]
	other := uint64(0)
	if total > released+spans {
		other = total - released - spans
	}
	if l := gcLimit(live, other); l != p.limit {
		debug.SetMemoryLimit(l)
		p.limit = l
	}
}

// current is the GOGC the pacer last set.
func (p *gcPacer) current() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.percent
}
