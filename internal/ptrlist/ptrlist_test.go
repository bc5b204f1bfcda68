package ptrlist

import (
	"math/rand/v2"
	"testing"
)

// TestSameEnds checks SamePrefix and SameSuffix against comparing the
// pointers one at a time, on lists around and across the Block size
// that differ at one place, at two, or nowhere, of equal and unequal
// lengths, and on lists that begin at the same place of one array (one
// grown in place after the other), either first.
func TestSameEnds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	objs := make([]int, 4*Block)
	for round := range 2000 {
		a := make([]*int, rng.IntN(3*Block+2))
		for i := range a {
			a[i] = &objs[rng.IntN(len(objs))]
		}
		b := append([]*int(nil), a...)
		switch round % 5 {
		case 4:
			b = a[:rng.IntN(len(a)+1)]
			if rng.IntN(2) == 0 {
				a, b = b, a
			}
		case 1:
			b = b[:rng.IntN(len(b)+1)]
		case 2:
			if len(b) > 0 {
				b[rng.IntN(len(b))] = new(int)
			}
		case 3:
			for range 2 {
				if len(b) > 0 {
					b[rng.IntN(len(b))] = new(int)
				}
			}
			b = append(b, new(int))
		}
		n := min(len(a), len(b))
		pre := 0
		for pre < n && a[pre] == b[pre] {
			pre++
		}
		suf := 0
		for suf < n && a[len(a)-1-suf] == b[len(b)-1-suf] {
			suf++
		}
		if got := SamePrefix(a, b); got != pre {
			t.Fatalf("round %d (%d, %d pointers): SamePrefix %d, one at a time %d", round, len(a), len(b), got, pre)
		}
		if got := SameSuffix(a, b); got != suf {
			t.Fatalf("round %d (%d, %d pointers): SameSuffix %d, one at a time %d", round, len(a), len(b), got, suf)
		}
	}
}
