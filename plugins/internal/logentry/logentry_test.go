package logentry

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/varexpr"
	"coregate/plugins/plugintest"
)

func compile(t *testing.T, raw string, top bool) Format {
	t.Helper()
	f, err := CompileFormat(json.RawMessage(raw), top)
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// TestAppendCustom: variables as strings or null, constants as written,
// objects nested down to five levels (deeper ones {}), route_id and
// service_id after, the configuration's own left out.
func TestAppendCustom(t *testing.T) {
	f := compile(t, `{"u":"$uri","x":"$http_x","no":"$http_none","c":"lit","n":1.5,"b":true,"arr":[1,"$host"],`+
		`"d1":{"d2":{"d3":{"d4":{"d5":{"d6":"$uri"}}}}},"route_id":"mine","service_id":"mine","st":"$status","bs":"$bytes_sent","rt":"$request_time"}`, true)
	c := plugintest.NewCtx("GET", "/p").WithHeader("X", `a"b`).WithVar("service_id", "s1")
	c.Figures = plugins.Exchange{RequestTime: 1234 * time.Millisecond, BytesSent: 42}
	c.Reset()
	plugintest.Run(&plugins.Phases{}, c)
	got := string(AppendCustom(nil, c, f, "no-matched"))
	want := `{"arr":[1,"$host"],"b":true,"bs":"42","c":"lit","d1":{"d2":{"d3":{"d4":{"d5":{}}}}},"n":1.5,"no":null,` +
		`"rt":"1.234","st":"200","u":"\/p","x":"a\"b","route_id":"1","service_id":"s1"}` // lua-cjson writes / as \/
	if got != want {
		t.Errorf("entry\n%s\nwant\n%s", got, want)
	}
	if got := string(AppendCustom(nil, plugintest.NewCtx("GET", "/").WithRoute(""), compile(t, `{}`, true), "no-matched")); got != `{"route_id":"no-matched"}` {
		t.Errorf("no route: %s", got)
	}
}

// TestAppendFullArgs: the querystring as ngx.req.get_uri_args reads it.
func TestAppendFullArgs(t *testing.T) {
	for q, want := range map[string]string{
		"a=1&a=2&a=3":   `{"a":["1","2","3"]}`,
		"k%20x=v%2By+z": `{"k x":"v+y z"}`,
		"&&=v&flag&e=":  `{"flag":true,"e":""}`,
		"bad=%zz%4":     `{"bad":"%zz%4"}`,
		"":              `{}`,
	} {
		var tmp []byte
		if got := string(appendArgs(nil, &tmp, []byte(q))); got != want {
			t.Errorf("%q: %s, want %s", q, got, want)
		}
	}
}

// TestAppendFull: the default entry parses, with log_format_extra's
// members added but none of the default ones replaced, and the route_id
// of a request no route matched.
func TestAppendFull(t *testing.T) {
	extra := DropDefaults(compile(t, `{"latency":"$host","mine":"$host"}`, false))
	c := plugintest.NewCtx("GET", "/a?b=1").WithHeader("Host", "h").WithRoute("")
	var tmp []byte
	var m map[string]any
	b := AppendFull(nil, &tmp, c, extra, "no-matched", nil, nil)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if m["mine"] != "h" || m["route_id"] != "no-matched" || m["service_id"] != "h" || m["latency"] != float64(0) || m["upstream_latency"] != nil {
		t.Errorf("entry %s", b)
	}
	if !strings.Contains(string(b), `"server":{"hostname":`) {
		t.Errorf("no server: %s", b)
	}
	if strings.Contains(string(b), `"body"`) {
		t.Errorf("a body without one: %s", b)
	}
}

// TestReqBody: include_req_body's body in request.body, cut to
// max_req_body_bytes, only where include_req_body_expr holds; none for a
// request without one or a logger without include_req_body.
func TestReqBody(t *testing.T) {
	expr, err := varexpr.Compile(json.RawMessage(`[["arg_log","==","yes"]]`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		r          *Body
		target     string
		body, want string // want "": no request.body
	}{
		{&Body{max: 524288}, "/a", `{"k":"v\"}` + "\n", `{"k":"v\"}` + "\n"},
		{&Body{max: 5}, "/a", "0123456789", "01234"},
		{&Body{max: 10}, "/a", "0123456789", "0123456789"},
		{&Body{max: 5}, "/a", "", ""},
		{&Body{}, "/a", "payload", ""},
		{&Body{expr: &expr, max: 100}, "/a?log=yes", "payload", "payload"},
		{&Body{expr: &expr, max: 100}, "/a?log=no", "payload", ""},
	} {
		c := plugintest.NewCtx("POST", tc.target)
		if tc.body != "" {
			c.WithBody(tc.body)
		}
		var tmp []byte
		b := AppendFull(nil, &tmp, c, nil, "", tc.r.Of(c), nil)
		var m struct {
			Request map[string]any `json:"request"`
		}
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("%s: %v", b, err)
		}
		got, ok := m.Request["body"]
		if tc.want == "" && ok || tc.want != "" && got != tc.want {
			t.Errorf("%+v %s %q: request.body %q (%v), want %q", tc.r, tc.target, tc.body, got, ok, tc.want)
		}
	}
	if l := (&Body{max: 100}).Limit(); l != 100 {
		t.Errorf("TeeLimit %d, want 100", l)
	}
	if l := (&Body{max: 2 << 20}).Limit(); l != 2<<20 {
		t.Errorf("TeeLimit %d, want %d", l, 2<<20)
	}
}

// TestAppendFullResponseHeaders: response.headers is the head the client
// got as ngx.resp.get_headers gives it: names in lower case, a repeated
// field's values in an array, between status and size as APISIX's
// get_full_log lists them; a field a plugin set replaces the upstream's.
func TestAppendFullResponseHeaders(t *testing.T) {
	c := plugintest.NewCtx("GET", "/").WithResponseHeader("Content-Type", "text/plain").
		WithResponseHeader("Set-Cookie", "a=1").WithResponseHeader("X-Up", "u").WithResponseHeader("set-cookie", "b=2")
	c.Reset()
	plugintest.Run(&plugins.Phases{}, c)
	c.SetResponseHeader("X-Up", []byte(`"q"`))
	var tmp []byte
	b := AppendFull(nil, &tmp, c, nil, "", nil, nil)
	want := `"response":{"status":200,"headers":{"content-type":"text\/plain","set-cookie":["a=1","b=2"],"x-up":"\"q\""},"size":0}`
	if !strings.Contains(string(b), want) {
		t.Errorf("entry\n%s\nwant it to hold\n%s", b, want)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("%s: %v", b, err)
	}
	if got := string(AppendFull(nil, &tmp, plugintest.NewCtx("GET", "/"), nil, "", nil, nil)); !strings.Contains(got, `"headers":{},"size"`) {
		t.Errorf("no response headers: %s", got)
	}
}

// TestBodies: NewReqBody and NewRespBody build the one Body type over the
// request's body and the response's: each reads its own, cut to its
// limit, where its expression holds; without include_*_body none. Only
// a request Body that includes the body makes the logger a
// plugins.BodyTee (WithReqBody), with max_req_body_bytes as its limit.
func TestBodies(t *testing.T) {
	c := plugintest.NewCtx("POST", "/a?log=yes").WithBody("0123456789").WithStatus(200)
	c.Body = []byte("abcdefghij")
	expr := json.RawMessage(`[["arg_log","==","yes"]]`)
	req, err := NewReqBody(true, expr, 4)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := NewRespBody(true, json.RawMessage(`[["status","==",200]]`), 6)
	if err != nil {
		t.Fatal(err)
	}
	if got := string(req.Of(c)); got != "0123" {
		t.Errorf("request body %q, want 0123", got)
	}
	if got := string(resp.Of(c)); got != "abcdef" {
		t.Errorf("response body %q, want abcdef", got)
	}
	if req.Limit() != 4 || resp.Limit() != 6 {
		t.Errorf("limits %d and %d, want 4 and 6", req.Limit(), resp.Limit())
	}
	off, err := NewReqBody(false, json.RawMessage(`not json`), 4)
	if err != nil || off.Of(c) != nil || off.Limit() != 0 {
		t.Errorf("without include_req_body: %v, %q, limit %d", err, off.Of(c), off.Limit())
	}
	if _, err := NewReqBody(true, json.RawMessage(`[["a"`), 4); err == nil {
		t.Error("include_req_body_expr that does not compile was taken")
	}
	if _, err := NewRespBody(false, json.RawMessage(`[["a"`), 4); err == nil || !strings.Contains(err.Error(), "'include_resp_body_expr'") {
		t.Errorf("include_resp_body_expr that does not compile: %v", err)
	}
	var l Logger = stubLogger{}
	if tee, ok := WithReqBody(l, &req).(plugins.BodyTee); !ok || tee.TeeLimit() != 4 {
		t.Errorf("with include_req_body: %T, want a BodyTee of limit 4", WithReqBody(l, &req))
	}
	if got := WithReqBody(l, &off); got != l {
		t.Errorf("without include_req_body: %T, want the logger itself", got)
	}
	if _, ok := WithReqBody(l, &req).(Logger); !ok {
		t.Error("the BodyTee is not the logger any more")
	}
}

type stubLogger struct{}

func (stubLogger) Log(plugins.Ctx)          {}
func (stubLogger) ReadsResponseHead() bool  { return true }
func (stubLogger) ResponseBodyLimit() int64 { return 0 }
