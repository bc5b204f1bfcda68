package control

import (
	"fmt"
	"runtime"
	"slices"
	"testing"

	"coregate/admin/spec"
)

// BenchmarkDecodeSpec5000 decodes the Config payload of 5 000 routes, as
// a worker does for every configuration of a node that size.
func BenchmarkDecodeSpec5000(b *testing.B) {
	s := bulkSpec(b, 5000)
	payload, err := EncodeSpec(s)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeSpec(payload, nil); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkDelta5000 encodes and decodes the Delta that adds one route to
// 5 000, the supervisor's and each worker's work per change in a bulk
// load of that size (against BenchmarkDecodeSpec5000 for a Config).
func BenchmarkDelta5000(b *testing.B) {
	base := bulkSpec(b, 5000)
	r, err := spec.DecodeRoute([]byte(`{"id":"new","uri":"/new","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		b.Fatal(err)
	}
	next := *base
	next.Routes = append(slices.Clone(base.Routes), r)
	next.SetHash()
	payload, ok, err := EncodeDelta(base, &next)
	if err != nil || !ok {
		b.Fatal(ok, err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := EncodeDelta(base, &next); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode", func(b *testing.B) {
		b.SetBytes(int64(len(payload)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecodeDelta(payload, base, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkDeltaChange encodes and decodes the Delta of one route
// replaced in the configuration of issue 41's bench admin rows: n routes
// with two plugins each, referring by upstream_id to 20 000 upstreams in
// turn. The supervisor encodes it once per change, each worker decodes it.
// encode-delete-one-of-n encodes the Delta of one route removed from the
// middle instead (a DELETE).
func BenchmarkDeltaChange(b *testing.B) {
	var ups []*spec.Upstream
	for i := range 20000 {
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"u%d","type":"roundrobin","nodes":{"127.0.0.1:%d":1}}`, i, 2000+i))
		if err != nil {
			b.Fatal(err)
		}
		ups = append(ups, u)
	}
	route := func(i int, v string) *spec.Route {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r%d","uri":"/bulk/%d","plugins":{"proxy-rewrite":{"uri":"/%s/%d"},`+
			`"response-rewrite":{"headers":{"set":{"X-Route":"r%d"}}}},"upstream_id":"u%d"}`, i, i, v, i, i, i%20000))
		if err != nil {
			b.Fatal(err)
		}
		return r
	}
	for _, n := range []int{5000, 50000} {
		base := &spec.Spec{Upstreams: ups}
		for i := range n {
			base.Routes = append(base.Routes, route(i, "a"))
		}
		base.SetHash()
		next := &spec.Spec{Routes: slices.Clone(base.Routes), Upstreams: ups}
		next.Routes[n/2] = route(n/2, "b")
		next.SetHash()
		payload, ok, err := EncodeDelta(base, next)
		if err != nil || !ok {
			b.Fatal(ok, err)
		}
		removed := &spec.Spec{Routes: slices.Delete(slices.Clone(base.Routes), n/2, n/2+1), Upstreams: ups}
		removed.SetHash()
		b.Run(fmt.Sprintf("encode-one-of-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := EncodeDelta(base, next); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("encode-delete-one-of-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, ok, err := EncodeDelta(base, removed); err != nil || !ok {
					b.Fatal(ok, err)
				}
			}
		})
		b.Run(fmt.Sprintf("decode-one-of-%d", n), func(b *testing.B) {
			b.SetBytes(int64(len(payload)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeDelta(payload, base, nil); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("check-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if err := next.Check(); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDecodeSpecPlugins5000 decodes the Config payload of 5 000
// routes with bench admin -plugins' two plugins (the same proxy-rewrite
// on each, a response-rewrite of its own), and reports the heap the
// decoded Spec holds per route (heap-B/route), after a collection.
func BenchmarkDecodeSpecPlugins5000(b *testing.B) {
	const n = 5000
	s := &spec.Spec{}
	for i := range n {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":"r%d","uri":"/bulk/%d","plugins":{"proxy-rewrite":{"headers":{"set":{"X-Bench":"1"}}},`+
			`"response-rewrite":{"headers":{"set":{"X-Route":"/bulk/%d"}}}},"upstream_id":"u%d"}`, i, i, i, i%20))
		if err != nil {
			b.Fatal(err)
		}
		s.Routes = append(s.Routes, r)
	}
	for i := range 20 {
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":"u%d","nodes":{"127.0.0.1:1980":1}}`, i))
		if err != nil {
			b.Fatal(err)
		}
		s.Upstreams = append(s.Upstreams, u)
	}
	s.SetHash()
	payload, err := EncodeSpec(s)
	if err != nil {
		b.Fatal(err)
	}
	heap := func() uint64 {
		var m runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&m)
		return m.HeapAlloc
	}
	b.SetBytes(int64(len(payload)))
	b.ReportAllocs()
	var held uint64
	for b.Loop() {
		b.StopTimer()
		h0 := heap()
		b.StartTimer()
		got, err := DecodeSpec(payload, nil)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		held = heap() - h0
		runtime.KeepAlive(got)
		b.StartTimer()
	}
	b.ReportMetric(float64(held)/n, "heap-B/route")
}
