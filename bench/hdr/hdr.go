package hdr

import (
	"errors"
	"math"
	"math/bits"
)

// Errors returned by this package.
var (
	ErrQuantile = errors.New("hdr: quantile out of range [0, 1]")
)

const (
	subBits  = 11
	subCount = 1 << subBits // exact values below this
	subHalf  = subCount / 2
	maxShift = 64 - subBits
	// NumBuckets is the number of counters a Histogram holds.
	NumBuckets = subCount + maxShift*subHalf
)

// Histogram counts uint64 values (nanoseconds, in this project) with a
// relative error below 1/1024. The zero value is not usable; call New.
type Histogram struct {
	counts []uint64
	total  uint64
	min    uint64
	max    uint64
	sum    float64
}

// New returns an empty histogram. It allocates its counters once (about
// 440 KiB); Record never allocates.
func New() *Histogram {
	return &Histogram{counts: make([]uint64, NumBuckets), min: math.MaxUint64}
}

func index(v uint64) int {
	if v < subCount {
		return int(v)
	}
	s := bits.Len64(v) - subBits
	return subCount + (s-1)*subHalf + int(v>>uint(s)) - subHalf
}

// lowest returns the smallest value that falls into bucket i.
func lowest(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	j := i - subCount
	s := j/subHalf + 1
	return uint64(j%subHalf+subHalf) << uint(s)
}

// highest returns the largest value that falls into bucket i.
func highest(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	s := (i-subCount)/subHalf + 1
	return lowest(i) + (uint64(1) << uint(s)) - 1
}

// Record counts one value.
func (h *Histogram) Record(v uint64) {
	h.counts[index(v)]++
	h.total++
	h.sum += float64(v)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// RecordN counts n occurrences of a value.
func (h *Histogram) RecordN(v, n uint64) {
	if n == 0 {
		return
	}
	h.counts[index(v)] += n
	h.total += n
	h.sum += float64(v) * float64(n)
	if v < h.min {
		h.min = v
	}
	if v > h.max {
		h.max = v
	}
}

// Count returns the number of recorded values.
func (h *Histogram) Count() uint64 { return h.total }

// CountAbove returns the number of recorded values above v, within the
// histogram's precision: a bucket that holds v counts as not above it.
func (h *Histogram) CountAbove(v uint64) uint64 {
	var n uint64
	for i := index(v) + 1; i < len(h.counts); i++ {
		n += h.counts[i]
	}
	return n
}

// Min returns the smallest recorded value, or 0 when empty.
func (h *Histogram) Min() uint64 {
	if h.total == 0 {
		return 0
	}
	return h.min
}

// Max returns the largest recorded value, or 0 when empty.
func (h *Histogram) Max() uint64 { return h.max }

// Mean returns the arithmetic mean of the recorded values, or 0 when empty.
func (h *Histogram) Mean() float64 {
	if h.total == 0 {
		return 0
	}
	return h.sum / float64(h.total)
}

// Quantile returns the value below or at which a fraction q of the recorded
// values fall, as the highest value equivalent to that bucket (capped at
// Max), as HdrHistogram reports it. It returns 0 for an empty histogram.
func (h *Histogram) Quantile(q float64) (uint64, error) {
	if q < 0 || q > 1 || math.IsNaN(q) {
		return 0, ErrQuantile
	}
	if h.total == 0 {
		return 0, nil
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	if rank == 0 {
		rank = 1
	}
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			v := highest(i)
			if v > h.max {
				v = h.max
			}
			if v < h.min {
				v = h.min
			}
			return v, nil
		}
	}
	return h.max, nil
}

// MustQuantile is Quantile for a q known to be within [0, 1]; it returns 0
// otherwise.
func (h *Histogram) MustQuantile(q float64) uint64 {
	v, _ := h.Quantile(q)
	return v
}

// Merge adds every value counted in o to h.
func (h *Histogram) Merge(o *Histogram) {
	if o.total == 0 {
		return
	}
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.sum += o.sum
	if o.min < h.min {
		h.min = o.min
	}
	if o.max > h.max {
		h.max = o.max
	}
}

// Reset empties the histogram, keeping its memory.
func (h *Histogram) Reset() {
	clear(h.counts)
	h.total, h.sum, h.max = 0, 0, 0
	h.min = math.MaxUint64
}
