package limitreq

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// BenchmarkAccess: one request through its bucket in the node's counter
// table, by a variable's value and by a template's, admitted or
// rejected.
func BenchmarkAccess(b *testing.B) {
	for _, bc := range []struct{ name, conf string }{
		{"var", `{"rate":1000000000,"burst":0,"key":"remote_addr"}`},
		{"var_combination", `{"rate":1000000000,"burst":0,"key_type":"var_combination","key":"$remote_addr $http_x_user"}`},
		{"rejected", `{"rate":1,"burst":0,"key":"remote_addr","rejected_msg":"no"}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			p := build(b, plugins.NewLocalEnv(), bc.conf)
			c := newCtx("/hello").WithHeader("X-User", "ann")
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
}
