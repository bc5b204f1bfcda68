package limitconn

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// BenchmarkPhases: one request counted in (access) and out (log) of its
// key's count in the node's counter table, by a variable's value and by
// a template's, and one rejected.
func BenchmarkPhases(b *testing.B) {
	for _, bc := range []struct{ name, conf string }{
		{"var", `{"conn":1,"burst":0,"default_conn_delay":1,"key":"remote_addr"}`},
		{"var_combination", `{"conn":1,"burst":0,"default_conn_delay":1,"key_type":"var_combination","key":"$remote_addr $http_x_user"}`},
		{"rejected", `{"conn":1,"burst":0,"default_conn_delay":1,"key":"remote_addr","rejected_msg":"no"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			env := plugins.NewLocalEnv()
			p := build(b, env, bc.conf)
			if bc.name == "rejected" {
				enter(p, t0)
			}
			c := plugintest.NewCtx("GET", "/hello").WithHeader("X-User", "ann")
			c.Clock = t0
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
}
