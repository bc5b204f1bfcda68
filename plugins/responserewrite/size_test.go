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
		{`{"headers":{"set":{"X-Route":"/r/1"}}}`, 200, "/r/1", false},
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
