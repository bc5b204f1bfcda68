package opentelemetry

import (
	"sync/atomic"
)

// Queue is a bounded queue of spans between the event loops that record
// them (a worker's loop, one span per sampled request; several loops of
// one process may share a queue) and one consumer, the exporter's
// goroutine. A producer never blocks nor allocates: when the queue is
// full the span is dropped and counted (Dropped), as
// batch_span_processor's drop_on_queue_full; a loop cannot wait for an
// export. It is Vyukov's bounded queue: each slot's sequence number says
// whose it is, so producers claim slots with one compare-and-swap and no
// lock.
//
// Reserve and Commit are the producers' (a slot reserved is its
// producer's until it commits it), Next and Done the consumer's, for one
// goroutine at a time; Len, Dropped and Ready are safe anywhere.
type Queue struct {
	slots []slot
	mask  uint64
	// head is the position the consumer reads next, tail the next a
	// producer claims.
	head, tail atomic.Uint64
	dropped    atomic.Uint64
	// ready has a token when batch spans or more were committed since the
	// consumer last took it, so that it exports a full batch without
	// waiting for its timer.
	ready chan struct{}
	batch uint64
}

// slot is a span and its sequence number: seq == pos when free for the
// producer of position pos, pos+1 once committed, pos+len(slots) once
// the consumer gave it back.
type slot struct {
	seq  atomic.Uint64
	span Span
}

// NewQueue makes a queue of at least size spans (rounded up to a power of
// two), which signals Ready once batch spans are queued.
func NewQueue(size, batch int) *Queue {
	n := 1
	for n < size {
		n <<= 1
	}
	if batch < 1 {
		batch = 1
	}
	q := &Queue{slots: make([]slot, n), mask: uint64(n - 1), ready: make(chan struct{}, 1), batch: uint64(batch)}
	for i := range q.slots {
		q.slots[i].seq.Store(uint64(i))
	}
	return q
}

// Reserve claims the slot of the next span and returns its span, reset;
// nil when the queue is full (the span dropped and counted). The span is
// the caller's until it passes it to Commit, which it must.
func (q *Queue) Reserve() *Span {
	for {
		pos := q.tail.Load()
		sl := &q.slots[pos&q.mask]
		switch seq := sl.seq.Load(); {
		case seq == pos:
			if q.tail.CompareAndSwap(pos, pos+1) {
				sl.span.Reset()
				sl.span.qpos = pos
				return &sl.span
			}
		case seq < pos:
			q.dropped.Add(1)
			return nil
		}
		// Another producer took pos: try the next.
	}
}

// Commit queues s, a span Reserve returned.
func (q *Queue) Commit(s *Span) {
	pos := s.qpos
	q.slots[pos&q.mask].seq.Store(pos + 1)
	if pos+1-q.head.Load() >= q.batch {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
}

// Next returns the oldest committed span, nil when none; it is the
// consumer's until Done, which gives its slot back. A span reserved and
// not yet committed holds back those after it.
func (q *Queue) Next() *Span {
	pos := q.head.Load()
	sl := &q.slots[pos&q.mask]
	if sl.seq.Load() != pos+1 {
		return nil
	}
	return &sl.span
}

// Done gives back the slot of the span Next returned.
func (q *Queue) Done() {
	pos := q.head.Load()
	q.slots[pos&q.mask].seq.Store(pos + uint64(len(q.slots)))
	q.head.Store(pos + 1)
}

// Len is the number of spans reserved or queued and not yet given back.
func (q *Queue) Len() int { return int(q.tail.Load() - q.head.Load()) }

// Dropped is the number of spans dropped for a full queue.
func (q *Queue) Dropped() uint64 { return q.dropped.Load() }

// Ready receives a token when a batch of spans is queued.
func (q *Queue) Ready() <-chan struct{} { return q.ready }
