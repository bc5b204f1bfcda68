package worker

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
)

// TestCompileTakeOverDifferential changes a configuration at random, one
// step after another (routes added, replaced, removed, disabled, moved;
// services and upstreams replaced; consumers and global rules changed now
// and then), builds each step both from the served snapshot and from
// nothing, and checks that the two route every probe request to routes
// alike: the same route, with the same hosts, patterns, service, nodes,
// timeouts, plugins and consumer variants.
func TestCompileTakeOverDifferential(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	const paths, hosts = 6, 3
	ps := pluginSet{env: plugins.NewLocalEnv()}
	mustRoute := func(js string) *spec.Route {
		r, err := spec.DecodeRoute([]byte(js))
		if err != nil {
			t.Fatalf("%s: %v", js, err)
		}
		return r
	}
	newUpstream := func(id string) *spec.Upstream {
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":%q,"nodes":{"127.0.0.1:%d":1}}`, id, 2000+rng.IntN(50)))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	newService := func(id string) *spec.Service {
		sv, err := spec.DecodeService(fmt.Appendf(nil, `{"id":%q,"hosts":["h%d.com"],"plugins":{"proxy-rewrite":{"uri":"/s%d"}}}`,
			id, rng.IntN(hosts), rng.IntN(9)))
		if err != nil {
			t.Fatal(err)
		}
		return sv
	}
	serial := 0
	newRoute := func() *spec.Route {
		serial++
		m := map[string]any{"id": fmt.Sprint("r", rng.IntN(40)), "uri": fmt.Sprintf("/p%d", rng.IntN(paths)),
			"priority": rng.IntN(3), "name": fmt.Sprint("n", serial)}
		if rng.IntN(3) == 0 {
			m["uri"] = fmt.Sprintf("/p%d*", rng.IntN(paths))
		}
		if rng.IntN(3) == 0 {
			m["methods"] = []string{[]string{"GET", "POST"}[rng.IntN(2)]}
		}
		if rng.IntN(4) == 0 {
			m["vars"] = [][]string{{"arg_x", "==", fmt.Sprint(rng.IntN(2))}}
		}
		if rng.IntN(5) == 0 {
			m["status"] = 0
		}
		switch rng.IntN(4) {
		case 0:
			m["service_id"] = fmt.Sprint("s", rng.IntN(3))
		case 1:
			m["upstream_id"] = fmt.Sprint("u", rng.IntN(3))
		default:
			m["upstream"] = map[string]any{"nodes": map[string]int{fmt.Sprintf("127.0.0.1:%d", 1000+rng.IntN(50)): 1}}
			if rng.IntN(2) == 0 {
				m["hosts"] = []string{fmt.Sprintf("h%d.com", rng.IntN(hosts))}
			}
		}
		if rng.IntN(3) == 0 {
			m["plugins"] = map[string]any{"key-auth": map[string]any{}}
		}
		if rng.IntN(4) == 0 {
			m["timeout"] = map[string]int{"connect": 1 + rng.IntN(3), "send": 2, "read": 3}
		}
		b, _ := json.Marshal(m)
		return mustRoute(string(b))
	}
	s := &spec.Spec{}
	for i := range 3 {
		s.Services = append(s.Services, newService(fmt.Sprint("s", i)))
		s.Upstreams = append(s.Upstreams, newUpstream(fmt.Sprint("u", i)))
	}
	for range 30 {
		s.Routes = append(s.Routes, newRoute())
	}
	s.Routes = dedupRoutes(s.Routes)
	s.Consumers = []*spec.Consumer{mustDecode(t, spec.DecodeConsumer, `{"username":"jack","plugins":{"key-auth":{"key":"k1"},"proxy-rewrite":{"uri":"/jack"}}}`)}

	var prev *Snapshot
	taken := 0
	for step := range 300 {
		next := &spec.Spec{
			Routes:      slices.Clone(s.Routes),
			Services:    slices.Clone(s.Services),
			Upstreams:   slices.Clone(s.Upstreams),
			Consumers:   slices.Clone(s.Consumers),
			GlobalRules: slices.Clone(s.GlobalRules),
		}
		for range 1 + rng.IntN(3) {
			switch op := rng.IntN(20); {
			case op < 6 && len(next.Routes) > 0:
				next.Routes[rng.IntN(len(next.Routes))] = newRoute()
			case op < 9:
				next.Routes = append(next.Routes, newRoute())
			case op < 11 && len(next.Routes) > 1:
				i := rng.IntN(len(next.Routes))
				next.Routes = slices.Delete(next.Routes, i, i+1)
			case op < 12 && len(next.Routes) > 1:
				i, j := rng.IntN(len(next.Routes)), rng.IntN(len(next.Routes))
				next.Routes[i], next.Routes[j] = next.Routes[j], next.Routes[i]
			case op < 14:
				i := rng.IntN(3)
				next.Services[i] = newService(fmt.Sprint("s", i))
			case op < 16:
				i := rng.IntN(3)
				next.Upstreams[i] = newUpstream(fmt.Sprint("u", i))
			case op < 17:
				serial++
				next.Consumers = append(next.Consumers, mustDecode(t, spec.DecodeConsumer, fmt.Sprintf(`{"username":"c%d","plugins":{"key-auth":{"key":"key%d"}}}`, serial, serial)))
			case op < 18:
				next.GlobalRules = []*spec.GlobalRule{mustDecode(t, spec.DecodeGlobalRule, fmt.Sprintf(`{"id":"g","plugins":{"proxy-rewrite":{"uri":"/g%d"}}}`, step))}
			}
		}
		next.Routes = dedupRoutes(next.Routes)
		inc, err := compile(next, router.HostURI, upstreamEnv{}, ps, prev, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		fresh, err := compile(next, router.HostURI, upstreamEnv{}, ps, nil, nil)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if prev != nil {
			for _, r := range inc.routes.flat() {
				if slices.Contains(prev.routes.flat(), r) {
					taken++
				}
			}
		}
		for p := range paths {
			for h := range hosts + 1 {
				for _, method := range []string{"GET", "POST"} {
					for x := range 2 {
						req := &router.Request{Method: router.ParseMethod([]byte(method)), Path: fmt.Appendf(nil, "/p%d", p),
							Host: fmt.Appendf(nil, "h%d.com", h), Vars: varMap{"arg_x": fmt.Sprint(x)}}
						a, b := describeMatch(inc, req), describeMatch(fresh, req)
						if a != b {
							t.Fatalf("step %d: %s h%d.com/p%d?x=%d\ntaken over: %s\nfresh:      %s", step, method, h, p, x, a, b)
						}
					}
				}
			}
		}
		s, prev = next, inc
	}
	t.Logf("%d routes taken over in 300 steps", taken)
	if taken == 0 {
		t.Error("no route was ever taken over")
	}
}

// dedupRoutes keeps the last route of each id, in order.
func dedupRoutes(rs []*spec.Route) []*spec.Route {
	seen := map[string]bool{}
	var out []*spec.Route
	for i := len(rs) - 1; i >= 0; i-- {
		if id := rs[i].ID.String(); !seen[id] {
			seen[id] = true
			out = append(out, rs[i])
		}
	}
	slices.Reverse(out)
	return out
}

// describeMatch is what a request routed by s meets: the route and what
// the request path reads of it.
func describeMatch(s *Snapshot, req *router.Request) string {
	i, ok := s.router.Match(req)
	if !ok {
		return "no route"
	}
	r := s.slots.at(i)
	var b strings.Builder
	fmt.Fprintf(&b, "route %s name %s uris %q hosts %q service %s/%s timeouts %v/%v/%v", r.id(), r.about.name, r.in.URIs, r.about.hosts,
		r.about.serviceID, r.about.serviceName, r.to.connect, r.to.send, r.to.read)
	if r.up != nil {
		for _, n := range r.up.nodes {
			fmt.Fprintf(&b, " node %s", n.addr)
		}
	}
	for _, c := range r.plugins.Plugins {
		fmt.Fprintf(&b, " plugin %s", c.Name)
	}
	var cons []string
	for c, v := range r.about.byConsumer {
		names := c.Username + ":"
		for _, p := range v.phases.Plugins {
			names += " " + p.Name
		}
		cons = append(cons, names)
	}
	sort.Strings(cons)
	fmt.Fprintf(&b, " consumers %q", cons)
	if s.global != nil {
		for _, c := range s.global.Plugins {
			fmt.Fprintf(&b, " global %s", c.Name)
		}
	}
	return b.String()
}

// TestCompileOrderGaps creates routes on one path, each before all the
// others (as a store serves a route given an earlier create_time): each
// build from the served snapshot gives the new route an Order below the
// first one's, halving the room left there, until there is none and the
// build starts from scratch. After each, the route first in the Spec's
// order is the one that matches, as in a build from nothing.
func TestCompileOrderGaps(t *testing.T) {
	ps := pluginSet{env: plugins.NewLocalEnv()}
	route := func(id string) *spec.Route {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":%q,"uri":"/same","upstream":{"nodes":{"127.0.0.1:1980":1}}}`, id))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	routes := []*spec.Route{route("base")}
	prev, err := compile(&spec.Spec{Routes: routes}, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	req := &router.Request{Method: router.MethodGET, Path: []byte("/same"), Host: []byte("x")}
	updated, rebuilt := 0, 0
	for i := range 40 {
		id := fmt.Sprint("front", i)
		routes = append([]*spec.Route{route(id)}, routes...)
		s := &spec.Spec{Routes: routes}
		next, err := compile(s, router.HostURI, upstreamEnv{}, ps, prev, nil)
		if err != nil {
			t.Fatal(err)
		}
		fresh, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		for name, snap := range map[string]*Snapshot{"from the served one": next, "from nothing": fresh} {
			if j, ok := snap.router.Match(req); !ok || snap.slots.at(j).id() != id {
				t.Fatalf("step %d, built %s: /same routes to %v, want %s", i, name, ok && snap.slots.at(j) != nil, id)
			}
		}
		if &next.slots.chunks[0] == &next.routes.chunks[0] { // the from-scratch build's slots are its routes
			rebuilt++
		} else {
			updated++
		}
		prev = next
	}
	if updated == 0 || rebuilt == 0 {
		t.Errorf("%d builds updated the router, %d built it anew; want both", updated, rebuilt)
	}
}
