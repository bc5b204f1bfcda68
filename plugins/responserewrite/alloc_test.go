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
		`{"headers":{"set":{"X-Route":"r1"}}}`,
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

// TestFiltersAllocs: a literal pattern is found without allocating, so
// its filters allocate nothing once the buffers have grown; a regular
// expression's do, as regexp's FindAllSubmatchIndex allocates the list of
// matches and each match's indices (here two matches: three). That is
// bounded, so that a regression to a copy per piece shows. A literal's
// replacement as long as it is written in place, a longer one or one with
// a group into the slot's other buffer: none allocates.
func TestFiltersAllocs(t *testing.T) {
	for _, tc := range []struct {
		conf string
		max  float64
		want string
	}{
		{`{"filters":[{"regex":"world","replace":"there","scope":"global"}]}`, 0, "hello there, there"},
		{`{"filters":[{"regex":"wor+ld","replace":"there","scope":"global"}]}`, 3, "hello there, there"},
		{`{"filters":[{"regex":"world","replace":"planet","scope":"global"}]}`, 0, "hello planet, planet"},
		{`{"filters":[{"regex":"world","replace":"<$0>","scope":"global"}]}`, 0, "hello <world>, <world>"},
	} {
		p := build(t, tc.conf)
		c := plugintest.NewCtx("GET", "/hello")
		h, f, l := p.HeaderFilter[0], p.BodyFilter[0], p.Log[0]
		// A streamed filter sends each piece on: the body is what all
		// three calls return.
		a, b := []byte("hello "), []byte("world, world")
		var got []byte
		n := testing.AllocsPerRun(100, func() {
			c.Reset()
			h.HeaderFilter(c)
			got = append(got[:0], f.BodyFilter(c, a, false)...)
			got = append(got, f.BodyFilter(c, b, false)...)
			if got = append(got, f.BodyFilter(c, nil, true)...); string(got) != tc.want {
				t.Fatalf("body %q", got)
			}
			l.Log(c)
		})
		t.Logf("%s: %.1f allocations per response", tc.conf, n)
		if n > tc.max {
			t.Fatalf("%s: %.1f allocations per response, want at most %v", tc.conf, n, tc.max)
		}
	}
}
