//go:build !race

package worker

import "testing"

// BenchmarkPrometheusLog is one proxied request through the worker (fake
// connections, a kept-alive upstream) on a route without plugins and on
// one with the prometheus plugin counting in a metrics segment: the
// difference is what the plugin costs the loop per request (its log
// phase, and the head kept for it).
func BenchmarkPrometheusLog(b *testing.B) {
	const up = `"upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":320,"idle_timeout":60,"requests":2000000000}}`
	h, _ := prometheusHarness(b,
		`{"id":"none","uri":"/none",`+up+`}`,
		`{"id":"prometheus","uri":"/prometheus","plugins":{"prometheus":{}},`+up+`}`)
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
