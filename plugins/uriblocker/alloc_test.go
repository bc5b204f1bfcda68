//go:build !race

package uriblocker

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the rewrite phase allocates nothing, blocked or not, with a
// query or without.
func TestAllocs(t *testing.T) {
	for _, target := range []string{"/hello?name=;union%20select%20", "/hello?cc=2", "/internal/x", "/public"} {
		p := build(t, `{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))","^/internal/"],"rejected_msg":"no","case_insensitive":true}`)
		c := plugintest.NewCtx("GET", target)
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
