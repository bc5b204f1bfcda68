package refererrestriction

import (
	"encoding/json"
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// TestCheck: APISIX's refusals (t/plugin/referer-restriction.t), with its
// messages.
func TestCheck(t *testing.T) {
	const pre = "failed to check the configuration of plugin referer-restriction err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"whitelist":["*.xx.com","yy.com"]}`, ""},
		{`{"blacklist":["*"],"bypass_missing":true,"message":"Your referer host is deny"}`, ""},
		{`{"whitelist":["b@d.com"]}`, pre + `property "whitelist" validation failed: failed to validate item 1: failed to match pattern`},
		{`{"whitelist":["xx.com"],"blacklist":["yy.com"]}`, pre + "value should match only one schema, but matches both schemas 1 and 2"},
		{`{}`, pre + "value should match only one schema, but matches none"},
		{`{"blacklist":[]}`, pre + `property "blacklist" validation failed: expect array to have at least 1 items`},
		{`{"blacklist":["x.com"],"message":""}`, pre + `property "message" validation failed: string too short, expected at least 1, got 0`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.conf, err, tc.err)
		}
	}
}

// TestRestrict: APISIX's cases: exact hosts and "*" suffixes, a missing
// or malformed Referer, bypass_missing, the message.
func TestRestrict(t *testing.T) {
	const deny = `{"message":"Your referer host is not allowed"}` + "\n"
	const white = `{"whitelist":["*.xx.com","yy.com"]}`
	const black = `{"blacklist":["*.xx.com","yy.com"],"message":"Your referer host is deny"}`
	const denied = `{"message":"Your referer host is deny"}` + "\n"
	for _, tc := range []struct {
		conf    string
		referer *string
		body    string // "" when let through
	}{
		{white, ptr("http://www.xx.com"), ""},
		{white, ptr("https://yy.com/am"), ""},
		{white, ptr("https://yy.com:8443/am?x=1"), ""},
		{white, ptr("//yy.com"), ""},
		{white, ptr("https://www.yy.com/am"), deny},
		{white, ptr("https://xx.com/"), deny},
		{white, ptr("https://YY.com/"), deny},
		{white, nil, deny},
		{white, ptr("www.yy.com"), deny},
		{white, ptr("HTTP://yy.com"), deny},
		{white, ptr("ftp://yy.com"), deny},
		{white, ptr("http://"), deny},
		{`{"whitelist":["yy.com"],"bypass_missing":true}`, nil, ""},
		{`{"whitelist":["yy.com"],"bypass_missing":true}`, ptr("www.yy.com"), ""},
		{`{"whitelist":["yy.com"],"bypass_missing":true}`, ptr("http://zz.com"), deny},
		{`{"whitelist":["[::1]"]}`, ptr("http://[::1]:8080/x"), ""},
		{black, ptr("http://www.xx.com"), denied},
		{black, ptr("https://yy.com"), denied},
		{black, ptr("https://zz.com"), ""},
		{black, nil, denied},
		{`{"blacklist":["*"]}`, ptr("http://a.b"), deny},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello")
		ref := "no Referer"
		if tc.referer != nil {
			c.WithHeader("Referer", *tc.referer)
			ref = *tc.referer
		}
		plugintest.Run(p, c)
		switch {
		case tc.body == "" && !c.Upstream:
			t.Errorf("%s, %q: refused: %d %q", tc.conf, ref, c.ExitStatus(), c.Body)
		case tc.body != "" && (c.ExitStatus() != 403 || string(c.Body) != tc.body):
			t.Errorf("%s, %q: %d %q, want 403 %q", tc.conf, ref, c.ExitStatus(), c.Body, tc.body)
		}
	}
}

func ptr(s string) *string { return &s }

// TestPhase: the access phase at APISIX's priority.
func TestPhase(t *testing.T) {
	p := build(t, `{"whitelist":["x.com"]}`)
	if got := p.Names(plugins.Access); len(got) != 1 || got[0] != Name {
		t.Fatalf("access phase: %v", got)
	}
	if e, _, _ := plugins.Lookup(Name); e.Priority != 2990 {
		t.Fatalf("priority %d", e.Priority)
	}
}
