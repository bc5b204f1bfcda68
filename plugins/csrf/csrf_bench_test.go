package csrf

import (
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkCSRF: one request through csrf: a GET given its token, a POST
// whose token verifies (and gets a new one).
func BenchmarkCSRF(b *testing.B) {
	p := build(b, `{"key":"userkey","expires":1000000000}`)
	for name, c := range map[string]*plugintest.Ctx{
		"GET":  plugintest.NewCtx("GET", "/hello"),
		"POST": plugintest.NewCtx("POST", "/hello").WithHeader("apisix-csrf-token", apisixValid).WithHeader("Cookie", "apisix-csrf-token="+apisixValid),
	} {
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
}
