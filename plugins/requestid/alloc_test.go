//go:build !race

package requestid

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the rewrite and header_filter phases allocate nothing, for
// each algorithm, for a request that brings its id, and for a response
// that has one.
func TestAllocs(t *testing.T) {
	for _, conf := range []string{
		`{}`, `{"algorithm":"uuidv7"}`, `{"algorithm":"nanoid"}`, `{"algorithm":"ksuid"}`,
		`{"algorithm":"range_id","range_id":{"length":32}}`, `{"include_in_response":false}`,
	} {
		p := build(t, conf)
		for _, c := range []*plugintest.Ctx{
			plugintest.NewCtx("GET", "/hello"),
			plugintest.NewCtx("GET", "/hello").WithHeader("X-Request-Id", "abc"),
			plugintest.NewCtx("GET", "/hello").WithResponseHeader("X-Request-Id", "up"),
		} {
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				plugintest.Run(p, c)
			})
		}
	}
}
