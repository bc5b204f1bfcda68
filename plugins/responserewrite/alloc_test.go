//go:build !race

package responserewrite

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocs: header_filter and body_filter allocate nothing for the
// status, the headers in either form, vars and a new body.
func TestAllocs(t *testing.T) {
	for _, conf := range []string{
		`{"status_code":403}`,
		`{"headers":{"X-A":"1","X-B":"$remote_addr"}}`,
		`{"headers":{"add":["X-A: $uri"],"set":{"X-B":2},"remove":["Server"]}}`,
		`{"body":"new body","status_code":200,"headers":{"X-A":"1"}}`,
		`{"body":"SGVsbG8K","body_base64":true}`,
		`{"vars":[["status","==",500],["arg_a","~~","^x"]],"body":"hidden"}`,
	} {
		t.Log(conf)
		p := build(t, conf)
		c := plugintest.NewCtx("GET", "/hello?a=xy").WithResponseHeader("Server", "up")
		c.UpstreamStatus, c.UpstreamBody = 500, []byte("upstream body")
		plugintest.AllocsPerRun(t, 100, func() {
			c.Reset()
			plugintest.Run(p, c)
		})
		if len(c.Body) == 0 {
			t.Fatalf("%s: no body", conf)
		}
	}
}

// TestFiltersAllocs measures the filters' allocations per response,
// which are not zero: regexp's FindAllSubmatchIndex allocates the list of
// matches and each match's indices (here two matches: three). It bounds
// them, so that a regression to a copy per piece shows.
func TestFiltersAllocs(t *testing.T) {
	p := build(t, `{"filters":[{"regex":"world","replace":"there","scope":"global"}]}`)
	c := plugintest.NewCtx("GET", "/hello")
	h, f, l := p.HeaderFilter[0], p.BodyFilter[0], p.Log[0]
	a, b := []byte("hello "), []byte("world, world")
	n := testing.AllocsPerRun(100, func() {
		c.Reset()
		h.HeaderFilter(c)
		f.BodyFilter(c, a, false)
		f.BodyFilter(c, b, false)
		if got := f.BodyFilter(c, nil, true); string(got) != "hello there, there" {
			t.Fatalf("body %q", got)
		}
		l.Log(c)
	})
	t.Logf("filters: %.1f allocations per response", n)
	if n > 3 {
		t.Fatalf("filters: %.1f allocations per response, want at most 3", n)
	}
}
