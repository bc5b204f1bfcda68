//go:build !race

package limitreq

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocAccess: a request, admitted, delayed or rejected, with either
// kind of key, allocates nothing once its bucket exists.
func TestAllocAccess(t *testing.T) {
	for name, conf := range map[string]string{
		"admitted":        `{"rate":1000000,"burst":0,"key":"remote_addr"}`,
		"delayed":         `{"rate":1,"burst":1000000,"key":"http_x_user"}`,
		"rejected":        `{"rate":1,"burst":0,"key":"remote_addr","rejected_msg":"no"}`,
		"var_combination": `{"rate":1,"burst":1000000,"key_type":"var_combination","key":"$remote_addr $http_x_user ${arg_x ?? d}"}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := build(t, plugins.NewLocalEnv(), conf)
			c := newCtx("/hello?y=1").WithHeader("X-User", "ann")
			run(p, c)
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				plugintest.Run(p, c)
			})
		})
	}
}
