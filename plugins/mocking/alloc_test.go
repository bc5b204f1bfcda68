//go:build !race

package mocking

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the access phase allocates nothing, with variables, headers
// and generated data.
func TestAllocs(t *testing.T) {
	for _, conf := range []string{
		`{"response_example":"addr:$remote_addr ${uri}","response_headers":{"X-Id":"$route_id"}}`,
		`{"response_schema":` + genSchema + `}`,
		`{"content_type":"text/xml","response_schema":` + genSchema + `,"delay":1}`,
	} {
		p := build(t, conf)
		c := plugintest.NewCtx("GET", "/hello")
		plugintest.AllocsPerRun(t, 100, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
