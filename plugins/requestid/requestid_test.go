package requestid

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// TestCheck: the schema's refusals (request-id.t TESTs 2, 12, 18;
// request-id2.t TEST 1) and the field name.
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin request-id err: "
	for _, tc := range []struct{ conf, err string }{
		{`{}`, ""},
		{`{"header_name":"X-Trace","include_in_response":false,"algorithm":"nanoid"}`, ""},
		{`{"algorithm":"range_id","range_id":{"length":6,"char_set":"abcdef"}}`, ""},
		{`{"algorithm":"range_id","range_id":{}}`, ""},
		{`{"algorithm":"ksuid"}`, ""},
		{`{"algorithm":"uuidv7"}`, ""},
		{`{"include_in_response":"bad_type"}`, prefix + `property "include_in_response" validation failed`},
		{`{"algorithm":"bad_algorithm"}`, prefix + `property "algorithm" validation failed`},
		{`{"algorithm":"range_id","range_id":{"length":5}}`, prefix + `property "range_id" validation failed`},
		{`{"algorithm":"range_id","range_id":{"char_set":"abc"}}`, prefix + `property "range_id" validation failed`},
		{`{"algorithm":"range_id","range_id":{"length":100000}}`, prefix + "invalid range_id.length 100000"},
		{`{"header_name":"X Bad"}`, prefix + `invalid header_name "X Bad"`},
		{`{"header_name":""}`, prefix + `invalid header_name ""`},
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

// The forms of the ids (request-id.t TESTs 20, 23, 28; request-id2.t;
// request-id3.t).
var (
	uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	uuidV7 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	nanoid = regexp.MustCompile(`^[-_0-9a-zA-Z]{21}$`)
	ksuid  = regexp.MustCompile(`^[0-9a-zA-Z]{27}$`)
)

// TestIDs: each algorithm's id, in the request going upstream and the
// same in the response, different from one request to the next.
func TestIDs(t *testing.T) {
	for _, tc := range []struct {
		conf, header string
		form         *regexp.Regexp
	}{
		{`{}`, "X-Request-Id", uuidV4},
		{`{"algorithm":"uuid","header_name":"Custom-Header-Name"}`, "Custom-Header-Name", uuidV4},
		{`{"algorithm":"uuidv7"}`, "X-Request-Id", uuidV7},
		{`{"algorithm":"nanoid"}`, "X-Request-Id", nanoid},
		{`{"algorithm":"ksuid"}`, "X-Request-Id", ksuid},
		{`{"algorithm":"range_id"}`, "X-Request-Id", regexp.MustCompile(`^[a-zA-Z0-9]{16}$`)},
		{`{"algorithm":"range_id","range_id":{"length":40,"char_set":"abcdef"}}`, "X-Request-Id", regexp.MustCompile(`^[a-f]{40}$`)},
	} {
		p := build(t, tc.conf)
		seen := map[string]bool{}
		for range 200 {
			c := plugintest.NewCtx("GET", "/hello")
			plugintest.Run(p, c)
			up, resp := string(c.UpstreamHeader(tc.header)), string(c.ResponseHeader(tc.header))
			if !tc.form.MatchString(up) || resp != up {
				t.Fatalf("%s: upstream %q, response %q", tc.conf, up, resp)
			}
			if seen[up] {
				t.Fatalf("%s: %q twice", tc.conf, up)
			}
			seen[up] = true
		}
	}
}

// TestInterleaved: requests whose phases interleave on one instance each
// get their own id back (the id is kept with the request, not the
// instance).
func TestInterleaved(t *testing.T) {
	for _, alg := range []string{"uuid", "uuidv7", "nanoid", "ksuid", "range_id"} {
		p := build(t, `{"algorithm":"`+alg+`"}`)
		a, b := plugintest.NewCtx("GET", "/a"), plugintest.NewCtx("GET", "/b")
		p.Rewrite[0].Rewrite(a)
		p.Rewrite[0].Rewrite(b)
		p.HeaderFilter[0].HeaderFilter(a)
		p.HeaderFilter[0].HeaderFilter(b)
		for _, c := range []*plugintest.Ctx{a, b} {
			if up, resp := c.UpstreamHeader("X-Request-Id"), c.ResponseHeader("X-Request-Id"); len(up) == 0 || string(up) != string(resp) {
				t.Errorf("%s: upstream %q, response %q", alg, up, resp)
			}
		}
		if string(a.UpstreamHeader("X-Request-Id")) == string(b.UpstreamHeader("X-Request-Id")) {
			t.Errorf("%s: one id for two requests", alg)
		}
	}
}

// TestKept: the client's id is kept, and echoed (request-id.t TEST 14);
// an empty one is replaced (TEST 16); the upstream's response header
// wins over the request's id; include_in_response false sets none in the
// response (TEST 9); a plugin's answer gets the id too.
func TestKept(t *testing.T) {
	p := build(t, `{}`)
	c := plugintest.NewCtx("GET", "/").WithHeader("X-Request-Id", "123")
	plugintest.Run(p, c)
	if string(c.UpstreamHeader("X-Request-Id")) != "123" || string(c.ResponseHeader("X-Request-Id")) != "123" {
		t.Errorf("the client's id: upstream %q, response %q", c.UpstreamHeader("X-Request-Id"), c.ResponseHeader("X-Request-Id"))
	}
	c = plugintest.NewCtx("GET", "/").WithHeader("X-Request-Id", "")
	plugintest.Run(p, c)
	if id := c.UpstreamHeader("X-Request-Id"); !uuidV4.Match(id) || string(c.ResponseHeader("X-Request-Id")) != string(id) {
		t.Errorf("an empty id: upstream %q, response %q", id, c.ResponseHeader("X-Request-Id"))
	}
	c = plugintest.NewCtx("GET", "/").WithResponseHeader("x-request-id", "from-upstream")
	plugintest.Run(p, c)
	if !uuidV4.Match(c.UpstreamHeader("X-Request-Id")) || string(c.ResponseHeader("X-Request-Id")) != "from-upstream" {
		t.Errorf("the upstream's id: upstream %q, response %q", c.UpstreamHeader("X-Request-Id"), c.ResponseHeader("X-Request-Id"))
	}
	c = plugintest.NewCtx("GET", "/")
	plugintest.Run(build(t, `{"include_in_response":false}`), c)
	if !uuidV4.Match(c.UpstreamHeader("X-Request-Id")) || c.ResponseHeader("X-Request-Id") != nil {
		t.Errorf("include_in_response false: upstream %q, response %q", c.UpstreamHeader("X-Request-Id"), c.ResponseHeader("X-Request-Id"))
	}
	c = plugintest.NewCtx("GET", "/")
	p.Rewrite[0].Rewrite(c)
	c.Exit(403, nil) // a later plugin's answer
	p.HeaderFilter[0].HeaderFilter(c)
	if !uuidV4.Match(c.ResponseHeader("X-Request-Id")) || string(c.ResponseHeader("X-Request-Id")) != string(c.UpstreamHeader("X-Request-Id")) {
		t.Errorf("a plugin's answer: response %q, request %q", c.ResponseHeader("X-Request-Id"), c.UpstreamHeader("X-Request-Id"))
	}
}

// TestUUIDv7Order: uuidv7 ids sort as they were made, within one
// millisecond (the counter), across milliseconds, and when the clock goes
// back (request-id.t TESTs 22, 27).
func TestUUIDv7Order(t *testing.T) {
	in := &instance{alg: algUUIDv7, id: make([]byte, 36)}
	prev := ""
	for i, ms := range []int64{1000, 1000, 1000, 1001, 999, 1001, 2000} {
		for range 100 {
			w := in.generate(ms * 1e6)
			id := string(in.format(&w))
			if !uuidV7.MatchString(id) || id <= prev {
				t.Fatalf("step %d: %q after %q", i, id, prev)
			}
			prev = id
		}
	}
	// Past the counter's end, the next millisecond.
	in.seq = 0x3ffff
	w := in.generate(2000 * 1e6)
	if id := string(in.format(&w)); id <= prev || in.last != 2001 {
		t.Fatalf("past the counter: %q after %q, ms %d", id, prev, in.last)
	}
	if got := string(in.format(&words{0x0123456789ab7abc, 0xbfeeddccbbaa9988})); got != "01234567-89ab-7abc-bfee-ddccbbaa9988" {
		t.Fatalf("format: %q", got)
	}
}

// TestKSUID: the base-62 form of a known KSUID (segment.io's example,
// 0ujtsYcgvSTl8PAuAdqWYSMnLOv: time 107608047, payload
// b5a1cd34b5f99d1154fb6853345c9735).
func TestKSUID(t *testing.T) {
	in := &instance{alg: algKSUID, id: make([]byte, ksuidSize)}
	w := words{0xb5a1cd34b5f99d11, 0x54fb6853345c9735, 107608047}
	if got := string(in.format(&w)); got != "0ujtsYcgvSTl8PAuAdqWYSMnLOv" {
		t.Fatalf("%q", got)
	}
}
