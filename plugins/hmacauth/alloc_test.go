//go:build !race

package hmacauth

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocRewrite: hmac-auth's rewrite phase allocates nothing, whichever
// way the request goes.
func TestAllocRewrite(t *testing.T) {
	all := index(t, nil, jack, long, anonymous)
	for _, tc := range []struct {
		name, conf string
		req        *plugintest.Ctx
	}{
		{"valid sha256", `{}`, good().ctx()},
		{"valid sha1", `{}`, with(good(), func(s *signed) { s.algorithm = "hmac-sha1" }).ctx()},
		{"valid sha512, long secret", `{}`, with(good(), func(s *signed) { s.keyID, s.secret, s.algorithm = "long-key", longSecret, "hmac-sha512" }).ctx()},
		{"custom headers hidden", `{"hide_credentials":true,"signed_headers":["date","x-a"]}`, with(good(), func(s *signed) {
			s.headers = []string{"@request-target", "date", "x-a", "x_b"}
			s.extra = []string{"X-A", "1", "X-B", "2"}
		}).ctx()},
		{"wrong secret", `{}`, with(good(), func(s *signed) { s.secret = "x" }).ctx()},
		{"unknown key", `{}`, with(good(), func(s *signed) { s.keyID = "x" }).ctx()},
		{"clock skew", `{}`, with(good(), func(s *signed) { s.date = "Thu, 24 Sep 2020 06:39:52 GMT" }).ctx()},
		{"missing", `{}`, plugintest.NewCtx("GET", "/hello")},
		{"anonymous", `{"anonymous_consumer":"anonymous"}`, with(good(), func(s *signed) { s.secret = "x" }).ctx()},
		{"body digest", `{"validate_request_body":true}`, with(good(), func(s *signed) {
			s.method, s.extra = "POST", []string{"Digest", digestOf(`{"name": "world"}`)}
		}).ctx().WithBody(`{"name": "world"}`)},
		{"body digest wrong", `{"validate_request_body":true}`, with(good(), func(s *signed) {
			s.method, s.extra = "POST", []string{"Digest", digestOf("x")}
		}).ctx().WithBody(`{"name": "world"}`)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, all)
			plugintest.AllocsPerRun(t, 200, func() { tc.req.Reset(); plugintest.Run(&p, tc.req) })
		})
	}
}
