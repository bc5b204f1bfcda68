//go:build !race

package uarestriction

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the access phase allocates nothing, matched or not, the
// value trimmed or not, one User-Agent or several.
func TestAllocs(t *testing.T) {
	for _, tc := range []struct{ conf, ua, ua2 string }{
		{`{"denylist":["my-bot1","(Baiduspider)/(\\d+)\\.(\\d+)"]}`, "Mozilla/5.0 (compatible; Baiduspider/2.0)", ""},
		{`{"denylist":["my-bot1","(Baiduspider)/(\\d+)\\.(\\d+)"]}`, " curl/8.5.0 ", ""},
		{`{"allowlist":["^Mozilla/","curl"]}`, "Mozilla/5.0 (X11; Linux x86_64)", ""},
		{`{"allowlist":["^Mozilla/","curl"]}`, "Wget/1.21", ""},
		{`{"allowlist":["^Mozilla/","curl"]}`, "Wget/1.21", "curl/8.5.0"},
		{`{"denylist":["my-bot1"]}`, "Wget/1.21", "curl/8.5.0"},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello").WithHeader("User-Agent", tc.ua)
		if tc.ua2 != "" {
			c.WithHeader("User-Agent", tc.ua2)
		}
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
