package main

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
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

// gcPacer sets the worker's GOGC from its live heap after each
// configuration it applies, unless GOGC is set in the environment.
type gcPacer struct {
	off     bool
	percent int
	sample  []metrics.Sample
}

func newGCPacer() *gcPacer {
	_, set := os.LookupEnv("GOGC")
	return &gcPacer{off: set, percent: 100, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
}

// applied is called after a configuration is applied.
func (p *gcPacer) applied() {
	if p.off {
		return
	}
	metrics.Read(p.sample)
	if p.sample[0].Value.Kind() != metrics.KindUint64 {
		return
	}
	if pc := gcPercent(p.sample[0].Value.Uint64()); pc != p.percent {
		debug.SetGCPercent(pc)
		p.percent = pc
	}
}
