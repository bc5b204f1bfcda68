//go:build !race

package limitcount

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocAccess: counting a request, passed or rejected, with any kind
// of key, allocates nothing once the counter exists.
func TestAllocAccess(t *testing.T) {
	for name, conf := range map[string]string{
		"var":             `{"count":1000000000,"time_window":60}`,
		"rejected":        `{"count":1,"time_window":60,"rejected_msg":"no"}`,
		"var_combination": `{"count":1000000000,"time_window":60,"key_type":"var_combination","key":"$remote_addr $http_x_user ${arg_x ?? d}"}`,
		"constant group":  `{"count":1000000000,"time_window":60,"key_type":"constant","key":"k","group":"alloc"}`,
		"count from var":  `{"count":"$http_x_count","time_window":"60"}`,
		"rules":           `{"rules":[{"count":1000000000,"time_window":60,"key":"$http_x_user"},{"count":"${http_x_count}","time_window":60,"key":"$arg_none"}]}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := build(t, plugins.NewLocalEnv(), conf)
			c := newCtx("GET", "/hello?y=1").WithHeader("X-User", "ann").WithHeader("X-Count", "5")
			run(p, c)
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				plugintest.Run(p, c)
			})
		})
	}
}
