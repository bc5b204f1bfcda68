package worker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/control"
	"coregate/worker/router"
)

// TestDeltaAppendsAsBuilt runs a bulk load's Deltas through the worker's
// path (control.DecodeDelta against the Spec held, then compile from the
// snapshot served): runs of Deltas that add routes at the end, whose lists
// DecodeDelta makes in one array and whose builds take the routes kept
// over without comparing them (control.Extends); now and then a route
// replaced, the last one deleted, a Delta refused after it was decoded
// into that array (a route naming an upstream there is not), after which
// the next Delta is made against the Spec held, as before, or one
// decoded whose build was refused, after which the next build is from
// the snapshot before it.
// Each step's snapshot routes every route's path as a build from nothing
// does, and every Spec and snapshot of the steps before still reads
// exactly as it did when it was made: no list made in a shared array,
// refused or not, wrote over what an older one holds.
func TestDeltaAppendsAsBuilt(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 53))
	ps := pluginSet{env: plugins.NewLocalEnv()}
	var ups []*spec.Upstream
	for i := range 3 {
		ups = append(ups, mustDecode(t, spec.DecodeUpstream, fmt.Sprintf(`{"id":"u%d","nodes":{"127.0.0.1:%d":1}}`, i, 2000+i)))
	}
	serial := 0
	route := func(id int, up string) *spec.Route {
		serial++
		return mustDecode(t, spec.DecodeRoute, fmt.Sprintf(
			`{"id":"r%d","uri":"/p%d","name":"n%d","upstream_id":%q,"plugins":{"proxy-rewrite":{"uri":"/v%d"}}}`, id, id, serial, up, serial))
	}
	// sup is the supervisor's Spec, the next made from it by appending
	// to a copy, as the store serves a bulk load's routes.
	sup := &spec.Spec{Upstreams: ups}
	next := 0
	for range 600 {
		sup.Routes = append(sup.Routes, route(next, "u0"))
		next++
	}
	sup.SetHash()
	payload, err := control.EncodeSpec(sup)
	if err != nil {
		t.Fatal(err)
	}
	held, err := control.DecodeSpec(payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	served, err := compile(held, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// seen are the Specs and snapshots made so far, with what each read
	// when it was made.
	type reading struct {
		s      *spec.Spec
		routes []*spec.Route
		snap   *Snapshot
		match  []string
	}
	probes := func(s *Snapshot, n int) []string {
		out := make([]string, 0, n+1)
		for i := range n + 1 { // and one past the last route: none
			out = append(out, describeMatch(s, &router.Request{Method: router.MethodGET, Path: fmt.Appendf(nil, "/p%d", i), Host: []byte("h")}))
		}
		return out
	}
	var seen []reading
	record := func(s *spec.Spec, snap *Snapshot) {
		seen = append(seen, reading{s, slices.Clone(s.Routes), snap, probes(snap, next)})
	}
	record(held, served)
	extended, refused, unbuilt := 0, 0, 0
	for step := range 80 {
		routes := slices.Clone(sup.Routes)
		bad := false
		switch op := rng.IntN(20); {
		case op == 0:
			i := rng.IntN(len(routes))
			id := 0
			fmt.Sscanf(routes[i].ID.String(), "r%d", &id)
			routes[i] = route(id, "u1")
		case op == 1:
			routes = routes[:len(routes)-1]
		case op <= 3:
			routes = append(routes, route(next, "u2"), route(next+1, "nope"))
			bad = true
		default:
			for range 1 + rng.IntN(10) {
				routes = append(routes, route(next, fmt.Sprint("u", rng.IntN(3))))
				next++
			}
		}
		s2 := &spec.Spec{Routes: routes, Upstreams: ups}
		s2.SetHash()
		delta, ok, err := control.EncodeDelta(sup, s2)
		if err != nil || !ok {
			t.Fatalf("step %d: delta: %v %v", step, ok, err)
		}
		s, err := control.DecodeDelta(delta, held, nil)
		if !bad && err == nil && rng.IntN(8) == 0 {
			// Decoded, its build refused (applyConfig): the Spec held
			// moves on, the snapshot served stays, and the next build
			// is from it, two lists back in the array.
			sup, held = s2, s
			unbuilt++
			continue
		}
		if bad {
			if err == nil {
				t.Fatalf("step %d: a route naming upstream nope was decoded", step)
			}
			refused++
			// The supervisor's Spec stays the one held: the next Delta
			// is made against it.
		} else {
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			if control.Extends(served.specList, s.Routes) {
				extended++
			}
			inc, err := compile(s, router.HostURI, upstreamEnv{}, ps, served, nil)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			fresh, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
			if err != nil {
				t.Fatalf("step %d: %v", step, err)
			}
			a, b := probes(inc, next), probes(fresh, next)
			for i := range a {
				if a[i] != b[i] {
					t.Fatalf("step %d: /p%d\ntaken over: %s\nfresh:      %s", step, i, a[i], b[i])
				}
			}
			if got, want := inc.specRoutes.flat(), s.Routes; !slices.Equal(got, want) {
				t.Fatalf("step %d: the snapshot's list of the Spec's routes differs from the Spec's", step)
			}
			sup, held, served = s2, s, inc
			record(s, inc)
		}
		for k, r := range seen {
			if !slices.Equal(r.s.Routes, r.routes) {
				t.Fatalf("step %d: the Spec of reading %d changed", step, k)
			}
			if got := probes(r.snap, next); !slices.Equal(got[:len(r.match)], r.match) {
				t.Fatalf("step %d: the snapshot of reading %d routes otherwise", step, k)
			}
		}
	}
	t.Logf("%d Deltas taken over by Extends, %d refused, %d not built, of 80", extended, refused, unbuilt)
	if extended == 0 || refused == 0 || unbuilt == 0 {
		t.Errorf("extended %d, refused %d, not built %d: the test did not cover them all", extended, refused, unbuilt)
	}
}
