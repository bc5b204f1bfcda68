package worker

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
)

// TestCompileBookkeepingAsBuilt: random sequences of route puts and
// deletes and upstream and service objects replaced, each Spec built from the snapshot
// before (routes and upstream bookkeeping taken over) and from nothing; the
// two have the same upstreams, each held by as many routes, and the same
// node counts (hasNode). Routes take an upstream by upstream_id, an inline
// one, none, traffic-split's by upstream_id and inline, and one whose split
// names a missing upstream (refused, after an existing one was taken).
func TestCompileBookkeepingAsBuilt(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { bookkeepingRun(t, seed) })
	}
}

func bookkeepingRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	ps := pluginSet{reg: plugins.Default, env: plugins.NewLocalEnv()}
	node := func() string { return fmt.Sprintf("127.0.0.1:%d", 3000+rng.IntN(8)) }
	ups := make([]*spec.Upstream, 6)
	newUp := func(i int) {
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"u%d","nodes":{"%s":1,"%s":2}}`, i, node(), node()))
		if err != nil {
			t.Fatal(err)
		}
		ups[i] = u
	}
	for i := range ups {
		newUp(i)
	}
	svcs := make([]*spec.Service, 2)
	newSvc := func(i int) {
		sv, err := spec.DecodeService(fmt.Appendf(nil, `{"id":"s%d","upstream_id":"u%d"}`, i, rng.IntN(len(ups))))
		if err != nil {
			t.Fatal(err)
		}
		svcs[i] = sv
	}
	for i := range svcs {
		newSvc(i)
	}
	var routes []*spec.Route
	version := 0
	newRoute := func(id int) *spec.Route {
		version++
		u, v := rng.IntN(len(ups)), rng.IntN(len(ups))
		var js string
		switch rng.IntN(7) {
		case 6:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d/%d","service_id":"s%d"}`, id, id, version, rng.IntN(len(svcs)))
		case 0:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d/%d","plugins":{"proxy-rewrite":{"uri":"/x"}}}`, id, id, version)
		case 1, 2:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d/%d","upstream_id":"u%d"}`, id, id, version, u)
		case 3:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d/%d","upstream":{"nodes":{"%s":1}}}`, id, id, version, node())
		case 4:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d/%d","upstream_id":"u%d","plugins":{"traffic-split":{"rules":[{"weighted_upstreams":[`+
				`{"weight":1},{"upstream_id":"u%d","weight":1},{"upstream":{"nodes":{"%s":1}},"weight":1}]}]}}}`, id, id, version, u, v, node())
		default:
			js = fmt.Sprintf(`{"id":"r%d","uri":"/r%d/%d","upstream_id":"u%d","plugins":{"traffic-split":{"rules":[{"weighted_upstreams":[`+
				`{"upstream_id":"u%d","weight":1},{"upstream_id":"nope","weight":1}]}]}}}`, id, id, version, u, v)
		}
		r, err := spec.DecodeRoute([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var cur *Snapshot
	nextID := 0
	for step := range 250 {
		for range 1 + rng.IntN(4) {
			switch op := rng.IntN(10); {
			case op < 4 || len(routes) < 3:
				routes = append(routes, newRoute(nextID))
				nextID++
			case op < 7:
				i := rng.IntN(len(routes))
				id := 0
				fmt.Sscanf(routes[i].ID.String(), "r%d", &id)
				routes[i] = newRoute(id)
			case op < 9:
				i := rng.IntN(len(routes))
				routes = append(routes[:i:i], routes[i+1:]...)
			case rng.IntN(2) == 0:
				newUp(rng.IntN(len(ups)))
			default:
				newSvc(rng.IntN(len(svcs)))
			}
		}
		s := &spec.Spec{Routes: routes, Upstreams: append([]*spec.Upstream(nil), ups...), Services: append([]*spec.Service(nil), svcs...)}
		inc, err := compile(s, router.HostURI, upstreamEnv{}, ps, cur, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		full, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if inc.routes.len() != full.routes.len() {
			t.Fatalf("step %d: %d routes built from the snapshot before, %d from nothing", step, inc.routes.len(), full.routes.len())
		}
		for k, rt := range inc.routes.flat() {
			if rt.from != full.routes.at(k).from {
				t.Fatalf("step %d: route %s built from other objects than from nothing", step, rt.id())
			}
		}
		incRefs, fullRefs := map[*spec.Upstream]int32{}, map[*spec.Upstream]int32{}
		for u, r := range inc.upstreams.all {
			incRefs[u] = r.refs
		}
		for u, r := range full.upstreams.all {
			fullRefs[u] = r.refs
		}
		if !maps.Equal(incRefs, fullRefs) {
			t.Fatalf("step %d: upstreams and their routes %v built from the snapshot before, %v from nothing", step, incRefs, fullRefs)
		}
		incNodes, fullNodes := maps.Collect(inc.nodes.all), maps.Collect(full.nodes.all)
		if !maps.Equal(incNodes, fullNodes) {
			t.Fatalf("step %d: nodes %v built from the snapshot before, %v from nothing", step, incNodes, fullNodes)
		}
		for k := range fullNodes {
			if !inc.hasNode(k) {
				t.Fatalf("step %d: no node %s", step, k)
			}
		}
		// Each route's upstream is the one its object's entry holds.
		for _, rt := range inc.routes.flat() {
			if rt.up == nil {
				continue
			}
			if r, _ := inc.upstreams.get(rt.from.up); r.cu != rt.up {
				t.Fatalf("step %d: route %s sends to an upstream the snapshot does not hold", step, rt.id())
			}
		}
		// The Shareable plugins' instances (proxy-rewrite's): one for
		// each configuration, counting the routes holding it, as built
		// from nothing; each route's the one its entry holds.
		incShared, fullShared := map[string]int32{}, map[string]int32{}
		for inst, r := range inc.instanceRefs.all {
			if i, _ := inc.instances.get(r.key); i != inst {
				t.Fatalf("step %d: instance of %q not the one its key holds", step, r.key)
			}
			incShared[r.key] = r.refs
		}
		for _, r := range full.instanceRefs.all {
			fullShared[r.key] = r.refs
		}
		if !maps.Equal(incShared, fullShared) || inc.instances.len() != len(incShared) {
			t.Fatalf("step %d: shared instances and their routes %v (%d keys) built from the snapshot before, %v from nothing",
				step, incShared, inc.instances.len(), fullShared)
		}
		for _, rt := range inc.routes.flat() {
			for _, c := range rt.plugins.Plugins {
				if _, ok := inc.instanceRefs.get(c.Instance); c.Name == "proxy-rewrite" && !ok {
					t.Fatalf("step %d: route %s runs a proxy-rewrite the snapshot does not hold", step, rt.id())
				}
			}
		}
		cur = inc
	}
}
