package httplogger

import (
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// BenchmarkLog: one request's entry built and pushed to the batch
// processor, the default entry and a log_format, the batches POSTed to a
// loopback server (entries beyond what it keeps up with are dropped, as
// in production).
func BenchmarkLog(b *testing.B) {
	s := newLogServer(b, 0)
	for _, tc := range []struct{ name, conf string }{
		{"full", `{"uri":"` + s.URL + `/full","batch_max_size":100,"inactive_timeout":1}`},
		{"log_format", `{"uri":"` + s.URL + `/format","batch_max_size":100,"inactive_timeout":1,"log_format":{"host":"$host","status":"$status"}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, tc.conf)
			c := plugintest.NewCtx("GET", "/hello?a=1&b=2").WithHeader("Host", "example.com").WithHeader("User-Agent", "curl/8.0")
			c.Figures = plugins.Exchange{RequestTime: 2 * time.Millisecond, Proxied: true, RequestLength: 80, BytesSent: 200}
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
}
