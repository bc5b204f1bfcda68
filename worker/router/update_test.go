package router

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/httpvar"
)

// updateGen makes the random routes and requests of the Update tests:
// paths with parameters, prefixes and tails, exact and wildcard hosts
// with and without ports, methods, priorities, vars and remote_addrs,
// drawn from small sets so that routes share paths and hosts, and from a
// numbered one so that tables grow past a shard.
type updateGen struct {
	rng   *rand.Rand
	exprs []Expr
}

var (
	updSegs  = []string{"a", "b", "ab", ":id", "a.b", "x+"}
	updTails = []string{"", "", "*", "/*", "*x", "/*/a", "/*/:id", "/"}
	updHosts = []string{"foo.com", "*.foo.com", "*foo.com", "*", "a.foo.com", "foo.com:81", "*.com",
		"*:81", "*foo.com:81", "B.com"}
	updReqHosts = []string{"foo.com", "a.foo.com", "x.a.foo.com", "barfoo.com", "foo.com:81", "FOO.com:82",
		"b.com", "com", "", "[::1]:81", "a.foo.com.", "a.foo.com:81", "h7.example.com", "x.w3.example.com"}
	updMethods = []Method{0, MethodGET, MethodPOST, MethodGET | MethodPUT}
	updAddrs   = []netip.Addr{{}, netip.MustParseAddr("10.0.0.1"), netip.MustParseAddr("::ffff:10.0.0.2"), netip.MustParseAddr("::1")}
	updNets    = [][]netip.Prefix{nil, nil, {netip.MustParsePrefix("10.0.0.0/31")}, {netip.MustParsePrefix("::1/128")}}
)

func newUpdateGen(t testing.TB, seed uint64) *updateGen {
	return &updateGen{
		rng:   rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15)),
		exprs: []Expr{{}, {}, vars(t, `[["arg_k","==","1"]]`), vars(t, `[["arg_k","!","==","1"]]`)},
	}
}

func (g *updateGen) path() string {
	var sb strings.Builder
	if g.rng.IntN(3) == 0 {
		fmt.Fprintf(&sb, "/n%d", g.rng.IntN(300))
	}
	for n := g.rng.IntN(4); n > 0; n-- {
		sb.WriteString("/" + updSegs[g.rng.IntN(len(updSegs))])
	}
	return sb.String()
}

// route returns a random route of Index index and Order order.
func (g *updateGen) route(index int, order uint64) Route {
	rng := g.rng
	r := Route{Index: index, Order: order, Priority: rng.IntN(3) - 1, Methods: updMethods[rng.IntN(len(updMethods))],
		RemoteAddrs: updNets[rng.IntN(len(updNets))], Vars: g.exprs[rng.IntN(len(g.exprs))]}
	for range 1 + rng.IntN(2) {
		r.URIs = append(r.URIs, g.path()+updTails[rng.IntN(len(updTails))])
	}
	for range rng.IntN(3) {
		if rng.IntN(4) == 0 {
			// Hosts of their own, so that host tables come and go.
			r.Hosts = append(r.Hosts, fmt.Sprintf("h%d.example.com", rng.IntN(10)), fmt.Sprintf("*.w%d.example.com", rng.IntN(5)))
			continue
		}
		r.Hosts = append(r.Hosts, updHosts[rng.IntN(len(updHosts))])
	}
	return r
}

// request returns a random request, half of them on a path of one of
// routes with its '*' filled in.
func (g *updateGen) request(routes []Route) *Request {
	rng := g.rng
	p := g.path()
	switch rng.IntN(4) {
	case 0:
		p += "/" + updSegs[rng.IntN(len(updSegs))] + "/"
	case 1, 2:
		if len(routes) > 0 {
			r := routes[rng.IntN(len(routes))]
			fill := []string{"", "q", "q/r", "a/b"}[rng.IntN(4)]
			p = strings.Replace(r.URIs[rng.IntN(len(r.URIs))], "*", fill, 1)
		}
	}
	req := &Request{
		Method:     updMethods[1+rng.IntN(2)],
		Path:       []byte(p),
		Host:       []byte(updReqHosts[rng.IntN(len(updReqHosts))]),
		RemoteAddr: updAddrs[rng.IntN(len(updAddrs))],
	}
	if rng.IntN(2) == 0 {
		req.Vars = mapVars{{Kind: httpvar.Arg, Name: "k"}: []byte("1")}
	}
	return req
}

// answers matches every request against r.
func answers(r *Router, reqs []*Request) []int {
	out := make([]int, len(reqs))
	for i, req := range reqs {
		j, ok := r.Match(req)
		if !ok {
			j = -1
		}
		out[i] = j
	}
	return out
}

// checkUpdates runs steps random changes (routes put, replaced and
// deleted, one to many at a time, sometimes a bulk of new ones) through
// Update from an empty Router, in both modes. After each step the
// updated Router answers probes requests exactly as a Build of the same
// routes from scratch (given in the order they were added, which breaks
// the ties their Orders leave), and the Router it was updated from still
// answers as it did before the step: Update never writes the Router being
// served. It returns the number of probes that matched a route.
func checkUpdates(t testing.TB, seed uint64, steps, probes int) (matched int) {
	for _, mode := range []Mode{HostURI, URI} {
		g := newUpdateGen(t, seed)
		rng := g.rng
		cur := mustBuild(t, nil, mode)
		var live []Route // in the order they were added
		next := 0
		for step := range steps {
			var remove, add []Route
			removed := map[int]bool{}
			n := 1 + rng.IntN(4)
			if rng.IntN(10) == 0 {
				n = 50 + rng.IntN(200)
			}
			for range n {
				switch op := rng.IntN(10); {
				case op < 3 && len(live) > 0: // delete
					i := rng.IntN(len(live))
					if removed[live[i].Index] {
						continue
					}
					removed[live[i].Index] = true
					remove = append(remove, live[i])
				case op < 5 && len(live) > 0: // replace: the same Index, new content
					i := rng.IntN(len(live))
					if removed[live[i].Index] {
						continue
					}
					removed[live[i].Index] = true
					remove = append(remove, live[i])
					add = append(add, g.route(live[i].Index, uint64(rng.IntN(8))))
				default:
					// Orders from a small set: ties among them are
					// broken by the order the routes were added in.
					add = append(add, g.route(next, uint64(rng.IntN(8))))
					next++
				}
			}
			live = slices.DeleteFunc(live, func(r Route) bool { return removed[r.Index] })
			live = append(live, add...)

			reqs := make([]*Request, probes)
			for i := range reqs {
				reqs[i] = g.request(live)
			}
			before := answers(cur, reqs)
			up, err := cur.Update(remove, add)
			if err != nil {
				t.Fatalf("seed %d mode %d step %d: Update: %v", seed, mode, step, err)
			}
			if got := answers(cur, reqs); !slices.Equal(got, before) {
				t.Fatalf("seed %d mode %d step %d: the Router updated from answers %v after the Update, %v before", seed, mode, step, got, before)
			}
			scratch := mustBuild(t, live, mode)
			got, want := answers(up, reqs), answers(scratch, reqs)
			for i := range got {
				if got[i] != want[i] {
					req := reqs[i]
					t.Fatalf("seed %d mode %d step %d: Match(%s %q host %q addr %v vars %v) = %d updated, %d built\nremoved:%s\nadded:%s\nroutes:%s",
						seed, mode, step, methodName(req.Method), req.Path, req.Host, req.RemoteAddr, req.Vars != nil, got[i], want[i],
						dumpRoutes(remove), dumpRoutes(add), dumpRoutes(live))
				}
				if got[i] >= 0 {
					matched++
				}
			}
			if up.Len() != len(live) {
				t.Fatalf("seed %d mode %d step %d: Len = %d, want %d", seed, mode, step, up.Len(), len(live))
			}
			cur = up
		}
	}
	return matched
}

func TestUpdateAsBuilt(t *testing.T) {
	seeds, steps := 24, 50
	if testing.Short() {
		seeds = 8
	}
	matched, total := 0, 0
	for seed := range uint64(seeds) {
		matched += checkUpdates(t, seed+1, steps, 40)
		total += 2 * steps * 40
	}
	// Guard the generator: a run where almost nothing matches proves little.
	if matched < total/10 || matched > total*9/10 {
		t.Errorf("%d of %d probes matched; want a mix", matched, total)
	}
	t.Logf("%d of %d probes matched", matched, total)
}

// TestUpdateEmpties removes every route: the tables and hosts they made
// go with them, and the Router matches nothing.
func TestUpdateEmpties(t *testing.T) {
	g := newUpdateGen(t, 7)
	var routes []Route
	for i := range 300 {
		routes = append(routes, g.route(i, uint64(i)))
	}
	for _, mode := range []Mode{HostURI, URI} {
		full, err := mustBuild(t, nil, mode).Update(nil, routes)
		if err != nil {
			t.Fatal(err)
		}
		r, err := full.Update(routes, nil)
		if err != nil {
			t.Fatal(err)
		}
		if r.Len() != 0 || !r.noHost.empty() || r.hostExact.n != 0 || r.portExact.n != 0 || len(r.wild) != 0 ||
			r.hasHost || r.hasPort || r.needURI {
			t.Errorf("mode %d: emptied Router keeps %d routes, host tables %d/%d/%d, flags %v %v %v", mode,
				r.Len(), r.hostExact.n, r.portExact.n, len(r.wild), r.hasHost, r.hasPort, r.needURI)
		}
		for range 200 {
			if i, ok := r.Match(g.request(routes)); ok {
				t.Fatalf("mode %d: emptied Router matched route %d", mode, i)
			}
		}
	}
}

func TestUpdateNoURI(t *testing.T) {
	r := mustBuild(t, []Route{{Index: 0, URIs: []string{"/a"}}}, HostURI)
	if _, err := r.Update(nil, []Route{{Index: 1}}); err == nil || !strings.Contains(err.Error(), "no uri") {
		t.Fatalf("Update of a route without a path: %v", err)
	}
	if i, ok := r.Match(&Request{Method: MethodGET, Path: []byte("/a")}); !ok || i != 0 {
		t.Fatalf("Router after a refused Update: Match = %d, %v", i, ok)
	}
}

// FuzzUpdate is TestUpdateAsBuilt's check on the fuzzer's seeds.
func FuzzUpdate(f *testing.F) {
	f.Add(uint64(1), uint8(20))
	f.Add(uint64(99), uint8(5))
	f.Fuzz(func(t *testing.T, seed uint64, steps uint8) {
		checkUpdates(t, seed, int(steps%40), 20)
	})
}

// TestSpread checks that a key's shard is the same from bytes and from a
// string, and that keys numbered as large configurations number them
// spread over the shards: no shard holds more than twice its share.
func TestSpread(t *testing.T) {
	for _, format := range []string{"/bulk/%d", "h%d.example.com", "/api/v1/users/%d/orders", "/r%d/", "/%d"} {
		const n = 50000
		m := makeShardMap[int](n, 0)
		for i := range n {
			k := fmt.Sprintf(format, i)
			if a, b := spreadBytes([]byte(k)), spreadString(k); a != b {
				t.Fatalf("%q: spreadBytes %d, spreadString %d", k, a, b)
			}
			m.set(k, i, 0)
		}
		most := 0
		for i := range m.mask + 1 {
			most = max(most, len(m.shard(i)))
		}
		if share := n / int(m.mask+1); most > 2*share {
			t.Errorf("%s: a shard of %d keys, where each would hold %d", format, most, share)
		}
		for _, i := range []int{0, 1, n / 2, n - 1} {
			if v, ok := m.lookup(fmt.Sprintf(format, i)); !ok || v != i {
				t.Errorf("%s: key %d: %d, %v", format, i, v, ok)
			}
		}
	}
}

func TestIndexRange(t *testing.T) {
	for _, index := range []int{-1, 1 << 31} {
		if _, err := Build([]Route{{Index: index, URIs: []string{"/a"}}}, HostURI); !errors.Is(err, ErrIndex) {
			t.Errorf("Build of Index %d: %v", index, err)
		}
		if _, err := mustBuild(t, nil, URI).Update(nil, []Route{{Index: index, URIs: []string{"/a"}}}); !errors.Is(err, ErrIndex) {
			t.Errorf("Update of Index %d: %v", index, err)
		}
	}
	r := mustBuild(t, []Route{{Index: 1<<31 - 1, URIs: []string{"/a"}}}, HostURI)
	if i, ok := r.Match(&Request{Method: MethodGET, Path: []byte("/a")}); !ok || i != 1<<31-1 {
		t.Errorf("Match = %d, %v", i, ok)
	}
}

// TestUpdateWhileServed matches requests on the served Router in other
// goroutines while Updates make the next ones from it, each swapped in
// as the served one: under -race, any write of Update to a Router being
// read is reported.
func TestUpdateWhileServed(t *testing.T) {
	g := newUpdateGen(t, 3)
	var live []Route
	for i := range 400 {
		live = append(live, g.route(i, uint64(i)))
	}
	reqs := make([]*Request, 64)
	for i := range reqs {
		reqs[i] = g.request(live)
	}
	for _, mode := range []Mode{HostURI, URI} {
		var served atomic.Pointer[Router]
		served.Store(mustBuild(t, live, mode))
		stop := make(chan struct{})
		var wg sync.WaitGroup
		for range 2 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					answers(served.Load(), reqs)
				}
			}()
		}
		next := len(live)
		routes := slices.Clone(live)
		deadline := time.Now().Add(time.Second)
		for step := 0; step < 200 && time.Now().Before(deadline); step++ {
			i := g.rng.IntN(len(routes))
			nr := g.route(next, uint64(next))
			next++
			up, err := served.Load().Update([]Route{routes[i]}, []Route{nr})
			if err != nil {
				t.Fatal(err)
			}
			routes[i] = nr
			served.Store(up)
		}
		close(stop)
		wg.Wait()
		sorted := slices.Clone(routes)
		slices.SortFunc(sorted, func(a, b Route) int { return int(a.Order) - int(b.Order) })
		if got, want := answers(served.Load(), reqs), answers(mustBuild(t, sorted, mode), reqs); !slices.Equal(got, want) {
			t.Fatalf("mode %d: after the Updates %v, built %v", mode, got, want)
		}
	}
}

// TestUpdateGrows adds routes in batches until the host-less table's
// exact paths, its segment tries and the host tables each outgrow one
// map and are spread over shards, then changes them one at a time; after
// each batch and change the Router answers as a Build of the same routes.
func TestUpdateGrows(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	mk := func(i, v int) Route {
		r := Route{Index: i, Order: uint64(i), URIs: []string{fmt.Sprintf("/g%d/v%d", i, v), fmt.Sprintf("/g%d/*", i)}}
		if i%3 == 0 {
			r.Hosts = []string{fmt.Sprintf("h%d.example.com", i/3)}
		}
		return r
	}
	probe := func(live []Route) []*Request {
		var reqs []*Request
		for range 100 {
			i := rng.IntN(len(live) + 10)
			host := fmt.Sprintf("h%d.example.com", i/3)
			for _, p := range []string{fmt.Sprintf("/g%d/v%d", i, rng.IntN(2)), fmt.Sprintf("/g%d/x", i)} {
				reqs = append(reqs, &Request{Method: MethodGET, Path: []byte(p), Host: []byte(host)})
			}
		}
		return reqs
	}
	check := func(r *Router, live []Route, what string) {
		t.Helper()
		reqs := probe(live)
		if got, want := answers(r, reqs), answers(mustBuild(t, live, HostURI), reqs); !slices.Equal(got, want) {
			t.Fatalf("%s: updated %v, built %v", what, got, want)
		}
	}
	r := mustBuild(t, nil, HostURI)
	var live []Route
	for len(live) < 4000 {
		var add []Route
		for range 500 {
			add = append(add, mk(len(live)+len(add), 0))
		}
		var err error
		if r, err = r.Update(nil, add); err != nil {
			t.Fatal(err)
		}
		live = append(live, add...)
		check(r, live, fmt.Sprintf("%d routes", len(live)))
	}
	if r.noHost.exact.mask < 1 || r.noHost.segs.mask < 1 || r.hostExact.mask < 1 {
		t.Fatalf("shards: exact %d, segments %d, hosts %d; want them spread", r.noHost.exact.mask+1,
			r.noHost.segs.mask+1, r.hostExact.mask+1)
	}
	for step := range 200 {
		i := rng.IntN(len(live))
		var err error
		if step%2 == 0 {
			nr := mk(live[i].Index, step+1)
			r, err = r.Update([]Route{live[i]}, []Route{nr})
			live[i] = nr
		} else {
			r, err = r.Update([]Route{live[i]}, nil)
			live = slices.Delete(live, i, i+1)
		}
		if err != nil {
			t.Fatal(err)
		}
		if step%20 == 0 {
			check(r, live, fmt.Sprintf("step %d", step))
		}
	}
	check(r, live, "the end")
}
