package uriblocker

import (
	"encoding/json"
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// TestCheck: APISIX's refusals (t/plugin/uri-blocker.t), with its
// messages.
func TestCheck(t *testing.T) {
	const pre = "failed to check the configuration of plugin uri-blocker err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"block_rules":["^a","^b"]}`, ""},
		{`{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))"],"rejected_code":404,"rejected_msg":"no","case_insensitive":true}`, ""},
		{`{"block_rules":[]}`, ""},
		{`{"block_rules":[".+("]}`, pre + `pcre_compile() failed: missing ) in ".+("`},
		{`{"block_rules":["^a","^b("]}`, pre + `pcre_compile() failed: missing ) in "^b("`},
		{`{"block_rules":["^a"],"rejected_msg":""}`, pre + `property "rejected_msg" validation failed: string too short, expected at least 1, got 0`},
		{`{"block_rules":["^a"],"rejected_msg":true}`, pre + `property "rejected_msg" validation failed: wrong type: expected string, got boolean`},
		{`{"block_rules":["^a"],"rejected_code":199}`, pre + `property "rejected_code" validation failed: expected 199 to be at least 200`},
		{`{"block_rules":["a","a"]}`, pre + `property "block_rules" validation failed: expected unique items but items 1 and 2 are equal`},
		{`{}`, pre + `property "block_rules" is required`},
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

// TestBlock: APISIX's cases: rules searched in the path and the query,
// joined, case-insensitive on demand; the status and the message.
func TestBlock(t *testing.T) {
	const multi = `{"block_rules":["aa","bb","c\\d+"]}`
	const sql = `{"block_rules":["select.+(from|limit)","(?:(union(.*?)select))"]}`
	for _, tc := range []struct {
		conf, target string
		status       int // 0: let through
		body         string
	}{
		{`{"block_rules":["aa"]}`, "/hello?aa=1", 403, ""},
		{`{"block_rules":["aa"]}`, "/hello?bb=2", 0, ""},
		{multi, "/hello?x=bb", 403, ""},
		{multi, "/hello?bb=2", 403, ""},
		{multi, "/hello?c1=2", 403, ""},
		{multi, "/hello?cc=2", 0, ""},
		{sql, "/hello?name=;select%20from%20sys", 403, ""},
		{sql, "/hello?name=;union%20select%20", 403, ""},
		{sql, "/hello?cc=2", 0, ""},
		{`{"block_rules":["aa"],"rejected_msg":"access is not allowed"}`, "/hello?aa=1", 403, `{"error_msg":"access is not allowed"}` + "\n"},
		{`{"block_rules":["AA"],"rejected_msg":"access is not allowed","case_insensitive":true}`, "/hello?aa=1", 403, `{"error_msg":"access is not allowed"}` + "\n"},
		{`{"block_rules":["AA"]}`, "/hello?aa=1", 0, ""},
		{`{"block_rules":["^/internal/"],"rejected_code":404}`, "/internal/x", 404, ""},
		{`{"block_rules":["^/internal/"]}`, "/public/internal/x", 0, ""},
		{`{"block_rules":["\\?$"]}`, "/a?", 0, ""},
		{`{"block_rules":[]}`, "/anything", 403, ""},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", tc.target)
		plugintest.Run(p, c)
		switch {
		case tc.status == 0 && !c.Upstream:
			t.Errorf("%s, %s: blocked: %d %q", tc.conf, tc.target, c.ExitStatus(), c.Body)
		case tc.status != 0 && (c.ExitStatus() != tc.status || string(c.Body) != tc.body):
			t.Errorf("%s, %s: %d %q, want %d %q", tc.conf, tc.target, c.ExitStatus(), c.Body, tc.status, tc.body)
		}
	}
}

// TestPhase: the rewrite phase at APISIX's priority.
func TestPhase(t *testing.T) {
	p := build(t, `{"block_rules":["x"]}`)
	if got := p.Names(plugins.Rewrite); len(got) != 1 || got[0] != Name {
		t.Fatalf("rewrite phase: %v", got)
	}
	if e, _, _ := plugins.Lookup(Name); e.Priority != 2900 {
		t.Fatalf("priority %d", e.Priority)
	}
}
