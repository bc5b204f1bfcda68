package control

import (
	"fmt"
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
		if set := kindIDs[ckUpstreams].Load(); set == nil || set.n != len(base.Upstreams) || set.ids[prefix+"99"] != true {
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
