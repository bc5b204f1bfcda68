package worker

import (
	"fmt"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/control"
)

// BenchmarkDeltaApply is what a worker does on a Delta frame of one route
// replaced among n (workerproc's applyConfig): the Delta decoded against
// the Spec it holds (control.DecodeDelta) and the Spec installed
// (Worker.SetSpec: the build from the snapshot served), on the
// configuration of issue 41's bench admin rows: n routes with two plugins
// each, referring by upstream_id to 20 000 upstreams in turn. Two
// Deltas are applied in turn, the route changed and changed back, each
// against the Spec the one before made. B/op is the garbage of a change
// (applyConfig's garbage=), cpu-ns/op its CPU.
func BenchmarkDeltaApply(b *testing.B) {
	ups := adminUpstreams(b)
	route := func(i int, v string) *spec.Route { return adminRoute(b, i, v) }
	for _, n := range []int{5000, 50000} {
		a := &spec.Spec{Upstreams: ups}
		for i := range n {
			a.Routes = append(a.Routes, route(i, "a"))
		}
		a.SetHash()
		c := &spec.Spec{Routes: slices.Clone(a.Routes), Upstreams: ups}
		c.Routes[n/2] = route(n/2, "b")
		c.SetHash()
		var deltas [2][]byte
		for k, pair := range [2][2]*spec.Spec{{a, c}, {c, a}} {
			p, ok, err := control.EncodeDelta(pair[0], pair[1])
			if err != nil || !ok {
				b.Fatal(ok, err)
			}
			deltas[k] = p
		}
		// The worker holds a as a Config frame gave it.
		payload, err := control.EncodeSpec(a)
		if err != nil {
			b.Fatal(err)
		}
		held, err := control.DecodeSpec(payload, nil)
		if err != nil {
			b.Fatal(err)
		}
		w := New(Config{Listen: []string{"127.0.0.1:0"}})
		if err := w.SetSpec(held, nil); err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("one-of-%d", n), func(b *testing.B) {
			b.ReportAllocs()
			c0 := cpuTime()
			i := 0
			for ; b.Loop(); i++ {
				s, err := control.DecodeDelta(deltas[i%2], held, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.SetSpec(s, nil); err != nil {
					b.Fatal(err)
				}
				held = s
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(i), "cpu-ns/op")
		})
		// What a bulk load through the Admin API pushes: a route created,
		// which comes last (the store serves routes in creation order),
		// with the plugins checked by the supervisor (spec.Spec.Checked,
		// as the store's sync marks every Spec it serves). Each Delta adds
		// one route (added-10: ten, the Deltas of a bulk load of 400
		// routes, a batch of the PUTs each) to the Spec the one before
		// made; the supervisor's side (the next Spec, EncodeDelta) is
		// left out of the figures.
		for _, k := range []int{1, 10} {
			name := fmt.Sprintf("added-to-%d", n)
			if k > 1 {
				if n < 50000 {
					continue
				}
				name = fmt.Sprintf("added-%d-to-%d", k, n)
			}
			b.Run(name, func(b *testing.B) {
				b.ReportAllocs()
				base := &spec.Spec{Routes: held.Routes, Upstreams: ups, Hash: held.Hash, Checked: plugins.Default.Fingerprint()}
				payload, err := control.EncodeSpec(base)
				if err != nil {
					b.Fatal(err)
				}
				cur, err := control.DecodeSpec(payload, nil)
				if err != nil {
					b.Fatal(err)
				}
				if err := w.SetSpec(cur, nil); err != nil {
					b.Fatal(err)
				}
				var cpu int64
				i := 0
				for ; b.Loop(); i++ {
					b.StopTimer()
					next := &spec.Spec{Routes: slices.Clip(base.Routes), Upstreams: ups, Checked: base.Checked}
					for a := range k {
						next.Routes = append(next.Routes, route(n+i*k+a, "a"))
					}
					// a hash of its own (SetHash reads all of it)
					next.Hash = [32]byte{0: 1, 1: byte(i), 2: byte(i >> 8), 3: byte(i >> 16)}
					delta, ok, err := control.EncodeDelta(base, next)
					if err != nil || !ok {
						b.Fatal(ok, err)
					}
					base = next
					b.StartTimer()
					c0 := cpuTime()
					s, err := control.DecodeDelta(delta, cur, nil)
					if err != nil {
						b.Fatal(err)
					}
					if err := w.SetSpec(s, nil); err != nil {
						b.Fatal(err)
					}
					cpu += cpuTime() - c0
					cur = s
				}
				b.ReportMetric(float64(cpu)/float64(i), "cpu-ns/op")
			})
		}
	}
}
