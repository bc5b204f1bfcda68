package supervisor

import (
	"fmt"
	"io"
	"log/slog"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/worker/control"
	"coregate/worker/shm"
)

// BenchmarkPush measures the supervisor's own work of a push at 50 000
// routes and 20 000 upstreams, one route replaced a push (two
// configurations, pushed in turn): setSpec (the health checks' update) and the one
// Delta encoding every worker holding the last configuration is sent
// (sendConfig), without the sockets.
//
// 240 000 instructions a push (cachegrind, GOMAXPROCS=1 GOGC=off), 81 %
// of them two comparisons as memory of the 50 000 routes' pointers with
// the last configuration's: the Delta encoder's and the health checks'
// scan (checkedScan); 1.5 kB and 22 allocations, the Delta's. Nothing
// else of a push walks the configuration.
func BenchmarkPush(b *testing.B) {
	s := pushSupervisor(b)
	sp := &spec.Spec{Hash: [32]byte{1}, Upstreams: pushUpstreams()}
	for i := range 50000 {
		sp.Routes = append(sp.Routes, pushRoute(i))
	}
	next := *sp
	next.Routes = slices.Clone(sp.Routes)
	next.Routes[31000] = &spec.Route{ID: spec.StringID("31000"), URI: "/r31000/1", UpstreamID: spec.StringID("u11000")}
	next.Hash = [32]byte{2}
	specs := [2]*spec.Spec{sp, &next}
	s.setSpec(sp)
	b.ReportAllocs()
	i := 0
	for ; b.Loop(); i++ {
		base := s.spec
		s.setSpec(specs[(i+1)%2])
		if _, ok, err := control.EncodeDelta(base, s.spec); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// BenchmarkPushAppend is BenchmarkPush for a bulk load's pushes: ten
// routes added after 50 000 a push, the list of routes grown in the last
// configuration's array as the store's sync grows it (spec.Spec), its
// capacity cut to its length.
//
// 190 000 instructions a push (cachegrind, GOMAXPROCS=1 GOGC=off), where
// 211 000 when the Delta encoder and the health checks' scan compared the
// list with the last one's as memory, a Block at a time
// (ptrlist.SamePrefix knows it the same since); two thirds of a push's
// CPU are the ten routes' JSON for the Delta (json.Marshal, pprof), and
// 5.3 kB and 103 allocations its garbage. Nothing of it walks the
// configuration.
func BenchmarkPushAppend(b *testing.B) {
	s := pushSupervisor(b)
	const n, more = 50000, 10
	sp := &spec.Spec{Hash: [32]byte{1}, Upstreams: pushUpstreams()}
	routes := make([]*spec.Route, 0, 2*n)
	for i := range cap(routes) {
		routes = append(routes, pushRoute(i))
	}
	sp.Routes = routes[:n:n]
	s.setSpec(sp)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		l := len(s.spec.Routes) + more
		if l > len(routes) {
			b.StopTimer()
			s.setSpec(sp) // from 50 000 again
			l = n + more
			b.StartTimer()
		}
		next := *s.spec
		next.Routes = routes[:l:l]
		next.Hash = [32]byte{byte(i), byte(i >> 8), byte(i >> 16), 1}
		base := s.spec
		s.setSpec(&next)
		if _, ok, err := control.EncodeDelta(base, s.spec); !ok || err != nil {
			b.Fatal(ok, err)
		}
	}
}

// pushSupervisor is a Supervisor with what a push uses: a log and the
// health checks' bookkeeping on a shared segment of its own.
func pushSupervisor(b *testing.B) *Supervisor {
	seg, err := shm.CreateHealth(0)
	if err != nil {
		b.Fatal(err)
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	s := &Supervisor{log: log, health: newHealthChecks(seg, log)}
	b.Cleanup(s.health.stop)
	return s
}

// pushUpstreams are the push benchmarks' 20 000 upstreams, one node each.
func pushUpstreams() []*spec.Upstream {
	ups := make([]*spec.Upstream, 0, 20000)
	for i := range cap(ups) {
		ups = append(ups, &spec.Upstream{ID: spec.StringID(fmt.Sprint("u", i)), Type: "roundrobin",
			Nodes: spec.Nodes{List: []spec.Node{{Host: "127.0.0.1", Port: 2000 + i%1000, Weight: 1}}, IsMap: true}})
	}
	return ups
}

// pushRoute is the push benchmarks' route i, on the upstreams in turn.
func pushRoute(i int) *spec.Route {
	return &spec.Route{ID: spec.StringID(fmt.Sprint(i)), URI: fmt.Sprint("/r", i), UpstreamID: spec.StringID(fmt.Sprint("u", i%20000))}
}
