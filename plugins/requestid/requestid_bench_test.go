package requestid

import (
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkRequestID: one request through request-id, both phases, by
// algorithm.
func BenchmarkRequestID(b *testing.B) {
	for _, alg := range []string{"uuid", "uuidv7", "nanoid", "ksuid", "range_id"} {
		b.Run(alg, func(b *testing.B) {
			p := build(b, `{"algorithm":"`+alg+`"}`)
			c := plugintest.NewCtx("GET", "/hello")
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
}
