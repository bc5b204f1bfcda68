//go:build !race

package prometheus

import (
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocs: the log phase of a request whose labels were seen before
// allocates nothing, with labels disabled or not.
func TestAllocs(t *testing.T) {
	p := buildEnv(t, plugins.NewMetricTable(1000),
		`{"id":"prometheus","disabled_labels":{"http_status":["node"],"http_latency":["route"],"bandwidth":["consumer"]}}`,
		`{"default_buckets":[1,10,100],"metrics":{"http_status":{"extra_labels":[{"m":"$request_method"}]},`+
			`"http_latency":{"extra_labels":[{"a":"$upstream_addr"}]},"bandwidth":{"extra_labels":[{"u":"$uri"}]}}}`)
	c := proxied()
	plugintest.AllocsPerRun(t, 200, func() {
		c.Reset()
		plugintest.Run(p, c)
	})
	for _, conf := range []string{`{}`, `{"prefer_name":true}`} {
		p := build(t, plugins.NewMetricTable(1000), conf)
		c := proxied()
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
