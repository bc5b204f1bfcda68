//go:build !race

package realip

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the rewrite phase allocates nothing: a header's address
// with a port, X-Forwarded-For's last address, its last untrusted one, a
// bad address.
func TestAllocs(t *testing.T) {
	for _, tc := range []struct{ conf, name, value string }{
		{`{"source":"http_xff"}`, "XFF", "1.1.1.1:80"},
		{`{"source":"http_xff"}`, "XFF", "[::2]:80"},
		{`{"source":"http_x_forwarded_for"}`, "X-Forwarded-For", "::1, ::2"},
		{`{"source":"http_x_forwarded_for","trusted_addresses":["192.128.0.0/16","127.0.0.0/24"],"recursive":true}`,
			"X-Forwarded-For", "1.1.1.1, 192.128.1.1, 127.0.0.1"},
		{`{"source":"http_xff"}`, "XFF", "1.1.1.1.1"},
	} {
		p := build(t, tc.conf, "")
		c := plugintest.NewCtx("GET", "/hello").WithHeader(tc.name, tc.value)
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
