package jwtauth

import (
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkVerify: one request through jwt-auth, its token verified with
// HS256 or RS256 (a 2048-bit key), in the header.
func BenchmarkVerify(b *testing.B) {
	all := testConsumers(b)
	for _, tc := range []struct{ name, tok string }{
		{"HS256", hs256(b, `,"exp":4102444800`)},
		{"RS256", sign(b, "RS256", keys.rsa, `{"alg":"RS256"}`, `{"key":"k-rs","exp":4102444800}`)},
		{"ES256", sign(b, "ES256", keys.ec, `{"alg":"ES256"}`, `{"key":"k-es","exp":4102444800}`)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, `{}`, all)
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
