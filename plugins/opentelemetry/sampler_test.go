package opentelemetry

import (
	"encoding/binary"
	"math"
	"math/rand/v2"
	"testing"
)

// TestSamplers: always_on and always_off; trace_id_ratio samples its
// fraction of random trace ids, and the same id always alike;
// parent_base follows a parent's flag, else its root.
func TestSamplers(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	ids := make([]TraceID, 20000)
	for i := range ids {
		binary.BigEndian.PutUint64(ids[i][:8], rng.Uint64())
		binary.BigEndian.PutUint64(ids[i][8:], rng.Uint64())
	}
	count := func(s Sampler, parent SpanContext, hasParent bool) int {
		n := 0
		for _, id := range ids {
			if s.Sample(id, parent, hasParent) {
				n++
			}
		}
		return n
	}
	if n := count(AlwaysOn, SpanContext{}, false); n != len(ids) {
		t.Errorf("always_on: %d of %d", n, len(ids))
	}
	if n := count(AlwaysOff, SpanContext{Flags: 1}, true); n != 0 {
		t.Errorf("always_off: %d, a sampled parent notwithstanding", n)
	}
	for _, f := range []float64{0, 0.1, 0.5, 0.9, 1, 2, -1, math.NaN()} {
		want := math.Max(0, math.Min(1, f))
		if math.IsNaN(f) {
			want = 0
		}
		got := float64(count(TraceIDRatio(f), SpanContext{}, false)) / float64(len(ids))
		if math.Abs(got-want) > 0.02 {
			t.Errorf("trace_id_ratio %v: sampled %.3f", f, got)
		}
	}
	// The same trace id, the same answer: sampling by id, not by chance.
	r, r2 := TraceIDRatio(0.5), TraceIDRatio(0.5)
	for _, id := range ids[:100] {
		if a, b := r.Sample(id, SpanContext{}, false), r2.Sample(id, SpanContext{}, false); a != b {
			t.Fatalf("id %x: two answers", id)
		}
	}
	// Known ids: the last 8 bytes all ones (sampled by no fraction below
	// 1) or all zeros (by any above 0).
	var hi, lo TraceID
	for i := 8; i < 16; i++ {
		hi[i] = 0xff
	}
	small := TraceIDRatio(0.001)
	if r.Sample(hi, SpanContext{}, false) || !small.Sample(lo, SpanContext{}, false) {
		t.Error("trace_id_ratio does not read the id's last 8 bytes")
	}

	pb := ParentBase(TraceIDRatio(0.25))
	if n := count(pb, SpanContext{Flags: 1}, true); n != len(ids) {
		t.Errorf("parent_base, a sampled parent: %d of %d", n, len(ids))
	}
	if n := count(pb, SpanContext{Flags: 0}, true); n != 0 {
		t.Errorf("parent_base, a parent not sampled: %d", n)
	}
	if got := float64(count(pb, SpanContext{}, false)) / float64(len(ids)); math.Abs(got-0.25) > 0.02 {
		t.Errorf("parent_base, no parent (root trace_id_ratio 0.25): %.3f", got)
	}
	if n := count(ParentBase(AlwaysOff), SpanContext{}, false); n != 0 {
		t.Errorf("parent_base, root always_off: %d", n)
	}
}
