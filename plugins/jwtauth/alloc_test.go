//go:build !race

package jwtauth

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocRewrite: jwt-auth's rewrite phase allocates nothing with an
// HMAC consumer, whichever way the request goes.
func TestAllocRewrite(t *testing.T) {
	all := testConsumers(t)
	valid := hs256(t, `,"exp":4102444800,"nbf":1`)
	for _, tc := range []struct {
		name, conf string
		req        *plugintest.Ctx
	}{
		{"header", `{}`, request("/hello", "Authorization", "Bearer "+valid)},
		{"header hidden", `{"hide_credentials":true}`, request("/hello", "Authorization", "Bearer "+valid)},
		{"query hidden", `{"hide_credentials":true}`, request("/hello?a=1&jwt=" + valid)},
		{"cookie hidden", `{"hide_credentials":true}`, request("/hello", "Cookie", "a=1; jwt="+valid+"; b=2")},
		{"HS512", `{}`, request("/hello?jwt=" + sign(t, "HS512", "s", `{"alg":"HS512"}`, `{"key":"k-hs512"}`))},
		{"escaped claims", `{}`, request("/hello?jwt=" + sign(t, "HS256", "my-secret-key", `{"\u0061lg":"HS256"}`, `{"k\u0065y":"user\u002dkey"}`))},
		{"missing", `{}`, request("/hello")},
		{"invalid", `{}`, request("/hello?jwt=x.y.z")},
		{"wrong signature", `{}`, request("/hello?jwt=" + sign(t, "HS256", "other", `{"alg":"HS256"}`, `{"key":"user-key"}`))},
		{"anonymous", `{"anonymous_consumer":"anonymous"}`, request("/hello")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, all)
			plugintest.AllocsPerRun(t, 200, func() { tc.req.Reset(); plugintest.Run(&p, tc.req) })
		})
	}
}

// TestAllocRS256 measures what an RS256 verification allocates (inside
// crypto/rsa): it is reported, and bounded so that a regression shows.
func TestAllocRS256(t *testing.T) {
	all := testConsumers(t)
	p := build(t, `{}`, all)
	c := request("/hello?jwt=" + sign(t, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-rs"}`))
	n := testing.AllocsPerRun(100, func() { c.Reset(); plugintest.Run(&p, c) })
	if c.Consumer() == nil {
		t.Fatalf("RS256 token refused: %s", c.Body)
	}
	t.Logf("RS256 (2048-bit key): %.0f allocations per request, in crypto/rsa", n)
	if n > 40 {
		t.Errorf("RS256: %.0f allocations per request", n)
	}
}
