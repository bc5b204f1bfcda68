package jwtauth

import (
	"fmt"
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkVerify: one request through jwt-auth, its token verified with
// HS256, RS256 (a 2048-bit key) or ES256, in the header, the token cache
// off (BenchmarkCacheHit has it on).
func BenchmarkVerify(b *testing.B) {
	all := testConsumers(b)
	for _, tc := range []struct{ name, tok string }{
		{"HS256", hs256(b, `,"exp":4102444800`)},
		{"RS256", sign(b, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-rs","exp":4102444800}`)},
		{"ES256", sign(b, "ES256", keys.ec, `{"alg":"ES256"}`, `{"key":"k-es","exp":4102444800}`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, `{}`, all)
			instanceOf(b, &p).noCache = true
			c := request("/hello", "Authorization", "Bearer "+tc.tok)
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(&p, c)
			}
			if c.Consumer() == nil {
				b.Fatalf("refused: %s", c.Body)
			}
		})
	}
}

// BenchmarkCacheHit: BenchmarkVerify's requests, their tokens taken from
// the instance's cache (every request after the first).
func BenchmarkCacheHit(b *testing.B) {
	all := testConsumers(b)
	for _, tc := range []struct{ name, tok string }{
		{"HS256", hs256(b, `,"exp":4102444800`)},
		{"RS256", sign(b, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-rs","exp":4102444800}`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, `{}`, all)
			c := request("/hello", "Authorization", "Bearer "+tc.tok)
			b.ReportAllocs()
			for b.Loop() {
				c.Reset()
				plugintest.Run(&p, c)
			}
			if h, _ := lookups(instanceOf(b, &p)); c.Consumer() == nil || h == 0 {
				b.Fatalf("not from the cache: %d hits, %s", h, c.Body)
			}
		})
	}
}

// BenchmarkCacheMiss: HS256 tokens, four times as many as the cache holds,
// in turn: each request misses, is verified, and its token takes the
// place of another (BenchmarkVerify/HS256 with the cache's cost added).
func BenchmarkCacheMiss(b *testing.B) {
	p := build(b, `{}`, testConsumers(b))
	reqs := make([]*plugintest.Ctx, 4*cacheSets*cacheWays)
	for i := range reqs {
		reqs[i] = request("/hello", "Authorization", "Bearer "+hs256(b, fmt.Sprintf(`,"exp":%d`, 4102444800+i)))
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		c := reqs[i%len(reqs)]
		i++
		c.Reset()
		plugintest.Run(&p, c)
	}
}
