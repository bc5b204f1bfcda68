package limitcount

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/limit"
)

// maxEntries bounds the keys one instance counts locally with
// sync_interval; a request of a key past it is counted in Redis, as
// without sync_interval.
const maxEntries = 1 << 14

// syncer is sync_interval, APISIX's delayed sync, for one instance on one
// worker: each key's count is kept here as the count Redis had at the
// last sync (used, with the end of Redis's window) and the requests
// admitted here since (delta), and a request is admitted when count -
// used - delta leaves room for it, without a round trip. A key's first
// request, and its first after the window it knows of ended, awaits a
// sync of the key (plugins.Ctx.Await, the loop serving other requests
// meanwhile). The flusher, a goroutine that runs while some key has a
// delta, sends every key's delta to Redis sync_interval after the last
// pass and takes Redis's count back.
//
// While Redis fails, a sync counts the delta in the node's counter table
// instead (APISIX's fallback limiter, the local policy's count and
// window), so that the limit keeps holding per node; a request fails
// (allow_degradation) only when that cannot count either.
//
// entries is owned by the event loop. An entry's counts are atomics, read
// by the loop and written by the loop's syncs and the flusher; one sync
// of an entry runs at a time (busy).
type syncer struct {
	in       *instance
	interval time.Duration
	// fallback is the node's counter table (nil without one).
	fallback plugins.Counters

	entries map[string]*entry
	// head is every entry, newest first: pushed by the loop, walked by
	// the flusher.
	head atomic.Pointer[entry]
	// running is set while the flusher runs.
	running atomic.Bool

	// Owned by the flusher.
	wg    sync.WaitGroup
	batch []*entry
}

// entry is one key's local count.
type entry struct {
	s   *syncer
	key string // the Redis key
	// fbKey is the key's counter in the fallback table.
	fbKey []byte
	// used is Redis's count at the last sync, resetAt the end of its
	// window then (Unix nanoseconds, 0 before the first sync), delta
	// the requests admitted here and not yet sent.
	used, resetAt, delta atomic.Int64
	// busy is set while a sync of the entry runs: the fields below are
	// the syncing side's.
	busy atomic.Bool
	// window, countArg and windowArg are the rule's, as of the key's
	// last window start.
	window              int64
	countArg, windowArg string
	next                *entry // set before the entry is pushed

	// The flusher's call.
	call call
	sent int64
}

func newSyncer(in *instance, interval time.Duration, fallback plugins.Counters) *syncer {
	return &syncer{in: in, interval: interval, fallback: fallback, entries: map[string]*entry{}}
}

// outcome is what syncer.count did with a request.
type outcome int

const (
	direct   outcome = iota // not counted: the caller counts it in Redis
	counted                 // admitted, headers set
	awaiting                // the key's sync is awaited; Resume goes on
	answered                // rejected, or failed
)

// count counts the request in the local count of k (rule r, the i-th, the
// applied-th applied), on the event loop. It allocates only for a new key.
// A key's window starts with a sync the request awaits; the requests that
// come meanwhile await it too, so that every request a worker admits is
// in its local count.
func (s *syncer) count(c plugins.Ctx, r *rule, k []byte, i, applied int, count, window int64, countArg, windowArg string) outcome {
	e := s.entries[string(k)]
	if e == nil {
		if len(s.entries) >= maxEntries {
			return direct
		}
		e = &entry{s: s, key: string(k)}
		e.fbKey = append([]byte("limit-count\x00fallback\x00"), k...)
		e.call.in = s.in
		e.call.Script = script
		e.call.Keys, e.call.Args = e.call.keys[:], e.call.args[:]
		e.call.Waker = e
		s.entries[e.key] = e
		e.next = s.head.Load()
		s.head.Store(e) // the loop is the only writer
	}
	now := c.Now()
	if e.resetAt.Load() > now {
		return s.admit(c, r, e, count, now)
	}
	in := s.in
	cl := in.getCall()
	cl.rule, cl.applied, cl.count = i, applied, count
	cl.e = e
	if e.busy.CompareAndSwap(false, true) {
		e.window, e.countArg, e.windowArg = window, countArg, windowArg
		cl.sent = e.delta.Load()
	} else {
		// A sync of the key is in flight: the request waits for a round
		// trip of its own, which adds nothing (cost 0) and comes back
		// after the sync's, then looks again.
		cl.peer = true
	}
	cl.keys[0] = e.key
	cl.args[0], cl.args[1], cl.args[2] = countArg, windowArg, strconv.FormatInt(cl.sent, 10)
	if !limit.Await(c, cl, in.rc, &cl.Call) {
		if !cl.peer {
			e.busy.Store(false)
		}
		in.putCall(cl)
		in.answer.Fail(c, failBody)
		return answered
	}
	return awaiting
}

// admit admits the request if e's count leaves room for it, as APISIX's
// delayed sync: remaining = count - used - delta - 1.
func (s *syncer) admit(c plugins.Ctx, r *rule, e *entry, count, now int64) outcome {
	in := s.in
	remaining := count - e.used.Load() - e.delta.Load() - 1
	reset := e.resetAt.Load() - now
	if remaining < 0 {
		if in.headers {
			in.setHeaders(c, r, count, 0, reset)
		}
		in.answer.Reject(c)
		return answered
	}
	e.delta.Add(1)
	if !s.running.Load() && s.running.CompareAndSwap(false, true) {
		go s.flush()
	}
	if in.headers {
		in.setHeaders(c, r, count, remaining, reset)
	}
	return counted
}

// abandon is the end of a key's window-start sync whose request left, on
// the event loop: the sync's answer is kept, and the key is free for the
// next one.
func (s *syncer) abandon(cl *call) {
	e, sent := cl.e, cl.sent
	err, n, used, ttlMs := cl.Err, cl.NRep, cl.Reply[0], cl.Reply[1]
	s.in.putCall(cl)
	now := time.Now().UnixNano()
	if err == nil && n >= 2 {
		e.synced(used, now+ttlMs*1e6, sent)
	} else {
		s.degrade(e, sent, now)
	}
	e.busy.Store(false)
}

// resume is the end of a key's window-start sync, on the event loop.
func (s *syncer) resume(c plugins.Ctx, cl *call) {
	in := s.in
	e, sent, rule, applied, count, peer := cl.e, cl.sent, cl.rule, cl.applied, cl.count, cl.peer
	err, n, used, ttlMs := cl.Err, cl.NRep, cl.Reply[0], cl.Reply[1]
	in.putCall(cl)
	now := c.Now()
	if peer {
		if e.resetAt.Load() <= now {
			in.redisFrom(c, rule, applied-1) // the sync failed, or the flusher's is not back yet
			return
		}
		if s.admit(c, &in.rules[rule], e, count, now) != answered {
			in.redisFrom(c, rule+1, applied)
		}
		return
	}
	if err == nil && n >= 2 {
		e.synced(used, now+ttlMs*1e6, sent)
	} else if !s.degrade(e, sent, now) {
		e.busy.Store(false)
		if !in.answer.Degrade {
			c.Exit(500, failBody)
			return
		}
		in.redisFrom(c, rule+1, applied)
		return
	}
	e.busy.Store(false)
	if s.admit(c, &in.rules[rule], e, count, now) == answered {
		return
	}
	in.redisFrom(c, rule+1, applied)
}

// synced takes a sync's answer: Redis's count, its window's end, and the
// delta the sync carried, now in used. used is stored first, so that a
// request in between sees the delta twice (a stricter count), never
// not at all.
func (e *entry) synced(used, resetAt, sent int64) {
	e.used.Store(used)
	e.resetAt.Store(resetAt)
	e.delta.Add(-sent)
}

// degrade counts the delta of a sync Redis failed in the fallback table;
// false when there is none or it is full.
func (s *syncer) degrade(e *entry, sent, now int64) bool {
	if s.fallback == nil {
		return false
	}
	ctr, until := s.fallback.Counter(e.fbKey, now, now+e.window*1e9)
	if ctr == nil {
		return false
	}
	e.synced(ctr.Add(sent), until, sent)
	return true
}

// flush is the flusher: every interval it sends the keys' deltas, and it
// ends after a pass with none. kick and flush cannot both miss a delta:
// admit adds to it and then looks at running, flush clears running and
// then looks at the deltas again.
func (s *syncer) flush() {
	t := time.NewTimer(s.interval)
	defer t.Stop()
	for {
		<-t.C
		if s.pass() == 0 {
			s.running.Store(false)
			if !s.pending() || !s.running.CompareAndSwap(false, true) {
				return
			}
		}
		t.Reset(s.interval)
	}
}

// pass sends the delta of every key that has one, in one pipeline, and
// waits for the answers (each within redis_timeout); it returns the
// number of keys sent.
func (s *syncer) pass() int {
	s.batch = s.batch[:0]
	for e := s.head.Load(); e != nil; e = e.next {
		if e.delta.Load() == 0 || !e.busy.CompareAndSwap(false, true) {
			continue
		}
		e.sent = e.delta.Load()
		e.call.keys[0] = e.key
		e.call.args[0], e.call.args[1], e.call.args[2] = e.countArg, e.windowArg, strconv.FormatInt(e.sent, 10)
		s.batch = append(s.batch, e)
	}
	s.wg.Add(len(s.batch))
	for _, e := range s.batch {
		s.in.rc.Submit(&e.call.Call)
	}
	s.wg.Wait()
	now := time.Now().UnixNano()
	for _, e := range s.batch {
		if cl := &e.call; cl.Err == nil && cl.NRep >= 2 {
			e.synced(cl.Reply[0], now+cl.Reply[1]*1e6, e.sent)
		} else {
			// Without a fallback the delta stays, for the next pass.
			s.degrade(e, e.sent, now)
		}
		e.call.Err = nil
		e.busy.Store(false)
	}
	return len(s.batch)
}

// pending reports whether a key has a delta to send.
func (s *syncer) pending() bool {
	for e := s.head.Load(); e != nil; e = e.next {
		if e.delta.Load() != 0 {
			return true
		}
	}
	return false
}

// Wake implements plugins.Waker: the flusher's call of e is answered.
func (e *entry) Wake() { e.s.wg.Done() }
