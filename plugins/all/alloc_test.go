//go:build !race

package all

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestKeyAuthThroughProxyRewriteAllocs: the pair allocates nothing per
// request.
func TestKeyAuthThroughProxyRewriteAllocs(t *testing.T) {
	p := build(t, `{"key-auth":{"hide_credentials":true},"proxy-rewrite":{"uri":"/new","headers":{"set":{"X-A":"$args"}}}}`)
	c := plugintest.NewCtx("GET", "/old?a=1&apikey=k1&b=2")
	plugintest.AllocsPerRun(t, 100, func() {
		c.Reset()
		plugintest.Run(&p, c)
	})
	if string(c.UpstreamURI) != "/new?a=1&b=2" {
		t.Fatalf("upstream target %q", c.UpstreamURI)
	}
}
