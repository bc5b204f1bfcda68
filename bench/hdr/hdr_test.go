package hdr

import (
	"errors"
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestBucketBounds(t *testing.T) {
	for i := 0; i < NumBuckets; i++ {
		lo, hi := lowest(i), highest(i)
		if index(lo) != i || index(hi) != i {
			t.Fatalf("bucket %d: index(lowest=%d)=%d index(highest=%d)=%d", i, lo, index(lo), hi, index(hi))
		}
		if i+1 < NumBuckets && lowest(i+1) != hi+1 {
			t.Fatalf("bucket %d: gap: highest %d, next lowest %d", i, hi, lowest(i+1))
		}
		if lo >= subCount && float64(hi-lo)/float64(lo) > 1.0/1024 {
			t.Fatalf("bucket %d: width %d too wide for %d", i, hi-lo, lo)
		}
	}
	if highest(NumBuckets-1) != math.MaxUint64 {
		t.Fatalf("last bucket ends at %d", highest(NumBuckets-1))
	}
}

func TestQuantiles(t *testing.T) {
	tests := []struct {
		name   string
		values func(h *Histogram)
		qs     []float64
		want   []uint64
		tol    float64 // relative tolerance
	}{
		{
			name:   "small exact",
			values: func(h *Histogram) { h.Record(1); h.Record(2); h.Record(3); h.Record(4) },
			qs:     []float64{0, 0.25, 0.5, 0.75, 1},
			want:   []uint64{1, 1, 2, 3, 4},
		},
		{
			name: "uniform 1..1e6",
			values: func(h *Histogram) {
				for v := uint64(1); v <= 1_000_000; v++ {
					h.Record(v)
				}
			},
			qs:   []float64{0.5, 0.95, 0.99, 0.999},
			want: []uint64{500_000, 950_000, 990_000, 999_000},
			tol:  1.0 / 1024,
		},
		{
			name:   "bimodal with RecordN",
			values: func(h *Histogram) { h.RecordN(100_000, 990); h.RecordN(50_000_000, 10) },
			qs:     []float64{0.5, 0.99, 0.991, 1},
			want:   []uint64{100_000, 100_000, 50_000_000, 50_000_000},
			tol:    1.0 / 1024,
		},
		{
			name:   "empty",
			values: func(h *Histogram) {},
			qs:     []float64{0.5},
			want:   []uint64{0},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := New()
			tc.values(h)
			got := make([]uint64, len(tc.qs))
			for i, q := range tc.qs {
				v, err := h.Quantile(q)
				if err != nil {
					t.Fatal(err)
				}
				got[i] = v
			}
			approx := cmp.Comparer(func(a, b uint64) bool {
				return math.Abs(float64(a)-float64(b)) <= tc.tol*float64(max(a, b))
			})
			if d := cmp.Diff(tc.want, got, approx); d != "" {
				t.Errorf("quantiles (-want +got):\n%s", d)
			}
		})
	}
}

func TestMergeResetStats(t *testing.T) {
	a, b := New(), New()
	a.Record(10)
	a.Record(30)
	b.Record(20)
	b.Record(5000)
	a.Merge(b)
	type stats struct {
		Count, Min, Max, P50 uint64
		Mean                 float64
	}
	got := stats{a.Count(), a.Min(), a.Max(), a.MustQuantile(0.5), a.Mean()}
	want := stats{4, 10, 5000, 20, 1265}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("after merge (-want +got):\n%s", d)
	}
	a.Reset()
	got = stats{a.Count(), a.Min(), a.Max(), a.MustQuantile(0.5), a.Mean()}
	if d := cmp.Diff(stats{}, got); d != "" {
		t.Errorf("after reset (-want +got):\n%s", d)
	}
}

func TestQuantileRange(t *testing.T) {
	h := New()
	for _, q := range []float64{-0.1, 1.1, math.NaN()} {
		if _, err := h.Quantile(q); !errors.Is(err, ErrQuantile) {
			t.Errorf("Quantile(%v) error = %v, want ErrQuantile", q, err)
		}
	}
}

func TestCountAbove(t *testing.T) {
	h := New()
	for _, v := range []uint64{1, 5, 10_000_000, 10_000_001, 12_000_000, 50_000_000} {
		h.Record(v)
	}
	for _, tc := range []struct{ v, want uint64 }{{0, 6}, {5, 4}, {10_000_000, 2}, {12_000_000, 1}, {50_000_000, 0}} {
		if got := h.CountAbove(tc.v); got != tc.want {
			t.Errorf("CountAbove(%d) = %d, want %d", tc.v, got, tc.want)
		}
	}
}

// TestExactQuantile: nearest rank, the argument left unsorted, nothing
// for nothing.
func TestExactQuantile(t *testing.T) {
	ds := []time.Duration{5, 1, 4, 2, 3}
	for _, c := range []struct {
		q    float64
		want time.Duration
	}{{0.5, 3}, {1, 5}, {0, 1}, {0.9, 5}, {0.2, 1}, {0.21, 2}, {-1, 1}, {2, 5}} {
		if got := ExactQuantile(ds, c.q); got != c.want {
			t.Errorf("ExactQuantile(%v) = %v, want %v", c.q, got, c.want)
		}
	}
	if ds[0] != 5 {
		t.Errorf("ExactQuantile sorted its argument: %v", ds)
	}
	if ExactQuantile([]time.Duration(nil), 0.5) != 0 {
		t.Error("ExactQuantile of nothing is not 0")
	}
}

// TestExactQuantileAsHistogram: of values a Histogram holds exactly
// (below its first shared bucket), ExactQuantile and Quantile agree at
// every q, so that a run's samples and its histograms rank alike.
func TestExactQuantileAsHistogram(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 2, 3, 10, 11, 40, 101, 1000} {
		xs := make([]uint64, n)
		h := New()
		for i := range xs {
			xs[i] = rng.Uint64N(subCount)
			h.Record(xs[i])
		}
		for _, q := range []float64{0, 0.01, 0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 0.999, 1} {
			if got, want := ExactQuantile(xs, q), h.MustQuantile(q); got != want {
				t.Errorf("n=%d q=%v: ExactQuantile %d, the histogram's %d", n, q, got, want)
			}
		}
	}
}
