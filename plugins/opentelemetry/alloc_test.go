//go:build !race

package opentelemetry

import "testing"

// TestAllocLoopSide guards what the event loop does for a sampled
// request: a traceparent read and written, a sampling decision, a span
// recorded into the queue; and the consumer's reading of it.
func TestAllocLoopSide(t *testing.T) {
	q := NewQueue(16, 4)
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	out := make([]byte, 0, 64)
	pb := ParentBase(TraceIDRatio(0.5))
	method, route := []byte("GET"), []byte("/hello*")
	allocs := testing.AllocsPerRun(500, func() {
		parent, ok := ParseTraceparent(tp)
		id, _ := ParseTraceID(tp[3:35])
		if !pb.Sample(id, parent, ok) {
			t.Fatal("a sampled parent not followed")
		}
		out = AppendTraceparent(out[:0], parent)
		if s := q.Reserve(); s != nil {
			s.SC = parent
			s.SetName(method, []byte(" "), route)
			s.AddAttr([]byte("http.route"), route)
			q.Commit(s)
		}
		if s := q.Next(); s != nil {
			_ = s.Name()
			q.Done()
		}
	})
	if allocs != 0 {
		t.Errorf("the loop's side allocates %.1f times, want 0", allocs)
	}
}
