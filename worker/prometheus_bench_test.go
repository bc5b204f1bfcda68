//go:build !race

package worker

import (
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	_ "coregate/plugins/prometheus" // registers prometheus in plugins.Default
	"coregate/worker/router"
	"coregate/worker/shm"
)

// BenchmarkPrometheusLog is one proxied request through the worker (fake
// connections, a kept-alive upstream) on a route without plugins and on
// one with the prometheus plugin counting in a metrics segment: the
// difference is what the plugin costs the loop per request (its log
// phase, and the head kept for it).
func BenchmarkPrometheusLog(b *testing.B) {
	seg, err := shm.CreateMetrics(1, 256)
	if err != nil {
		b.Skip("no metrics segment:", err)
	}
	defer seg.Close()
	region, err := seg.Region(0)
	if err != nil {
		b.Fatal(err)
	}
	w := New(Config{Listen: []string{"127.0.0.1:0"}, Plugins: plugins.Env{Metrics: region}, Node: region.Node()})
	s := &spec.Spec{}
	const up = `"upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":320,"idle_timeout":60,"requests":2000000000}}`
	for _, r := range []string{
		`{"id":"none","uri":"/none",` + up + `}`,
		`{"id":"prometheus","uri":"/prometheus","plugins":{"prometheus":{}},` + up + `}`,
	} {
		x, err := spec.DecodeRoute([]byte(r))
		if err != nil {
			b.Fatal(err)
		}
		s.Routes = append(s.Routes, x)
	}
	if err := s.Check(); err != nil {
		b.Fatal(err)
	}
	snap, err := compile(s, router.HostURI, Keepalive{}, pluginSet{reg: plugins.Default, env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	h := newHarnessSnap(b, w, snap)
	for _, name := range []string{"none", "prometheus"} {
		req := []byte("GET /" + name + " HTTP/1.1\r\nHost: example.com\r\n\r\n")
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.roundTrip(req, []byte(upOK))
			}
		})
	}
}
