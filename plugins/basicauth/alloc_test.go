//go:build !race

package basicauth

import (
	"encoding/json"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestAllocRewrite: basic-auth's rewrite phase allocates nothing,
// whichever way the request goes.
func TestAllocRewrite(t *testing.T) {
	all := index(t, []plugins.Credential{{Username: "owner", ID: "cred-1",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"cuser","password":"cpass"}`)}}},
		foo, anonymous, owner)
	for _, tc := range []struct {
		name, conf string
		hdrs       []string
	}{
		{"valid", `{}`, []string{"Authorization", "Basic " + b64("foo:bar")}},
		{"credential object hidden", `{"hide_credentials":true}`, []string{"Authorization", "Basic " + b64("cuser:cpass")}},
		{"missing", `{}`, nil},
		{"bad base64", `{}`, []string{"Authorization", "Basic aca_a"}},
		{"invalid password", `{}`, []string{"Authorization", "Basic " + b64("foo:nope")}},
		{"anonymous", `{"anonymous_consumer":"anonymous","hide_credentials":true}`, []string{"Authorization", "Basic " + b64("x:y")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, all)
			c := ctx(tc.hdrs...)
			plugintest.AllocsPerRun(t, 200, func() { c.Reset(); plugintest.Run(&p, c) })
		})
	}
}
