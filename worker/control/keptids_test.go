package control

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/spec"
)

// TestDeltaCheckedKeptIDs: Deltas that keep the upstreams whole, against
// one base and then another whose upstreams are another list of the same
// length, each changing a route's upstream_id or adding an upstream:
// deltaChecked says what a Check of the whole Spec says, the ids of a
// list kept whole are looked up where they were kept (kindIDs), and a
// list of other ids is never taken for it.
func TestDeltaCheckedKeptIDs(t *testing.T) {
	mkBase := func(prefix string) *spec.Spec {
		s := &spec.Spec{}
		for i := range 100 {
			u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"%s%d","nodes":{"127.0.0.1:%d":1}}`, prefix, i, 2000+i))
			if err != nil {
				t.Fatal(err)
			}
			s.Upstreams = append(s.Upstreams, u)
		}
		for i := range 50 {
			s.Routes = append(s.Routes, keptRoute(t, i, fmt.Sprint(prefix, i)))
		}
		if err := s.Check(); err != nil {
			t.Fatal(err)
		}
		return s
	}
	// routeTo is base with route 10 naming upstream up: the Delta keeps
	// the upstreams whole.
	routeTo := func(base *spec.Spec, up string) (*spec.Spec, map[string]*memberChange) {
		s := &spec.Spec{Routes: slices.Clone(base.Routes), Upstreams: base.Upstreams}
		s.Routes[10] = keptRoute(t, 10, up)
		return s, map[string]*memberChange{
			"routes":    {runs: [][2]int{{0, 10}, {11, len(base.Routes)}}, added: []int{10}},
			"upstreams": {runs: [][2]int{{0, len(base.Upstreams)}}},
		}
	}
	// upstreamAdded is base with an upstream of id id added at the end.
	upstreamAdded := func(base *spec.Spec, id string) (*spec.Spec, map[string]*memberChange) {
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":%q,"nodes":{"127.0.0.1:1":1}}`, id))
		if err != nil {
			t.Fatal(err)
		}
		s := &spec.Spec{Routes: base.Routes, Upstreams: append(slices.Clip(base.Upstreams), u)}
		return s, map[string]*memberChange{
			"routes":    {runs: [][2]int{{0, len(base.Routes)}}},
			"upstreams": {runs: [][2]int{{0, len(base.Upstreams)}}, added: []int{len(base.Upstreams)}},
		}
	}
	check := func(name string, base, s *spec.Spec, changes map[string]*memberChange, want bool) {
		t.Helper()
		got := deltaChecked(base, s, changes)
		if err := s.Check(); (err == nil) != want {
			t.Fatalf("%s: Check says %v, the test %v", name, err, want)
		}
		if got != want {
			t.Errorf("%s: deltaChecked %v, want %v", name, got, want)
		}
	}
	for _, prefix := range []string{"u", "v"} {
		base := mkBase(prefix)
		s, c := routeTo(base, prefix+"7")
		check(prefix+": an upstream of the base", base, s, c, true)
		if set := kindIDs[ckUpstreams].Load(); set == nil || set.n != len(base.Upstreams) || !set.has(base, prefix+"99") {
			t.Fatalf("%s: the upstreams kept whole were not kept", prefix)
		}
		other := map[string]string{"u": "v", "v": "u"}[prefix]
		for _, up := range []string{prefix + "100", other + "7"} {
			s, c = routeTo(base, up)
			check(prefix+": "+up+", an upstream the base does not have", base, s, c, false)
		}
		s, c = upstreamAdded(base, prefix+"5")
		check(prefix+": an upstream added with a kept one's id", base, s, c, false)
		s, c = upstreamAdded(base, prefix+"200")
		check(prefix+": an upstream added", base, s, c, true)
	}
}

// keptRoute is route r<i> naming upstream up by upstream_id.
func keptRoute(t *testing.T, i int, up string) *spec.Route {
	t.Helper()
	r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r%d","uri":"/r%d","upstream_id":%q}`, i, i, up))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestRouteIDsCarried: a chain of Deltas as a worker decodes them, each
// against the Spec the one before made, with routes replaced, added (at
// the end and in the middle, now and then with an id a route has),
// removed and moved: DecodeDelta refuses what a Check of the whole Spec
// refuses, and the route ids of each Spec it makes are kept (routeIDs)
// and are those of its routes, so that the next Delta's routes added are
// looked up there.
func TestRouteIDsCarried(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 7))
	var ups []*spec.Upstream
	for i := range 10 {
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"u%d","nodes":{"127.0.0.1:%d":1}}`, i, 2000+i))
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, u)
	}
	mk := func(id string) *spec.Route {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":%q,"uri":"/%s/%d","upstream_id":"u%d"}`, id, id, rng.IntN(99), rng.IntN(10)))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	sent := &spec.Spec{Upstreams: ups}
	for i := range 60 {
		sent.Routes = append(sent.Routes, mk(fmt.Sprint("r", i)))
	}
	sent.SetHash()
	held, err := DecodeSpec(mustEncode(t, sent), nil)
	if err != nil {
		t.Fatal(err)
	}
	carried, refused := 0, 0
	for step := range 300 {
		next := &spec.Spec{Upstreams: ups, Routes: changeList(rng, slices.Clone(sent.Routes), mk, "r", 90)}
		next.SetHash()
		payload, ok, err := EncodeDelta(sent, next)
		if err != nil || !ok {
			t.Fatalf("step %d: %v %v", step, ok, err)
		}
		wantErr := next.Check()
		got, err := DecodeDelta(payload, held, nil)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != "control: config: "+wantErr.Error()) {
			t.Fatalf("step %d: DecodeDelta: %v; Check of the whole Spec: %v\npayload %s", step, err, wantErr, payload)
		}
		if err != nil {
			refused++
			continue
		}
		if set := routeIDs.Load(); set.of(got.Routes) {
			carried++
			if set.ids.n != len(got.Routes) {
				t.Fatalf("step %d: %d ids kept for %d routes", step, set.ids.n, len(got.Routes))
			}
			for _, r := range got.Routes {
				if !set.has(r.ID.String()) {
					t.Fatalf("step %d: route %s not in the ids kept", step, r.ID)
				}
			}
		}
		sent, held = next, got
	}
	// the set is made at the first route added with an id of its own,
	// and lost only with a Delta refused
	if carried < 150 || refused == 0 {
		t.Fatalf("route ids kept for %d of 300 Specs, %d refused", carried, refused)
	}
	t.Logf("route ids kept for %d of 300 Specs, %d refused", carried, refused)
}

// TestIDSet: a kept list's ids are each found in its set, and ids of no
// object of the list are not, the set's table being at most four fifths
// full whatever the list's length.
func TestIDSet(t *testing.T) {
	for _, n := range []int{1, 7, 100, 1000} {
		s := &spec.Spec{}
		for i := range n {
			u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"u-%d","nodes":{"127.0.0.1:1980":1}}`, i))
			if err != nil {
				t.Fatal(err)
			}
			s.Upstreams = append(s.Upstreams, u)
		}
		k := &checkKinds[ckUpstreams]
		set := newIDSet(k, s, k.list(s), n)
		if len(set.slots)*4 < n*5 {
			t.Errorf("%d ids in %d slots", n, len(set.slots))
		}
		for i := range n {
			if id := fmt.Sprint("u-", i); !set.has(s, id) {
				t.Errorf("%d ids: %s not found", n, id)
			}
		}
		for _, id := range []string{"u-" + fmt.Sprint(n), "u-", "u", "", "v-1", "u-01"} {
			if set.has(s, id) {
				t.Errorf("%d ids: %q found", n, id)
			}
		}
	}
}
