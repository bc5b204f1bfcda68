//go:build !race

package iprestriction

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: the access phase allocates nothing, allowed or refused, for
// IPv4 and IPv6 clients.
func TestAllocs(t *testing.T) {
	for _, tc := range []struct{ conf, addr string }{
		{`{"whitelist":["127.0.0.1","10.0.0.0/8"]}`, "10.1.2.3"},
		{`{"whitelist":["127.0.0.1","10.0.0.0/8"]}`, "192.0.2.1"},
		{`{"blacklist":["fe80::/10","2001:db8::/32"]}`, "2001:db8::7"},
		{`{"blacklist":["fe80::/10","2001:db8::/32"]}`, "::1"},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello").WithVar("remote_addr", tc.addr)
		plugintest.AllocsPerRun(t, 200, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
	}
}
