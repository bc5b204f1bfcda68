package uarestriction

import (
	"encoding/json"
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// TestCheck: APISIX's refusals (t/plugin/ua-restriction.t), with its
// messages.
func TestCheck(t *testing.T) {
	const pre = "failed to check the configuration of plugin ua-restriction err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"denylist":["my-bot1","(Baiduspider)/(\\d+)\\.(\\d+)"]}`, ""},
		{`{"allowlist":["my-bot1"],"bypass_missing":true,"message":"Do you want to do something bad?"}`, ""},
		{`{"denylist":["x"],"bypass_missing":"foo"}`, pre + `property "bypass_missing" validation failed: wrong type: expected boolean, got string`},
		{`{"allowlist":"my-bot1"}`, pre + `property "allowlist" validation failed: wrong type: expected array, got string`},
		{`{"denylist":100}`, pre + `property "denylist" validation failed: wrong type: expected array, got number`},
		{`{"denylist":["x"],"message":100}`, pre + `property "message" validation failed: wrong type: expected string, got number`},
		{`{"denylist":["x"],"message":""}`, pre + `property "message" validation failed: string too short, expected at least 1, got 0`},
		{`{"denylist":["x"],"message":"` + strings.Repeat("-1Aa#", 205) + `"}`, pre + `property "message" validation failed: string too long, expected at most 1024, got 1025`},
		{`{}`, pre + "value should match only one schema, but matches none"},
		{`{"allowlist":["a"],"denylist":["b"]}`, pre + "value should match only one schema, but matches both schemas 1 and 2"},
		{`{"denylist":["ok","(bad"]}`, pre + `pcre_compile() failed: missing ) in "(bad"`},
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

// TestRestrict: APISIX's cases: the lists, regular expressions searched
// anywhere in the trimmed value, a missing User-Agent, the message.
func TestRestrict(t *testing.T) {
	const deny = `{"message":"Not allowed"}` + "\n"
	const denyList = `{"denylist":["my-bot1","(Baiduspider)/(\\d+)\\.(\\d+)"]}`
	const allowList = `{"allowlist":["my-bot1","(Baiduspider)/(\\d+)\\.(\\d+)"]}`
	for _, tc := range []struct {
		conf string
		ua   *string
		body string // "" when let through
	}{
		{denyList, ptr("my-bot1"), deny},
		{denyList, ptr("  my-bot1 "), deny},
		{denyList, ptr("Baiduspider/3.0"), deny},
		{denyList, ptr("Mozilla Baiduspider/3.0 x"), deny},
		{denyList, ptr("foo/bar"), ""},
		{denyList, ptr(""), ""},
		{denyList, nil, deny},
		{allowList, ptr("my-bot1"), ""},
		{allowList, ptr("Baiduspider/3.0"), ""},
		{allowList, ptr("foo/bar"), deny},
		{allowList, nil, deny},
		{`{"allowlist":["my-bot1"],"bypass_missing":true}`, nil, ""},
		{`{"denylist":["my-bot1"],"bypass_missing":true}`, nil, ""},
		{`{"denylist":["my-bot1"],"bypass_missing":true}`, ptr("my-bot1"), deny},
		{`{"denylist":["^my-bot1$"],"message":"Do you want to do something bad?"}`, ptr("my-bot1"),
			`{"message":"Do you want to do something bad?"}` + "\n"},
		{`{"denylist":["^my-bot1$"]}`, ptr("MY-BOT1"), ""},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello")
		if tc.ua != nil {
			c.WithHeader("User-Agent", *tc.ua)
		}
		plugintest.Run(p, c)
		ua := "no User-Agent"
		if tc.ua != nil {
			ua = *tc.ua
		}
		switch {
		case tc.body == "" && !c.Upstream:
			t.Errorf("%s, %q: refused: %d %q", tc.conf, ua, c.ExitStatus(), c.Body)
		case tc.body != "" && (c.ExitStatus() != 403 || string(c.Body) != tc.body):
			t.Errorf("%s, %q: %d %q, want 403 %q", tc.conf, ua, c.ExitStatus(), c.Body, tc.body)
		}
	}
}

func ptr(s string) *string { return &s }

// TestSeveralUserAgents: every User-Agent value is read: APISIX's tests 8
// and 9 (a denylist refuses a request of which one value is denied,
// whichever its place) and 16 and 17 (an allowlist lets in one of which
// one value is allowed); a request none of whose values is denied passes.
func TestSeveralUserAgents(t *testing.T) {
	const denyList = `{"denylist":["my-bot1","(Baiduspider)/(\\d+)\\.(\\d+)"]}`
	const allowList = `{"allowlist":["my-bot1","(Baiduspider)/(\\d+)\\.(\\d+)"]}`
	for _, tc := range []struct {
		conf string
		uas  []string
		pass bool
	}{
		{denyList, []string{"my-bot1", "my-bot2"}, false},
		{denyList, []string{"my-bot2", "my-bot1"}, false},
		{denyList, []string{"foo", "Baiduspider/3.0"}, false},
		{denyList, []string{"foo", "bar"}, true},
		{denyList, []string{"my-bot1", "my-bot1"}, false},
		{allowList, []string{"foo/bar", "my-bot1"}, true},
		{allowList, []string{"my-bot1", "foo/bar"}, true},
		{allowList, []string{"foo/bar", "bar/foo"}, false},
		{allowList, []string{"", " my-bot1 "}, true},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello")
		for _, ua := range tc.uas {
			c.WithHeader("User-Agent", ua)
		}
		plugintest.Run(p, c)
		if c.Upstream != tc.pass || !tc.pass && c.ExitStatus() != 403 {
			t.Errorf("%s, %q: upstream %v, status %d; want pass %v", tc.conf, tc.uas, c.Upstream, c.ExitStatus(), tc.pass)
		}
	}
}

// TestPhase: the access phase at APISIX's priority.
func TestPhase(t *testing.T) {
	p := build(t, `{"denylist":["x"]}`)
	if got := p.Names(plugins.Access); len(got) != 1 || got[0] != Name {
		t.Fatalf("access phase: %v", got)
	}
	if e, _, _ := plugins.Lookup(Name); e.Priority != 2999 {
		t.Fatalf("priority %d", e.Priority)
	}
}
