//go:build !race

package jwtauth

import (
	"fmt"
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocRewrite: jwt-auth's rewrite phase allocates nothing with an
// HMAC consumer, whichever way the request goes, the token taken from the
// cache (a request repeated: every run after the first) or verified (the
// cache off).
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
		for _, cached := range []bool{true, false} {
			name := tc.name
			if !cached {
				name += ", uncached"
			}
			t.Run(name, func(t *testing.T) {
				p := build(t, tc.conf, all)
				in := instanceOf(t, &p)
				in.noCache = !cached
				plugintest.AllocsPerRun(t, 200, func() { tc.req.Reset(); plugintest.Run(&p, tc.req) })
				if h, _ := lookups(in); cached && tc.req.Consumer() != nil && tc.req.Consumer().Username != "anonymous" && h == 0 {
					t.Fatal("no token was taken from the cache")
				}
			})
		}
	}
}

// TestAllocCacheHitRS256: an RS256 token taken from the cache allocates
// nothing (verified, it allocates in crypto/rsa: TestAllocRS256).
func TestAllocCacheHitRS256(t *testing.T) {
	p := build(t, `{}`, testConsumers(t))
	c := request("/hello", "Authorization", sign(t, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-rs"}`))
	plugintest.AllocsPerRun(t, 100, func() { c.Reset(); plugintest.Run(&p, c) })
	if h, _ := lookups(instanceOf(t, &p)); c.Consumer() == nil || h == 0 {
		t.Fatalf("not taken from the cache: %d hits, %s", h, c.Body)
	}
}

// TestAllocCacheMiss: tokens that verify, more of them than the cache
// holds, in turn, so that most requests miss, verify and take the place
// of another token: once the entries' buffers have held tokens of their
// length, that allocates nothing.
func TestAllocCacheMiss(t *testing.T) {
	p := build(t, `{}`, testConsumers(t))
	in := instanceOf(t, &p)
	reqs := make([]*plugintest.Ctx, 4*cacheSets*cacheWays)
	for i := range reqs {
		reqs[i] = request("/hello", "Authorization", hs256(t, fmt.Sprintf(`,"n":%d`, 1000+i)))
	}
	i := 0
	next := func() {
		c := reqs[i%len(reqs)]
		i++
		c.Reset()
		plugintest.Run(&p, c)
		if c.Consumer() == nil {
			t.Fatalf("refused: %s", c.Body)
		}
	}
	for range 2 * len(reqs) {
		next()
	}
	h0, m0 := lookups(in)
	plugintest.AllocsPerRun(t, 2*len(reqs), next)
	h, m := lookups(in)
	if m-m0 < 3*(h-h0) {
		t.Fatalf("%d hits, %d misses: the requests did not miss", h-h0, m-m0)
	}
}

// TestAllocRS256 measures what an RS256 verification allocates (inside
// crypto/rsa, the cache off): it is reported, and bounded so that a regression shows.
func TestAllocRS256(t *testing.T) {
	all := testConsumers(t)
	p := build(t, `{}`, all)
	instanceOf(t, &p).noCache = true
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
