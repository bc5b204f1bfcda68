//go:build !race

package limitconn

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocPhases: a request counted and taken away (access and log),
// delayed or rejected, with either kind of key and a limit from a
// variable, allocates nothing once its counter exists.
func TestAllocPhases(t *testing.T) {
	for name, conf := range map[string]string{
		"passed":          `{"conn":1,"burst":0,"default_conn_delay":1,"key":"remote_addr"}`,
		"var_combination": `{"conn":"$http_x_conn","burst":"${arg_b ?? 0}","default_conn_delay":1,"key_type":"var_combination","key":"$remote_addr $http_x_user"}`,
		"rules":           rulesConf,
	} {
		t.Run(name, func(t *testing.T) {
			p := build(t, plugins.NewLocalEnv(), conf)
			c := plugintest.NewCtx("GET", "/hello?y=1").WithHeader("X-User", "ann").WithHeader("X-Conn", "3").WithHeader("X-Org", "o")
			plugintest.Run(p, c)
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				plugintest.Run(p, c)
			})
		})
	}
	// One request held in flight: the next is delayed, or rejected.
	for name, conf := range map[string]string{
		"delayed":  `{"conn":1,"burst":5,"default_conn_delay":1,"key":"remote_addr"}`,
		"rejected": `{"conn":1,"burst":0,"default_conn_delay":1,"key":"remote_addr","rejected_msg":"no"}`,
	} {
		t.Run(name, func(t *testing.T) {
			p := build(t, plugins.NewLocalEnv(), conf)
			enter(p, t0)
			c := plugintest.NewCtx("GET", "/")
			c.Clock = t0
			plugintest.Run(p, c)
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				plugintest.Run(p, c)
			})
		})
	}
}
