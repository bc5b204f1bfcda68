//go:build !race

package refererrestriction

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the access phase allocates nothing, a host found by the
// map, by a suffix, or not at all.
func TestAllocs(t *testing.T) {
	for _, ref := range []string{"https://yy.com/am", "http://www.xx.com", "http://zz.com/", "malformed"} {
		p := build(t, `{"whitelist":["*.xx.com","yy.com"]}`)
		c := plugintest.NewCtx("GET", "/hello").WithHeader("Referer", ref)
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
