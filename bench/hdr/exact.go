package hdr

import (
	"cmp"
	"math"
	"slices"
)

// ExactQuantile is the q-quantile (0..1) of xs by the rank a Histogram
// reports (nearest rank: the ceil(q·n)-th smallest, the smallest for q =
// 0), read from the values themselves rather than their buckets: for the
// few dozen samples of a run, each a value to show as it is. It returns
// the zero value for no values, and clamps q to [0, 1]. xs is left as it
// is: the values are sorted in a copy.
func ExactQuantile[T cmp.Ordered](xs []T, q float64) T {
	if len(xs) == 0 {
		return *new(T)
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	rank := int(math.Ceil(q * float64(len(s))))
	return s[min(max(rank, 1), len(s))-1]
}
