//go:build !race

package redirect

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the rewrite phase allocates nothing, for each way of making
// the Location, and for a request that is not redirected; a regex_uri
// pattern of another shape than the literal ones on a target seen before
// (resub.Rule's cache).
func TestAllocs(t *testing.T) {
	for _, tc := range []struct{ conf, target string }{
		{`{"uri":"$uri/x/${arg_a}?b=$arg_b","ret_code":301}`, "/hello?a=1&b=2"},
		{`{"uri":"/a b$uri","encode_uri":true,"append_query_string":true}`, "/hello?a=1"},
		{`{"regex_uri":["^/test/(.*)","http://test.com/${1}"]}`, "/test/1"},
		{`{"regex_uri":["^/test/(.*)","http://test.com/${1}"]}`, "/hello"},
		{`{"regex_uri":["^/(\\w+)/(\\d+)$","/$2/$1"],"encode_uri":true}`, "/item/42"},
		{`{"http_to_https":true}`, "/hello?a=1"},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", tc.target).WithHeader("Host", "foo.com")
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
	p := build(t, `{"http_to_https":true}`)
	c := plugintest.NewCtx("GET", "/hello").WithHeader("Host", "foo.com").WithHeader("X-Forwarded-Proto", "https")
	plugintest.AllocsPerRun(t, 200, func() {
		c.Reset()
		plugintest.Run(p, c)
	})
}
