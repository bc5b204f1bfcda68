package opentelemetry

import (
	"sync/atomic"
)

// Queue is a bounded queue of spans between one producer (the event loop
// of a worker, which records a span per sampled request) and one consumer
// (the exporter's goroutine). The producer never blocks nor allocates:
// when the queue is full the span is dropped and counted (Dropped), as
// batch_span_processor's drop_on_queue_full; the loop cannot wait for an
// export. Reserve and Commit are for the producer alone, Next and Done
// for the consumer alone; Len, Dropped and Ready are safe anywhere.
type Queue struct {
	slots []Span
	mask  uint64
	// head is the next slot the consumer reads, tail the next the
	// producer writes; tail-head spans are queued.
	head, tail atomic.Uint64
	dropped    atomic.Uint64
	// ready has a token when batch spans or more were committed since the
	// consumer last took it, so that it exports a full batch without
	// waiting for its timer.
	ready chan struct{}
	batch uint64
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
	return &Queue{slots: make([]Span, n), mask: uint64(n - 1), ready: make(chan struct{}, 1), batch: uint64(batch)}
}

// Reserve returns the slot of the next span, reset, or nil when the queue
// is full (the span dropped and counted). The slot is the producer's
// until Commit; a Reserve not committed is given back by the next
// Reserve.
func (q *Queue) Reserve() *Span {
	t := q.tail.Load()
	if t-q.head.Load() >= uint64(len(q.slots)) {
		q.dropped.Add(1)
		return nil
	}
	s := &q.slots[t&q.mask]
	s.Reset()
	return s
}

// Commit queues the span Reserve returned last.
func (q *Queue) Commit() {
	t := q.tail.Load() + 1
	q.tail.Store(t)
	if t-q.head.Load() >= q.batch {
		select {
		case q.ready <- struct{}{}:
		default:
		}
	}
}

// Next returns the oldest queued span, nil when none; it is the
// consumer's until Done, which gives its slot back.
func (q *Queue) Next() *Span {
	h := q.head.Load()
	if h == q.tail.Load() {
		return nil
	}
	return &q.slots[h&q.mask]
}

// Done gives back the slot of the span Next returned.
func (q *Queue) Done() { q.head.Add(1) }

// Len is the number of spans queued.
func (q *Queue) Len() int { return int(q.tail.Load() - q.head.Load()) }

// Dropped is the number of spans dropped for a full queue.
func (q *Queue) Dropped() uint64 { return q.dropped.Load() }

// Ready receives a token when a batch of spans is queued.
func (q *Queue) Ready() <-chan struct{} { return q.ready }
