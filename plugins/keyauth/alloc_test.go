//go:build !race

package keyauth

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocRewrite: key-auth's rewrite phase allocates nothing, whichever
// way the request goes.
func TestAllocRewrite(t *testing.T) {
	all := consumers(t, jack, spaced, anonymous)
	for _, tc := range []struct {
		name, conf string
		req        request
	}{
		{"header", `{}`, request{"/hello", []string{"apikey", "auth-one"}}},
		{"header hidden", `{"hide_credentials":true}`, request{"/hello", []string{"apikey", "auth-one", "x", "y"}}},
		{"query escaped", `{}`, request{"/hello?api%6Bey=a+b%2Bc", nil}},
		{"query hidden", `{"hide_credentials":true}`, request{"/hello?a=1&apikey=auth-one&b=2", nil}},
		{"missing", `{}`, request{"/hello", nil}},
		{"invalid", `{}`, request{"/hello?apikey=nope", nil}},
		{"anonymous hidden", `{"anonymous_consumer":"anonymous","hide_credentials":true}`, request{"/hello?apikey=nope", []string{"apikey", "nope"}}},
		{"anonymous missing", `{"anonymous_consumer":"nobody"}`, request{"/hello", nil}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, all)
			c := tc.req.ctx()
			plugintest.AllocsPerRun(t, 200, func() { c.Reset(); plugintest.Run(&p, c) })
		})
	}
}
