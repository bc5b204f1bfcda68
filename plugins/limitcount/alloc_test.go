//go:build !race

package limitcount

import (
	"fmt"
	"testing"
	"time"

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

// TestAllocSync: with sync_interval, a request of a key whose window has
// had its first sync is counted locally: no Redis call, no allocation.
func TestAllocSync(t *testing.T) {
	port := plugintest.RedisServer(t)
	for name, conf := range map[string]string{
		"passed":   `{"count":1000000000,"time_window":60,"sync_interval":10}`,
		"rejected": `{"count":1,"time_window":60,"sync_interval":10}`,
	} {
		t.Run(name, func(t *testing.T) {
			conf = conf[:len(conf)-1] + fmt.Sprintf(`,"policy":"redis","redis_host":"127.0.0.1","redis_port":%d}`, port)
			p := build(t, plugins.NewLocalEnv(), conf)
			c := newCtx("GET", "/hello").WithRoute(name)
			c.Clock = time.Now().UnixNano()
			run(p, c)
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				plugintest.Run(p, c)
				if c.Awaits != 0 {
					t.Fatalf("%d Awaits", c.Awaits)
				}
			})
		})
	}
}
