package echo

import (
	"encoding/json"
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t *testing.T, conf string) *plugins.Phases {
	t.Helper()
	if err := plugins.Check(Name, json.RawMessage(conf)); err != nil {
		t.Fatalf("%s: %v", conf, err)
	}
	ph, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, plugins.NewLocalEnv())
	if err != nil {
		t.Fatal(err)
	}
	return &ph
}

// TestCheck: APISIX's refusals (t/plugin/echo.t tests 1 and 2), and the
// header values echo.lua's header_filter gives up on.
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin echo err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"before_body":"body before","body":"body to attach","after_body":"body to attach"}`, ""},
		{`{"after_body":"x","headers":{"Location":"https://www.iresty.com","X-N":3}}`, ""},
		{`{"before_body":"body before","body":"body to attach","after_body":10}`,
			prefix + `property "after_body" validation failed: wrong type: expected string, got number`},
		{`{}`, prefix + `expect object to have at least 1 properties`},
		{`{"headers":{"X-A":"a"}}`, prefix},
		{`{"body":"x","headers":{}}`, prefix + `property "headers" validation failed`},
		{`{"body":"x","headers":{"X-A":true}}`, prefix + `invalid type as header value`},
		{`{"body":"x","headers":{"":"a"}}`, prefix + `invalid field length in header`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q…", tc.conf, err, tc.err)
		}
	}
}

// TestEcho: APISIX's tests 4 and 6: body replaces the upstream's,
// between before_body and after_body; before_body alone goes before it;
// the headers are set; in header_filter and body_filter at APISIX's
// priority.
func TestEcho(t *testing.T) {
	p := build(t, `{"before_body":"before the body modification ","body":"hello upstream",`+
		`"after_body":" after the body modification.","headers":{"Location":"https://www.iresty.com","Authorization":"userpass","X-N":1.5}}`)
	if hf, bf := p.Names(plugins.HeaderFilter), p.Names(plugins.BodyFilter); len(hf) != 1 || hf[0] != Name || len(bf) != 1 || bf[0] != Name {
		t.Fatalf("phases: header_filter %v, body_filter %v", hf, bf)
	}
	if e, _, _ := plugins.Lookup(Name); e.Priority != 412 {
		t.Fatalf("priority %d", e.Priority)
	}
	c := plugintest.NewCtx("GET", "/hello")
	c.UpstreamBody = []byte("hello world\n")
	plugintest.Run(p, c)
	if string(c.Body) != "before the body modification hello upstream after the body modification." {
		t.Fatalf("body %q", c.Body)
	}
	for name, want := range map[string]string{"Location": "https://www.iresty.com", "Authorization": "userpass", "X-N": "1.5"} {
		if got := string(c.ResponseHeader(name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	c = plugintest.NewCtx("GET", "/hello")
	c.UpstreamBody = []byte("hello world\n")
	plugintest.Run(build(t, `{"before_body":"before the body modification ","headers":{"Location":"https://www.iresty.com"}}`), c)
	if string(c.Body) != "before the body modification hello world\n" || string(c.ResponseHeader("Location")) != "https://www.iresty.com" {
		t.Fatalf("before_body: %q, Location %q", c.Body, c.ResponseHeader("Location"))
	}
}

// TestPieces: a body in pieces, as the worker hands an upstream's over
// (then an empty last piece): before_body goes before the first only,
// after_body after the last; body is the whole answer, the pieces after
// its first dropped (APISIX's tests 9 and 11, chunked upstream); each
// request starts over.
func TestPieces(t *testing.T) {
	for _, tc := range []struct{ conf, want string }{
		{`{"before_body":"<","after_body":">"}`, "<abc>"},
		{`{"before_body":"<"}`, "<abc"},
		{`{"after_body":">"}`, "abc>"},
		{`{"body":"hello upstream"}`, "hello upstream"},
		{`{"body":"hello upstream","before_body":"<","after_body":">"}`, "<hello upstream>"},
		{`{"body":""}`, ""},
	} {
		p := build(t, tc.conf)
		f := p.BodyFilter[0]
		for range 2 {
			c := plugintest.NewCtx("GET", "/hello")
			var got []byte
			for _, piece := range []string{"a", "b", "c"} {
				got = append(got, f.BodyFilter(c, []byte(piece), false)...)
			}
			got = append(got, f.BodyFilter(c, nil, true)...)
			if string(got) != tc.want {
				t.Errorf("%s: %q, want %q", tc.conf, got, tc.want)
			}
		}
	}
}
