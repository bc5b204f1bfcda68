package proxyrewrite

import (
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkRewrite: one request through proxy-rewrite, by configuration.
func BenchmarkRewrite(b *testing.B) {
	for _, tc := range []struct {
		name, conf string
		req        request
	}{
		{"uri", `{"uri":"/plugin_proxy_rewrite_args"}`, request{target: "/hello?q=apisix&a=iresty"}},
		{"regex literal", `{"regex_uri":["^/api/(.*)","/$1"]}`, request{target: "/api/users/42?x=1"}},
		{"regex other", `{"regex_uri":["^/(\\w+)/(\\d+)$","/$2/$1"]}`, request{target: "/item/42"}},
		{"host and headers", `{"host":"a.com","headers":{"set":{"X-Api":"v2","X-Ip":"$remote_addr"},"remove":["X-Debug"]}}`,
			request{target: "/h", headers: []string{"Host", "b.com", "X-Debug", "1"}}},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, tc.conf)
			c := tc.req.ctx()
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(&p, c)
			}
		})
	}
}
