package worker

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
)

// BenchmarkCompile5000 compiles a configuration of 5 000 routes, each
// with its own upstream, as a worker does for every configuration of a
// node that size (the decode aside: control.BenchmarkDelta5000): the
// first, and the next, which keeps the served snapshot's upstreams.
func BenchmarkCompile5000(b *testing.B) {
	s := &spec.Spec{}
	for i := range 5000 {
		s.Routes = append(s.Routes, bulkRoute(b, i))
	}
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	ps := pluginSet{env: w.cfg.Plugins}
	b.Run("first", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The build after a change: the served snapshot was compiled from the
	// same objects, as during a bulk load (control.DecodeDelta).
	prev, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("next", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := compile(s, router.HostURI, upstreamEnv{}, ps, prev, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The builds of a bulk load through the Admin API: routes created
	// since the served snapshot, which come last (the store serves objects
	// in creation order), and a route replaced in the middle.
	grown := &spec.Spec{Routes: slices.Clone(s.Routes)}
	for i := 5000; i < 5008; i++ {
		grown.Routes = append(grown.Routes, bulkRoute(b, i))
	}
	b.Run("added", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := compile(grown, router.HostURI, upstreamEnv{}, ps, prev, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
	changed := &spec.Spec{Routes: slices.Clone(s.Routes)}
	changed.Routes[2500] = bulkRoute(b, 2500)
	b.Run("changed", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := compile(changed, router.HostURI, upstreamEnv{}, ps, prev, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// bulkRoute is route r<i> of BenchmarkCompile5000, decoded anew.
func bulkRoute(b *testing.B, i int) *spec.Route {
	r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r%d","uri":"/bulk/%d","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, i, i))
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkCompileChange is the build after a change to a configuration
// of n routes, each with an upstream of its own and two plugins, made
// from the snapshot being served as a worker makes it: one route
// changed, and 400 at once (the router updated for them, the others'
// plugins and upstreams taken over), one deleted and created again, each
// build made from the one before; and the first build, from nothing, for
// comparison.
func BenchmarkCompileChange(b *testing.B) {
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	ps := pluginSet{env: w.cfg.Plugins}
	for _, n := range []int{5000, 20000, 50000} {
		s := &spec.Spec{}
		for i := range n {
			s.Routes = append(s.Routes, pluginRoute(b, i, "a"))
		}
		base, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		change := func(b *testing.B, k int) {
			// Two Specs that differ from s in k routes each, served
			// in turn: each build changes k routes of the one before.
			var specs [2]*spec.Spec
			for v, version := range []string{"b", "c"} {
				specs[v] = &spec.Spec{Routes: slices.Clone(s.Routes)}
				for j := range k {
					i := j * (n / k)
					specs[v].Routes[i] = pluginRoute(b, i, version)
				}
			}
			compileInTurn(b, specs, ps, base)
		}
		b.Run(fmt.Sprintf("one-of-%d", n), func(b *testing.B) { change(b, 1) })
		b.Run(fmt.Sprintf("400-of-%d", n), func(b *testing.B) { change(b, 400) })
		// One route deleted from the middle and created again, in
		// turn: the routes after it move by one place.
		b.Run(fmt.Sprintf("delete-one-of-%d", n), func(b *testing.B) {
			compileInTurn(b, [2]*spec.Spec{{Routes: slices.Delete(slices.Clone(s.Routes), n/2, n/2+1)}, s}, ps, base)
		})
		b.Run(fmt.Sprintf("first-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			c0 := cpuTime()
			i := 0
			for ; b.Loop(); i++ {
				if _, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(i), "cpu-ns/op")
		})
	}
}

// BenchmarkCompileChangeByID is BenchmarkCompileChange's one route
// changed on the configuration of issue 41's bench admin rows: n routes
// with two plugins each, referring by upstream_id to 20 000 upstreams in
// turn.
func BenchmarkCompileChangeByID(b *testing.B) {
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	ps := pluginSet{env: w.cfg.Plugins}
	for _, n := range []int{5000, 20000, 50000} {
		s := &spec.Spec{Upstreams: adminUpstreams(b)}
		route := func(i int, v string) *spec.Route { return adminRoute(b, i, v) }
		for i := range n {
			s.Routes = append(s.Routes, route(i, "a"))
		}
		base, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("one-of-%d", n), func(b *testing.B) {
			var specs [2]*spec.Spec
			for v, version := range []string{"b", "c"} {
				specs[v] = &spec.Spec{Routes: slices.Clone(s.Routes), Upstreams: s.Upstreams}
				specs[v].Routes[n/2] = route(n/2, version)
			}
			compileInTurn(b, specs, ps, base)
		})
	}
}

// adminUpstreams are the 20 000 upstreams of issue 41's bench admin rows,
// u<i>, one node each.
func adminUpstreams(b testing.TB) []*spec.Upstream {
	ups := make([]*spec.Upstream, 0, 20000)
	for i := range 20000 {
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"u%d","type":"roundrobin","nodes":{"127.0.0.1:%d":1}}`, i, 2000+i))
		if err != nil {
			b.Fatal(err)
		}
		ups = append(ups, u)
	}
	return ups
}

// adminRoute is route r<i> of issue 41's bench admin rows at version v
// (its proxy-rewrite uri): two plugins, upstream_id one of adminUpstreams'.
func adminRoute(b testing.TB, i int, v string) *spec.Route {
	r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r%d","uri":"/bulk/%d","plugins":{"proxy-rewrite":{"uri":"/%s/%d"},`+
		`"response-rewrite":{"headers":{"set":{"X-Route":"r%d"}}}},"upstream_id":"u%d"}`, i, i, v, i, i, i%20000))
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// pluginRoute is route r<i> of BenchmarkCompileChange, at version v (its
// proxy-rewrite uri): an upstream of its own and two plugins.
func pluginRoute(b testing.TB, i int, v string) *spec.Route {
	r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r%d","uri":"/bulk/%d","plugins":{"proxy-rewrite":{"uri":"/%s/%d"},`+
		`"response-rewrite":{"headers":{"set":{"X-Route":"r%d"}}}},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:%d":1}}}`,
		i, i, v, i, i, 2000+i%50000))
	if err != nil {
		b.Fatal(err)
	}
	return r
}

// BenchmarkRouteMemory is the heap a worker holds per route at 50 000
// routes, each with an upstream of its own and two plugins: the Spec it
// keeps, its routes' plugins as lists (spec-B/route) and the snapshot compiled from it (snap-B/route),
// measured after a collection, beyond what it held before; and the CPU
// of a debug.FreeOSMemory with both held (free-cpu-ms), a collection of
// that heap.
func BenchmarkRouteMemory(b *testing.B) {
	routeMemory(b, nil, func(i int) *spec.Route { return pluginRoute(b, i, "a") })
}

// BenchmarkRouteMemoryByID is BenchmarkRouteMemory on the configuration
// bench admin -routes 50000 -upstreams 20000 -plugins puts
// (bench/propagate routeBody): 50 000 routes, each with a proxy-rewrite
// setting the same header for all and a response-rewrite setting X-Route
// to its uri, referring by upstream_id to 20 000 upstreams in turn, each
// of one node, the same address for all (the upstreams counted in
// spec-B/route). Its inuse-B/route is the heap's in-use spans (HeapInuse)
// beside the live objects of spec-B/route and snap-B/route together: the
// worker's "Go heap in use after a GC" reads HeapInuse. The Spec is
// marked checked, as a worker's supervisor marks it: the registry builds
// it without checking it again, and remembers no configuration passed.
func BenchmarkRouteMemoryByID(b *testing.B) {
	upstreams := func() []*spec.Upstream {
		ups := make([]*spec.Upstream, 0, 20000)
		for i := range 20000 {
			u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"u-%d","type":"roundrobin","nodes":{"127.0.0.1:1980":1}}`, i))
			if err != nil {
				b.Fatal(err)
			}
			ups = append(ups, u)
		}
		return ups
	}
	routeMemory(b, upstreams, func(i int) *spec.Route {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r-%d","uri":"/r/%d","plugins":{"proxy-rewrite":{"headers":{"set":{"X-Bench":"1"}}},`+
			`"response-rewrite":{"headers":{"set":{"X-Route":"/r/%d"}}}},"upstream_id":"u-%d"}`, i, i, i, i%20000))
		if err != nil {
			b.Fatal(err)
		}
		return r
	})
}

// routeMemory measures BenchmarkRouteMemory's figures for the routes
// route makes, with the upstreams upstreams makes (nil: none).
func routeMemory(b *testing.B, upstreams func() []*spec.Upstream, route func(i int) *spec.Route) {
	const n = 50000
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	ps := pluginSet{env: w.cfg.Plugins}
	heap := func() (alloc, inuse uint64) {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc, m.HeapInuse
	}
	for b.Loop() {
		b.StopTimer()
		h0, i0 := heap()
		s := &spec.Spec{}
		if upstreams != nil {
			s.Upstreams, s.Checked = upstreams(), plugins.Default.Fingerprint()
		}
		var near *spec.Route
		for i := range n {
			r := route(i)
			r.CompactPlugins(near) // as control decodes it
			s.Routes, near = append(s.Routes, r), r
		}
		h1, _ := heap()
		b.StartTimer()
		snap, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		h2, i2 := heap()
		c0 := cpuTime()
		debug.FreeOSMemory() // what a worker's release costs at this heap (workerproc)
		b.ReportMetric(float64(cpuTime()-c0)/1e6, "free-cpu-ms")
		runtime.KeepAlive(s)
		runtime.KeepAlive(snap)
		b.ReportMetric(float64(h1-h0)/n, "spec-B/route")
		b.ReportMetric(float64(h2-h1)/n, "snap-B/route")
		b.ReportMetric(float64(i2-i0)/n, "inuse-B/route")
		b.StartTimer()
	}
}

// compileInTurn builds specs[0] and specs[1] in turn, each from the
// snapshot the build before made (base first), as a worker builds from
// the one it serves, and reports the CPU time of a build (cpu-ns/op)
// beside its wall time.
func compileInTurn(b *testing.B, specs [2]*spec.Spec, ps pluginSet, base *Snapshot) {
	b.Helper()
	cur := base
	b.ReportAllocs()
	c0 := cpuTime()
	i := 0
	for ; b.Loop(); i++ {
		next, err := compile(specs[i%2], router.HostURI, upstreamEnv{}, ps, cur, nil)
		if err != nil {
			b.Fatal(err)
		}
		cur = next
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(i), "cpu-ns/op")
}
