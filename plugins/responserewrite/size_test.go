package responserewrite

import (
	"testing"
	"unsafe"

	"coregate/plugins/plugintest"
)

// TestRulesSize: a configuration without body or filters builds an
// instance that keeps its rules only, in 112 bytes (a size class), its
// vars behind a pointer nil without them; and that instance still runs
// its vars, status and headers.
func TestRulesSize(t *testing.T) {
	if n := unsafe.Sizeof(rules{}); n > 112 {
		t.Errorf("rules is %d bytes, want at most 112", n)
	}
	for _, tc := range []struct {
		conf   string
		status int
		header string
		vars   bool
	}{
		{`{"headers":{"set":{"X-Route":"/r/$uri"}}}`, 200, "/r//hello", false},
		{`{"status_code":403,"headers":{"X-Route":"$uri"},"vars":[["status","==",200]]}`, 403, "/hello", true},
		{`{"status_code":403,"headers":{"X-Route":"$uri"},"vars":[["status","==",500]]}`, 200, "", true},
	} {
		p := build(t, tc.conf)
		h, ok := p.Plugins[0].Instance.(headersOnly)
		if !ok {
			t.Fatalf("%s: built %T, want headersOnly", tc.conf, p.Plugins[0].Instance)
		}
		if (h.r.cond != nil) != tc.vars {
			t.Errorf("%s: vars kept %v, want %v", tc.conf, h.r.cond != nil, tc.vars)
		}
		c := plugintest.NewCtx("GET", "/hello")
		c.UpstreamStatus, c.UpstreamBody = 200, []byte("upstream body")
		plugintest.Run(p, c)
		if c.Status() != tc.status || string(c.ResponseHeader("X-Route")) != tc.header || string(c.Body) != "upstream body" {
			t.Errorf("%s: status %d, X-Route %q, body %q; want %d, %q, the upstream's", tc.conf, c.Status(), c.ResponseHeader("X-Route"), c.Body, tc.status, tc.header)
		}
	}
}

// TestSetLiteralSize: a configuration that sets one field to a literal
// and does nothing else, in either form of headers, builds a setLiteral
// of at most 32 bytes, a size class, which sets that field and
// leaves the status and the body; one with anything more (a variable, a
// second field, a status, vars, a remove) builds the rules.
func TestSetLiteralSize(t *testing.T) {
	if n := unsafe.Sizeof(setLiteral{}); n > 32 {
		t.Errorf("setLiteral is %d bytes, want at most 32", n)
	}
	for _, tc := range []struct {
		conf   string
		lit    bool
		header string
	}{
		{`{"headers":{"set":{"X-Route":"r1"}}}`, true, "r1"},
		{`{"headers":{"X-Route":"r2"}}`, true, "r2"},
		{`{"headers":{"set":{"X-Route":7}}}`, true, "7"},
		{`{"headers":{"set":{"X-Route":"\\$uri"}}}`, false, "\\$uri"},
		{`{"headers":{"set":{"X-Route":"$uri"}}}`, false, "/hello"},
		{`{"headers":{"set":{"X-Route":"r3","X-B":"b"}}}`, false, "r3"},
		{`{"status_code":201,"headers":{"set":{"X-Route":"r4"}}}`, false, "r4"},
		{`{"headers":{"set":{"X-Route":"r5"},"remove":["Server"]}}`, false, "r5"},
		{`{"vars":[["status","==",200]],"headers":{"set":{"X-Route":"r6"}}}`, false, "r6"},
	} {
		p := build(t, tc.conf)
		_, lit := p.Plugins[0].Instance.(*setLiteral)
		if lit != tc.lit {
			t.Errorf("%s: built %T, setLiteral %v, want %v", tc.conf, p.Plugins[0].Instance, lit, tc.lit)
		}
		c := plugintest.NewCtx("GET", "/hello").WithResponseHeader("X-Route", "upstream")
		c.UpstreamStatus, c.UpstreamBody = 200, []byte("upstream body")
		plugintest.Run(p, c)
		if string(c.ResponseHeader("X-Route")) != tc.header || string(c.Body) != "upstream body" {
			t.Errorf("%s: X-Route %q, body %q; want %q, the upstream's", tc.conf, c.ResponseHeader("X-Route"), c.Body, tc.header)
		}
	}
}
