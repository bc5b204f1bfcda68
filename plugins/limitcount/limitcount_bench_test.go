package limitcount

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// BenchmarkAccess: one request counted in the node's counter table, by a
// variable's value and by a template's, passed or rejected.
func BenchmarkAccess(b *testing.B) {
	for _, bc := range []struct{ name, conf string }{
		{"var", `{"count":1000000000,"time_window":60}`},
		{"var_combination", `{"count":1000000000,"time_window":60,"key_type":"var_combination","key":"$remote_addr $http_x_user"}`},
		{"rejected", `{"count":1,"time_window":60,"rejected_msg":"no"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := build(b, plugins.NewLocalEnv(), bc.conf)
			c := newCtx("GET", "/hello").WithHeader("X-User", "ann")
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
}
