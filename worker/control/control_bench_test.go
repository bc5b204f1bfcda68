package control

import (
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
