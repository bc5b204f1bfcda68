package hmacauth

import (
	"testing"

	"coregate/plugins/plugintest"
)

// BenchmarkRewrite: one request through hmac-auth, by algorithm and
// outcome.
func BenchmarkRewrite(b *testing.B) {
	all := index(b, nil, jack)
	for _, tc := range []struct {
		name string
		c    *plugintest.Ctx
	}{
		{"sha256", good().ctx()},
		{"sha1", with(good(), func(s *signed) { s.algorithm = "hmac-sha1" }).ctx()},
		{"sha512", with(good(), func(s *signed) { s.algorithm = "hmac-sha512" }).ctx()},
		{"wrong secret", with(good(), func(s *signed) { s.secret = "x" }).ctx()},
		{"missing", plugintest.NewCtx("GET", "/hello")},
	} {
		b.Run(tc.name, func(b *testing.B) {
			p := build(b, `{}`, all)
			b.ReportAllocs()
			for b.Loop() {
				tc.c.Reset()
				plugintest.Run(&p, tc.c)
			}
		})
	}
}
