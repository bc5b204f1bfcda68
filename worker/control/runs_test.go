package control

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/spec"
)

// TestEncodeRunsScan: encodeRuns finds the same runs and sends the same
// objects with samePrefix, whatever the change, as it does comparing the
// objects one at a time: random lists of routes, hundreds of them (runs
// longer than samePrefix's blocks), changed by objects replaced, added,
// removed and moved, a few or many; and a list next shares whole with
// base (the same array and length) is one run.
func TestEncodeRunsScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 1))
	made := 0
	route := func() *spec.Route {
		made++
		return mustRoute(t, fmt.Sprintf(`{"id":"r%d","uri":"/r%d","upstream_id":"u1"}`, made, made))
	}
	encode := func(base, next []*spec.Route, prefix func(a, b []*spec.Route) int) (string, int) {
		var b bytes.Buffer
		n, err := encodeRuns(&b, "routes", base, next, routeID, same, prefix)
		if err != nil {
			t.Fatal(err)
		}
		return b.String(), n
	}
	for round := range 300 {
		base := make([]*spec.Route, rng.IntN(3*prefixBlock))
		for i := range base {
			base[i] = route()
		}
		next := slices.Clone(base)
		for range rng.IntN(1 + rng.IntN(40)) {
			switch i := rng.IntN(len(next) + 1); {
			case rng.IntN(4) == 0 || i == len(next):
				next = slices.Insert(next, i, route())
			case rng.IntN(3) == 0:
				next[i] = mustRoute(t, fmt.Sprintf(`{"id":%q,"uri":"/v%d","upstream_id":"u1"}`, next[i].ID.String(), round)) // replaced in place
			case rng.IntN(2) == 0:
				next = slices.Delete(next, i, i+1)
			default:
				o := next[i]
				next = slices.Delete(next, i, i+1)
				next = slices.Insert(next, rng.IntN(len(next)+1), o)
			}
		}
		want, wantKept := encode(base, next, nil)
		got, gotKept := encode(base, next, samePrefix)
		if got != want || gotKept != wantKept {
			t.Fatalf("round %d: with samePrefix %s (kept %d), one at a time %s (kept %d)", round, got, gotKept, want, wantKept)
		}
	}
	base := make([]*spec.Route, 2*prefixBlock+3)
	for i := range base {
		base[i] = route()
	}
	if got, kept := encode(base, base, samePrefix); got != fmt.Sprintf(`,"routes":[[0,%d]]`, len(base)) || kept != len(base) {
		t.Fatalf("a list shared whole: %s (kept %d)", got, kept)
	}
	if got, kept := encode(base, base[:len(base)-1], samePrefix); got != fmt.Sprintf(`,"routes":[[0,%d]]`, len(base)-1) || kept != len(base)-1 {
		t.Fatalf("the same array, one object fewer: %s (kept %d)", got, kept)
	}
}

// TestSamePrefix: samePrefix is the length of the common run of equal
// pointers, wherever the first difference falls in or past its blocks.
func TestSamePrefix(t *testing.T) {
	a := make([]*spec.Route, 3*prefixBlock+5)
	for i := range a {
		a[i] = new(spec.Route)
	}
	for _, at := range []int{0, 1, prefixBlock - 1, prefixBlock, prefixBlock + 1, 2*prefixBlock + 7, len(a) - 1, len(a)} {
		b := slices.Clone(a)
		if at < len(b) {
			b[at] = new(spec.Route)
		}
		if got := samePrefix(a, b); got != at {
			t.Errorf("first difference at %d: samePrefix %d", at, got)
		}
		if got := samePrefix(a[:at/2], b); got != at/2 {
			t.Errorf("a shorter, %d: samePrefix %d", at/2, got)
		}
	}
}
