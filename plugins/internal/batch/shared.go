package batch

import (
	"runtime"
	"sync"
	"sync/atomic"
	"weak"
)

// Shared is a Processor as the plugin instances of one configuration
// share it: the handle they hold, and the only strong reference to it
// besides the Processor's own goroutines (which hold the Processor, not
// the handle). Once no instance holds it (its configuration was dropped
// or changed and the snapshots built with it were let go), the collector
// finds it unreachable and the Processor is closed: what it gathered is
// sent, its goroutines and timers stop, and its Registry forgets it, as
// APISIX's batch-processor-manager removes the stale processors of a
// configuration that changed. This happens at the collection after the
// last instance went, which Go's runtime forces every two minutes at the
// latest. Its methods are the Processor's.
type Shared struct{ *Processor }

// Registry holds a plugin's processors by configuration key, weakly: an
// entry lives as long as instances hold its Shared. Its zero value is
// ready for use; it is safe for concurrent use.
type Registry struct {
	mu sync.Mutex
	m  map[string]weak.Pointer[Shared]
	// closed sums the counts of the processors closed, so that Stats
	// goes on counting what they sent and dropped.
	closed struct{ sent, dropped, failed uint64 }
}

// open is the number of processors started and not yet closed, in the
// process: what a test of the clean-up watches.
var open atomic.Int64

// Open is the number of processors running (started by New, not yet
// closed) in the process.
func Open() int { return int(open.Load()) }

// Get returns the Shared of key, the Processor of a configuration: the
// one instances already hold, else one made now by mk. It is meant for a
// plugin's Build, off the event loops.
func (r *Registry) Get(key string, mk func() (*Processor, error)) (*Shared, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if s := r.m[key].Value(); s != nil {
		return s, nil
	}
	p, err := mk()
	if err != nil {
		return nil, err
	}
	s := &Shared{p}
	if r.m == nil {
		r.m = map[string]weak.Pointer[Shared]{}
	}
	r.m[key] = weak.Make(s)
	runtime.AddCleanup(s, r.release, stale{key, p})
	return s, nil
}

// stale is what the clean-up of a Shared needs: its key and Processor.
type stale struct {
	key string
	p   *Processor
}

// release runs once the Shared of x is unreachable: the key is forgotten
// (unless a new Shared took it meanwhile) and the Processor closed on a
// goroutine of its own, since Close waits for the last batch to be sent
// and the runtime runs the clean-ups one at a time.
func (r *Registry) release(x stale) {
	r.mu.Lock()
	if wp, ok := r.m[x.key]; ok && wp.Value() == nil {
		delete(r.m, x.key)
	}
	r.mu.Unlock()
	go func() {
		x.p.Close()
		sent, dropped, failed := x.p.Stats()
		r.mu.Lock()
		r.closed.sent += sent
		r.closed.dropped += dropped
		r.closed.failed += failed
		r.mu.Unlock()
	}()
}

// Len is the number of configurations whose processor instances hold.
func (r *Registry) Len() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, wp := range r.m {
		if wp.Value() != nil {
			n++
		}
	}
	return n
}

// Stats sums the counts of the registry's processors (Processor.Stats),
// the closed ones included.
func (r *Registry) Stats() (sent, dropped, failed uint64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	sent, dropped, failed = r.closed.sent, r.closed.dropped, r.closed.failed
	for _, wp := range r.m {
		if s := wp.Value(); s != nil {
			a, b, c := s.Stats()
			sent, dropped, failed = sent+a, dropped+b, failed+c
		}
	}
	return sent, dropped, failed
}
