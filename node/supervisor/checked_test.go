package supervisor

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"net"
	"reflect"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/worker/shm"
)

// specGen makes random sequences of configurations as the configuration
// store makes them: objects shared from one Spec to the next unless
// changed, a list shared whole when none of its objects changed, never a
// list modified in place. Objects are replaced (with or without checks,
// other checks, other nodes), added at the end or in the middle, removed,
// reordered; a list is sometimes copied unchanged (the same objects in a
// new list).
type specGen struct {
	r     *rand.Rand
	hosts []string // nodes' addresses: one free port on several loopback addresses
	n     int      // ids made so far
	sp    *spec.Spec
	// unrun: checks that are not run (checksVariants' last two) are
	// made, one time in 20 checked upstreams.
	unrun bool
}

// checksVariants are the checks an upstream may have: none, null, two
// that run (whose probes wait an hour, so that none is sent during the
// test), one that does not parse, and a passive one only (not run).
var checksVariants = []string{
	"",
	"null",
	`{"active":{"healthy":{"interval":3600},"unhealthy":{"interval":3600}}}`,
	`{"active":{"concurrency":3,"healthy":{"interval":3600},"unhealthy":{"interval":3600}}}`,
	`{"active":{"timeout":"x"}}`,
	`{"passive":{"healthy":{"successes":1}}}`,
}

func newSpecGen(t testing.TB, seed uint64) *specGen {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	_, port, _ := net.SplitHostPort(l.Addr().String())
	l.Close()
	g := &specGen{r: rand.New(rand.NewPCG(seed, 1)), sp: &spec.Spec{}}
	for i := range 6 {
		g.hosts = append(g.hosts, net.JoinHostPort(fmt.Sprint("127.0.0.", i+1), port))
	}
	return g
}

func (g *specGen) id() spec.ID {
	g.n++
	return spec.StringID(fmt.Sprint("o", g.n))
}

// upstream makes an upstream with checks one time in checked (and none
// otherwise), of one to three nodes.
func (g *specGen) upstream(checked int) *spec.Upstream {
	u := &spec.Upstream{ID: g.id()}
	for range 1 + g.r.IntN(3) {
		host, port, _ := net.SplitHostPort(g.hosts[g.r.IntN(len(g.hosts))])
		var pn int
		fmt.Sscan(port, &pn)
		u.Nodes.List = append(u.Nodes.List, spec.Node{Host: host, Port: pn, Weight: 1})
	}
	if g.r.IntN(checked) == 0 {
		v := g.r.IntN(len(checksVariants) - 2)
		if g.unrun && g.r.IntN(20) == 0 {
			v = len(checksVariants) - 1 - g.r.IntN(2)
		}
		if c := checksVariants[v]; c != "" {
			u.Extra = &spec.UpstreamExtra{Checks: json.RawMessage(c)}
		}
	} else if g.r.IntN(4) == 0 {
		u.Extra = &spec.UpstreamExtra{Name: "unchecked"}
	}
	return u
}

func (g *specGen) route() *spec.Route {
	r := &spec.Route{ID: g.id()}
	if g.r.IntN(3) == 0 {
		r.Upstream = g.upstream(8)
	}
	return r
}

func (g *specGen) service() *spec.Service {
	s := &spec.Service{ID: g.id()}
	if g.r.IntN(2) == 0 {
		s.Upstream = g.upstream(3)
	}
	return s
}

// change returns a copy of list changed by one to three edits (or
// copied unchanged), never list itself modified. An object replaced in
// place keeps its id (a PUT of one that exists), made by renew.
func change[T any](g *specGen, list []*T, make func() *T, renew func(*T) *T) []*T {
	out := slices.Clone(list)
	for range 1 + g.r.IntN(3) {
		switch op := g.r.IntN(7); {
		case op == 0 && len(out) > 0: // replaced in place
			i := g.r.IntN(len(out))
			out[i] = renew(out[i])
		case op == 1: // added at the end
			out = append(out, make())
		case op == 2: // added in the middle
			out = slices.Insert(out, g.r.IntN(len(out)+1), make())
		case op == 3 && len(out) > 0: // removed
			i := g.r.IntN(len(out))
			out = slices.Delete(out, i, i+1)
		case op == 4 && len(out) > 1: // two swapped
			i, j := g.r.IntN(len(out)), g.r.IntN(len(out))
			out[i], out[j] = out[j], out[i]
		case op == 5 && len(out) > 0: // a run moved to the end
			i := g.r.IntN(len(out))
			j := i + g.r.IntN(len(out)-i+1)
			run := slices.Clone(out[i:j])
			out = append(slices.Delete(out, i, j), run...)
		}
	}
	return out
}

// next makes the next configuration: each list shared as it is, copied,
// or changed.
func (g *specGen) next() *spec.Spec {
	sp := *g.sp
	sp.Hash = [32]byte{}
	pick := func() int { return g.r.IntN(4) } // 0, 1: shared; 2: copied; 3: changed
	switch pick() {
	case 2:
		sp.Upstreams = slices.Clone(sp.Upstreams)
	case 3:
		sp.Upstreams = change(g, sp.Upstreams, func() *spec.Upstream { return g.upstream(6) },
			func(old *spec.Upstream) *spec.Upstream { u := g.upstream(1); u.ID = old.ID; return u })
	}
	switch pick() {
	case 2:
		sp.Routes = slices.Clone(sp.Routes)
	case 3:
		sp.Routes = change(g, sp.Routes, g.route, func(old *spec.Route) *spec.Route {
			r := g.route()
			if r.Upstream != nil {
				r.Upstream = g.upstream(1)
			}
			r.ID = old.ID
			return r
		})
	}
	switch pick() {
	case 2:
		sp.Services = slices.Clone(sp.Services)
	case 3:
		sp.Services = change(g, sp.Services, g.service,
			func(old *spec.Service) *spec.Service { sv := g.service(); sv.ID = old.ID; return sv })
	}
	if g.r.IntN(40) == 0 { // now and then, a list emptied
		switch g.r.IntN(3) {
		case 0:
			sp.Routes = nil
		case 1:
			sp.Upstreams = []*spec.Upstream{}
		case 2:
			sp.Services = nil
		}
	}
	g.sp = &sp
	return g.sp
}

// seed fills the first configuration: n routes (several blocks of
// ptrlist.SamePrefix's), n/4 upstreams, n/20 services.
func (g *specGen) seed(n int) {
	sp := &spec.Spec{}
	for range n {
		sp.Routes = append(sp.Routes, g.route())
	}
	for range n / 4 {
		sp.Upstreams = append(sp.Upstreams, g.upstream(6))
	}
	for range n / 20 {
		sp.Services = append(sp.Services, g.service())
	}
	g.sp = sp
}

// TestCheckedScan checks that checkedScan lists, after any sequence of
// configurations, the checked upstreams the full walk lists
// (spec.Spec.CheckedUpstreams), the same objects under the same names in
// the same order, and reports a change exactly when that list differs
// from the one before.
func TestCheckedScan(t *testing.T) {
	for seed := range uint64(4) {
		g := newSpecGen(t, seed)
		g.unrun = seed%2 == 0
		g.seed(1500)
		var c checkedScan
		var prev []spec.CheckedUpstream
		for step := range 400 {
			sp := g.sp
			if step > 0 {
				sp = g.next()
			}
			want := sp.CheckedUpstreams()
			got, changed := c.scan(sp)
			if !slices.Equal(got, want) {
				t.Fatalf("seed %d, step %d: scan listed %d checked upstreams, the full walk %d:\n%v\n%v", seed, step, len(got), len(want), got, want)
			}
			if wantChanged := !slices.Equal(prev, want); changed != wantChanged {
				t.Fatalf("seed %d, step %d: changed %v, want %v", seed, step, changed, wantChanged)
			}
			prev = want
		}
	}
	// The lists found equal as memory: a block of 256 routes shared at
	// both ends of one replaced.
	g := newSpecGen(t, 9)
	g.seed(2000)
	for i := range g.sp.Routes {
		g.sp.Routes[i].Upstream = nil
	}
	var c checkedScan
	c.scan(g.sp)
	next := *g.sp
	next.Routes = slices.Clone(next.Routes)
	u := g.upstream(1)
	u.Extra = &spec.UpstreamExtra{Checks: json.RawMessage(checksVariants[2])}
	next.Routes[1000] = &spec.Route{ID: spec.StringID("new"), Upstream: u}
	got, changed := c.scan(&next)
	if !changed || !slices.Equal(got, next.CheckedUpstreams()) || c.routes.found[len(c.routes.found)-1].i != 1000 {
		t.Fatalf("a route with checks put in the middle: changed %v, %v, want %v", changed, got, next.CheckedUpstreams())
	}
	// Routes added in the last list's array, past its length, as the
	// store's sync grows it (spec.Spec): the one with checks among them
	// is found, at its place.
	room := slices.Grow(slices.Clone(next.Routes), 8)
	base := next
	base.Routes = slices.Clip(room)
	c.scan(&base)
	grown := base
	grown.Routes = slices.Clip(append(room, &spec.Route{ID: spec.StringID("a1")}, &spec.Route{ID: spec.StringID("a2"), Upstream: u}))
	if &grown.Routes[0] != &base.Routes[0] {
		t.Fatal("the routes added not in the last list's array")
	}
	got, changed = c.scan(&grown)
	if !changed || !slices.Equal(got, grown.CheckedUpstreams()) || c.routes.found[len(c.routes.found)-1].i != len(room)+1 {
		t.Fatalf("a route with checks added in the last list's array: changed %v, %v, want %v", changed, got, grown.CheckedUpstreams())
	}
}

// healthState is what an update leaves that the node's behaviour depends
// on: the probers running (by key: their checks, and whether the last
// update started them), the upstreams listed, their probe slots' checks,
// the slots retired, and which nodes hold a slot of the region.
type healthState struct {
	probes  map[string]string
	started []string
	order   []string
	slots   map[string]string
	retired []string
	claimed []string
}

func stateOf(h *healthChecks, before map[string]*prober, keys []string) healthState {
	st := healthState{probes: map[string]string{}, slots: map[string]string{}}
	for k, p := range h.probes {
		st.probes[k] = p.raw
		if before[k] != p {
			st.started = append(st.started, k)
		}
	}
	slices.Sort(st.started)
	st.order = h.order
	for name, s := range h.slots {
		st.slots[name] = s.raw
	}
	for k := range h.retired {
		st.retired = append(st.retired, k)
	}
	slices.Sort(st.retired)
	for _, k := range keys {
		if h.seg.Lookup(k) != nil {
			st.claimed = append(st.claimed, k)
		}
	}
	return st
}

// TestHealthUpdateFullScan checks that update, which looks only at what
// changed, leaves after every configuration of random sequences the
// state that the full scan leaves (apply given every checked upstream of
// the configuration, as update did before it kept the last scan): the
// same probers running with the same checks, the same ones started (and
// so stopped), the same upstreams in the same order, the same probe
// slots, the same region slots retired and claimed; every prober's checks
// are those its raw checks parse to (apply parses an upstream's checks
// only when they changed). With a region of 32 slots, some
// configurations do not fit: update must then start what did not fit as
// the full scan does, once slots are freed; so with checks that are not
// run (logged on every update).
func TestHealthUpdateFullScan(t *testing.T) {
	for _, slots := range []int{0, 32} {
		for seed := range uint64(3) {
			g := newSpecGen(t, 100+seed)
			g.unrun = seed == 2
			g.seed(600)
			h, full := testChecks(t, slots), testChecks(t, slots)
			var keys []string // every node key named so far
			seen := map[string]bool{}
			fastPaths := 0 // configurations update had nothing to look at
			var prev []spec.CheckedUpstream
			for step := range 250 {
				sp := g.sp
				if step > 0 {
					sp = g.next()
				}
				for _, cu := range sp.CheckedUpstreams() {
					for _, n := range cu.Upstream.Nodes.List {
						if k := shm.HealthKey(cu.Name, n.Addr("http")); !seen[k] {
							seen[k] = true
							keys = append(keys, k)
						}
					}
				}
				hBefore, fullBefore := maps.Clone(h.probes), maps.Clone(full.probes)
				if h.settled && slices.Equal(sp.CheckedUpstreams(), prev) {
					fastPaths++
				}
				prev = sp.CheckedUpstreams()
				h.update(sp)
				full.mu.Lock()
				full.apply(sp.CheckedUpstreams())
				full.mu.Unlock()
				for k, p := range h.probes {
					if c, err := spec.ParseChecks(json.RawMessage(p.raw)); err != nil || !reflect.DeepEqual(p.checks, c) || p.slots.checks != p.checks {
						t.Fatalf("region %d, seed %d, step %d: %s probed with checks %+v, not those of %s", slots, seed, step, k, p.checks, p.raw)
					}
				}
				got, want := stateOf(h, hBefore, keys), stateOf(full, fullBefore, keys)
				if fmt.Sprint(got) != fmt.Sprint(want) {
					t.Fatalf("region %d, seed %d, step %d: update left\n%+v\nthe full scan\n%+v", slots, seed, step, got, want)
				}
			}
			if slots == 0 && !g.unrun && fastPaths == 0 {
				t.Errorf("region %d, seed %d: no configuration kept the checked upstreams of a settled one", slots, seed)
			}
		}
	}
}

// BenchmarkHealthUpdate measures update per push at 50 000 routes (by
// upstream_id: no upstream of their own) and 20 000 upstreams, two of
// them checked, one route replaced a push: scan, update as it runs;
// full-scan, the walk of every object it did before (apply given
// spec.Spec.CheckedUpstreams); scan-delete, update as it runs when a
// push removes the route (a DELETE) and the next puts it back.
func BenchmarkHealthUpdate(b *testing.B) {
	seg, err := shm.CreateHealth(0)
	if err != nil {
		b.Fatal(err)
	}
	sp := &spec.Spec{}
	for i := range 20000 {
		u := &spec.Upstream{ID: spec.StringID(fmt.Sprint("u", i)), Nodes: spec.Nodes{List: []spec.Node{{Host: "127.0.0.1", Port: 2000 + i%1000, Weight: 1}}}}
		if i%10000 == 0 {
			u.Extra = &spec.UpstreamExtra{Checks: json.RawMessage(checksVariants[2])}
		}
		sp.Upstreams = append(sp.Upstreams, u)
	}
	for i := range 50000 {
		sp.Routes = append(sp.Routes, &spec.Route{ID: spec.StringID(fmt.Sprint(i))})
	}
	next := *sp
	next.Routes = slices.Clone(sp.Routes)
	next.Routes[31000] = &spec.Route{ID: spec.StringID("31000")}
	removed := *sp
	removed.Routes = slices.Delete(slices.Clone(sp.Routes), 31000, 31001)
	for _, mode := range []string{"scan", "full-scan", "scan-delete"} {
		specs := [2]*spec.Spec{sp, &next}
		if mode == "scan-delete" {
			specs[1] = &removed
		}
		b.Run(mode, func(b *testing.B) {
			h := newHealthChecks(seg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			defer h.stop()
			h.update(sp)
			b.ReportAllocs()
			i := 0
			for ; b.Loop(); i++ {
				s := specs[(i+1)%2]
				if mode != "full-scan" {
					h.update(s)
				} else {
					h.mu.Lock()
					h.apply(s.CheckedUpstreams())
					h.mu.Unlock()
				}
			}
			if len(h.probes) != 2 {
				b.Fatalf("%d probers, want 2", len(h.probes))
			}
		})
	}
}

// BenchmarkHealthUpdateChecked measures update per push at 50 000 routes
// and 20 000 upstreams, 2 000 of them checked, when a push changes one
// checked upstream's checks (two configurations, pushed in turn): update
// then looks at every checked upstream, and restarts the changed one's
// prober.
func BenchmarkHealthUpdateChecked(b *testing.B) {
	seg, err := shm.CreateHealth(0)
	if err != nil {
		b.Fatal(err)
	}
	sp := &spec.Spec{}
	for i := range 20000 {
		u := &spec.Upstream{ID: spec.StringID(fmt.Sprint("u", i)), Nodes: spec.Nodes{List: []spec.Node{{Host: "127.0.0.1", Port: 2000 + i, Weight: 1}}}}
		if i%10 == 0 {
			u.Extra = &spec.UpstreamExtra{Checks: json.RawMessage(checksVariants[2])}
		}
		sp.Upstreams = append(sp.Upstreams, u)
	}
	for i := range 50000 {
		sp.Routes = append(sp.Routes, &spec.Route{ID: spec.StringID(fmt.Sprint(i))})
	}
	next := *sp
	next.Upstreams = slices.Clone(sp.Upstreams)
	u := *next.Upstreams[10000]
	u.Extra = &spec.UpstreamExtra{Checks: json.RawMessage(checksVariants[3])}
	next.Upstreams[10000] = &u
	specs := [2]*spec.Spec{sp, &next}
	h := newHealthChecks(seg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	defer h.stop()
	h.update(sp)
	b.ReportAllocs()
	i := 0
	for ; b.Loop(); i++ {
		h.update(specs[(i+1)%2])
	}
	if len(h.probes) != 2000 || !h.settled {
		b.Fatalf("%d probers (settled %v), want 2000", len(h.probes), h.settled)
	}
}
