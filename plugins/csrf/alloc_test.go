//go:build !race

package csrf

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the access and header_filter phases allocate nothing: a
// safe request given a new token, an unsafe one whose token (APISIX's)
// verifies, and one refused.
func TestAllocs(t *testing.T) {
	p := build(t, `{"key":"userkey","expires":1000000000}`)
	for _, c := range []*plugintest.Ctx{
		plugintest.NewCtx("GET", "/hello"),
		plugintest.NewCtx("POST", "/hello").WithHeader("apisix-csrf-token", apisixValid).WithHeader("Cookie", "apisix-csrf-token="+apisixValid),
		plugintest.NewCtx("POST", "/hello").WithHeader("apisix-csrf-token", apisixBadSign).WithHeader("Cookie", "apisix-csrf-token="+apisixBadSign),
	} {
		plugintest.AllocsPerRun(t, 100, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
