//go:build !race

package echo

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: header_filter and body_filter allocate nothing, whether the
// body is replaced, wrapped or left alone.
func TestAllocs(t *testing.T) {
	for _, conf := range []string{
		`{"before_body":"before ","body":"hello upstream","after_body":" after","headers":{"Location":"https://www.iresty.com","X-N":1}}`,
		`{"before_body":"before ","after_body":" after"}`,
		`{"after_body":" after"}`,
	} {
		p := build(t, conf)
		c := plugintest.NewCtx("GET", "/hello")
		c.UpstreamBody = []byte("hello world\n")
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
