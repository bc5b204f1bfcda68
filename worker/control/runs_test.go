package control

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/internal/ptrlist"
)

// TestEncodeRunsScan: encodeRuns finds the same runs and sends the same
// objects with ptrlist.SamePrefix, whatever the change, as it does comparing the
// objects one at a time: random lists of routes, hundreds of them (runs
// longer than ptrlist.SamePrefix's blocks), changed by objects replaced, added,
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
		base := make([]*spec.Route, rng.IntN(3*ptrlist.Block))
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
		got, gotKept := encode(base, next, ptrlist.SamePrefix)
		if got != want || gotKept != wantKept {
			t.Fatalf("round %d: with ptrlist.SamePrefix %s (kept %d), one at a time %s (kept %d)", round, got, gotKept, want, wantKept)
		}
	}
	base := make([]*spec.Route, 2*ptrlist.Block+3)
	for i := range base {
		base[i] = route()
	}
	if got, kept := encode(base, base, ptrlist.SamePrefix); got != fmt.Sprintf(`,"routes":[[0,%d]]`, len(base)) || kept != len(base) {
		t.Fatalf("a list shared whole: %s (kept %d)", got, kept)
	}
	if got, kept := encode(base, base[:len(base)-1], ptrlist.SamePrefix); got != fmt.Sprintf(`,"routes":[[0,%d]]`, len(base)-1) || kept != len(base)-1 {
		t.Fatalf("the same array, one object fewer: %s (kept %d)", got, kept)
	}
}
