package opentelemetry

import (
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkOpenTelemetry: one request through the rewrite and log
// phases, sampled (its span queued; the consumer gives the slots back as
// it goes, the exporter idle) and not, with a client traceparent.
func BenchmarkOpenTelemetry(b *testing.B) {
	col := newCollector(b)
	idle := `,"batch_span_processor":{"max_queue_size":4096,"max_export_batch_size":4096,"batch_timeout":3600,"inactive_timeout":3600}`
	for _, tc := range []struct{ name, conf string }{
		{"sampled", `{"sampler":{"name":"always_on"}}`},
		{"not_sampled", `{}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			in := build(b, tc.conf, col, idle)
			c := plugintest.NewCtx("GET", "/hello").WithHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01").
				WithHeader("User-Agent", "bench").WithVar("matched_uri", "/hello").WithRoute("r1")
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				in.Rewrite(c)
				c.WithStatus(200)
				in.Log(c)
				if s := in.q.Next(); s != nil {
					in.q.Done()
				}
			}
		})
	}
}
