package filelogger

import (
	"path/filepath"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// BenchmarkLog: one request's entry built and queued, the default entry
// and a log_format, the file written by the writer's goroutine (entries
// beyond what it keeps up with are dropped, as in production).
func BenchmarkLog(b *testing.B) {
	dir := b.TempDir()
	for _, tc := range []struct{ name, conf string }{
		{"full", `{"path":"` + filepath.Join(dir, "full.log") + `"}`},
		{"log_format", `{"path":"` + filepath.Join(dir, "format.log") + `","log_format":{"host":"$host","ip":"$remote_addr","status":"$status","uri":"$request_uri"}}`},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, tc.conf, "")
			c := plugintest.NewCtx("GET", "/hello?a=1&b=2").WithHeader("Host", "example.com").
				WithHeader("User-Agent", "curl/8.0").WithHeader("Accept", "*/*")
			c.Figures = plugins.Exchange{RequestTime: 2 * time.Millisecond, UpstreamTime: time.Millisecond, Proxied: true, RequestLength: 80, BytesSent: 200}
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
}
