package redirect

import (
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkRedirect: one request through redirect, by configuration.
func BenchmarkRedirect(b *testing.B) {
	for _, tc := range []struct{ name, conf, target string }{
		{"http_to_https", `{"http_to_https":true}`, "/hello?a=1"},
		{"uri", `{"uri":"$uri/new?x=$arg_a","append_query_string":true}`, "/hello?a=1"},
		{"regex literal", `{"regex_uri":["^/api/(.*)","/v2/$1"]}`, "/api/users/42"},
		{"regex other", `{"regex_uri":["^/(\\w+)/(\\d+)$","/$2/$1"],"encode_uri":true}`, "/item/42"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, tc.conf)
			c := plugintest.NewCtx("GET", tc.target).WithHeader("Host", "foo.com")
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(p, c)
			}
		})
	}
}
