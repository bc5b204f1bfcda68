package worker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
)

// TestCompileRunsAsBuilt: random sequences of changes to a list of
// hundreds of routes over shared upstreams (routes replaced, disabled,
// created anywhere, deleted in blocks longer than the build's look-ahead,
// swapped), each Spec's list a fresh one as a Delta makes it, built from
// the snapshot before and from nothing. The two have the same routes from
// the same objects, every probe is routed alike, every route whose object
// the snapshot before had built is taken over as it was, and the runs
// (Snapshot.runs) each name routes built from their objects.
func TestCompileRunsAsBuilt(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runsRun(t, seed) })
	}
}

func runsRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 48))
	ps := pluginSet{reg: plugins.Default, env: plugins.NewLocalEnv()}
	var ups []*spec.Upstream
	for i := range 8 {
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"u%d","nodes":{"127.0.0.1:%d":1}}`, i, 3000+i))
		if err != nil {
			t.Fatal(err)
		}
		ups = append(ups, u)
	}
	version, nextID := 0, 0
	newRoute := func(id int) *spec.Route {
		version++
		var js string
		switch rng.IntN(8) {
		case 0:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d","status":0,"upstream_id":"u%d"}`, id, id, rng.IntN(len(ups)))
		case 1:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d","plugins":{"proxy-rewrite":{"uri":"/v%d"}}}`, id, id, version)
		case 2:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d","upstream":{"nodes":{"127.0.0.1:%d":1}}}`, id, id, 4000+version%16)
		default:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d","upstream_id":"u%d","plugins":{"proxy-rewrite":{"uri":"/v%d"}}}`,
				id, id, rng.IntN(len(ups)), version%4)
		}
		r, err := spec.DecodeRoute([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	fresh := func() *spec.Route { nextID++; return newRoute(nextID - 1) }
	var routes []*spec.Route
	for range 600 {
		routes = append(routes, fresh())
	}
	var cur *Snapshot
	for step := range 120 {
		routes = slices.Clone(routes)
		for range 1 + rng.IntN(3) {
			switch op := rng.IntN(10); {
			case op < 3:
				i := rng.IntN(len(routes))
				var id int
				fmt.Sscanf(routes[i].ID.String(), "r%d", &id)
				routes[i] = newRoute(id)
			case op < 5:
				i := rng.IntN(len(routes) + 1)
				routes = slices.Insert(routes, i, fresh())
			case op < 6:
				for range 1 + rng.IntN(5) {
					routes = append(routes, fresh())
				}
			case op < 8 && len(routes) > 200:
				i := rng.IntN(len(routes) - 100)
				routes = slices.Delete(routes, i, i+1+rng.IntN(100))
			case op < 9:
				i, j := rng.IntN(len(routes)), rng.IntN(len(routes))
				routes[i], routes[j] = routes[j], routes[i]
			default:
				routes = append(routes, fresh())
			}
		}
		s := &spec.Spec{Routes: routes, Upstreams: ups}
		var served servedLists
		if cur != nil {
			served = listsOf(cur)
		}
		inc, err := compile(s, router.HostURI, upstreamEnv{}, ps, cur, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if cur != nil && !served.same(listsOf(cur)) {
			t.Fatalf("step %d: the build from the served snapshot wrote its lists", step)
		}
		full, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if inc.routes.len() != full.routes.len() {
			t.Fatalf("step %d: %d routes built from the snapshot before, %d from nothing", step, inc.routes.len(), full.routes.len())
		}
		for k, rt := range inc.routes.flat() {
			if rt.from != full.routes.at(k).from || rt.id() != full.routes.at(k).id() {
				t.Fatalf("step %d: route %d %s built from other objects than from nothing (%s)", step, k, rt.id(), full.routes.at(k).id())
			}
		}
		if cur != nil {
			built := map[*spec.Route]*route{}
			for _, rt := range cur.routes.flat() {
				built[rt.from.route] = rt
			}
			for _, rt := range inc.routes.flat() {
				if pr := built[rt.from.route]; pr != nil && pr != rt {
					t.Fatalf("step %d: route %s built again, its object unchanged", step, rt.id())
				}
			}
		}
		for _, run := range inc.runs {
			for x := range run.n {
				rt := inc.routes.at(int(run.route + x))
				if inc.specRoutes.at(int(run.spec+x)) != rt.from.route || rt.renew || rt.about.splits != nil {
					t.Fatalf("step %d: run %+v: route %s not built from its object", step, run, rt.id())
				}
			}
		}
		for _, r := range routes {
			req := &router.Request{Method: router.ParseMethod([]byte("GET")), Path: []byte("/" + r.ID.String()), Host: []byte("h")}
			if a, b := describeMatch(inc, req), describeMatch(full, req); a != b {
				t.Fatalf("step %d: /%s\ntaken over: %s\nfresh:      %s", step, r.ID, a, b)
			}
		}
		cur = inc
	}
}

// servedLists are a snapshot's chunked lists, flat: what a build from
// it must leave as they are, a request in flight holding it.
type servedLists struct {
	routes, slots []*route
	place         []routePlace
	specRoutes    []*spec.Route
}

func listsOf(s *Snapshot) servedLists {
	return servedLists{s.routes.flat(), s.slots.flat(), s.place.flat(), s.specRoutes.flat()}
}

func (a servedLists) same(b servedLists) bool {
	return slices.Equal(a.routes, b.routes) && slices.Equal(a.slots, b.slots) &&
		slices.Equal(a.place, b.place) && slices.Equal(a.specRoutes, b.specRoutes)
}
