package worker

import (
	"fmt"
	"slices"
	"testing"

	"coregate/admin/spec"
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
