//go:build !race

package prometheus

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocs: the log phase of a request whose labels were seen before
// allocates nothing.
func TestAllocs(t *testing.T) {
	for _, conf := range []string{`{}`, `{"prefer_name":true}`} {
		p := build(t, plugins.NewMetricTable(1000), conf)
		c := proxied()
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
