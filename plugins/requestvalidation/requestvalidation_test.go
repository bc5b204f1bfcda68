package requestvalidation

import (
	"encoding/json"
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) plugins.Phases {
	t.Helper()
	if err := plugins.Check(Name, json.RawMessage(conf)); err != nil {
		t.Fatal(err)
	}
	p, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, plugins.NewLocalEnv())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// payload is request-validation.t's header_schema (TESTs 6 and 22).
const payload = `{"header_schema":{"type":"object","required":["required_payload"],"properties":{
	"required_payload":{"type":"string"},
	"boolean_payload":{"type":"boolean"},
	"timeouts":{"type":"integer","minimum":1,"maximum":254,"default":3},
	"req_headers":{"type":"array","minItems":1,"items":{"type":"string"}}}}}`

// enumConf is TEST 35's, with and without its rejected_msg.
const enumConf = `{"header_schema":{"type":"object","properties":{"test":{"type":"string","enum":["a","b","c"]}},"required":["test"]}}`
const enumMsg = `{"header_schema":{"type":"object","properties":{"test":{"type":"string","enum":["a","b","c"]}},"required":["test"]},"rejected_msg":"customize reject message for header_schema.required"}`

// TestRewrite follows request-validation.t: headers the schema refuses
// are answered rejected_code with the validator's message or
// rejected_msg; the others go on.
func TestRewrite(t *testing.T) {
	for _, tc := range []struct {
		name    string
		conf    string
		headers []string // name, value, …
		status  int
		body    string
	}{
		{"required missing", payload, []string{"Content-Type", "application/json"}, 400, `property "required_payload" is required`},
		{"required present", payload, []string{"Content-Type", "application/json", "required_payload", "test payload"}, 200, ""},
		{"required, hyphen", payload, []string{"Required-Payload", "x"}, 200, ""},
		{"header is no integer", payload, []string{"required_payload", "x", "timeouts", "3"}, 400,
			`property "timeouts" validation failed: wrong type: expected integer, got string`},
		{"repeated header is an array", payload, []string{"required_payload", "x", "required_payload", "y"}, 400,
			`property "required_payload" validation failed: wrong type: expected string, got table`},
		{"array of strings", payload, []string{"required_payload", "x", "req_headers", "a", "req_headers", "b"}, 200, ""},

		{"enum missing", enumConf, nil, 400, `property "test" is required`},
		{"enum refused", enumConf, []string{"test", "abc"}, 400, `property "test" validation failed: matches none of the enum values`},
		{"enum allowed", enumConf, []string{"Test", "a"}, 200, ""},
		{"rejected_msg, missing", enumMsg, nil, 400, "customize reject message for header_schema.required"},
		{"rejected_msg, refused", enumMsg, []string{"test", "abc"}, 400, "customize reject message for header_schema.required"},
		{"rejected_msg, allowed", enumMsg, []string{"test", "b"}, 200, ""},
		{"rejected_code", `{"header_schema":{"required":["x-token"]},"rejected_code":401}`, nil, 401, `property "x-token" is required`},
		{"case of the schema's name", `{"header_schema":{"required":["X-Token"]}}`, []string{"x-token", "t"}, 200, ""},
		{"length", `{"header_schema":{"properties":{"x-id":{"type":"string","minLength":2,"maxLength":3}}}}`,
			[]string{"x-id", "abcd"}, 400, `property "x-id" validation failed: string too long, expected at most 3, got 4`},
		{"length within", `{"header_schema":{"properties":{"x-id":{"type":"string","minLength":2,"maxLength":3}}}}`,
			[]string{"x-id", "éé"}, 200, ""},
		{"pattern", `{"header_schema":{"properties":{"x-id":{"type":"string","pattern":"^[0-9]+$"}}}}`,
			[]string{"x-id", "12a"}, 400, `property "x-id" validation failed: failed to match pattern "^[0-9]+$" with "12a"`},
		{"pattern matched", `{"header_schema":{"properties":{"x-id":{"type":"string","pattern":"^[0-9]+$"}}}}`,
			[]string{"x-id", "12"}, 200, ""},
		{"absent, not required", `{"header_schema":{"properties":{"x-id":{"type":"string","enum":["a"]}}}}`, nil, 200, ""},
		{"not an object", `{"header_schema":{"type":"string"}}`, nil, 400, `wrong type: expected string, got table`},

		// Keywords on the whole set of headers.
		{"patternProperties", `{"header_schema":{"patternProperties":{"^x-":{"type":"string","maxLength":2}}}}`,
			[]string{"X-Long", "abc", "Other", "abcdef"}, 400, `failed to validate x-long (matching "^x-"): string too long, expected at most 2, got 3`},
		{"patternProperties passed", `{"header_schema":{"patternProperties":{"^x-":{"type":"string","maxLength":2}}}}`,
			[]string{"X-A", "ab", "Other", "abcdef"}, 200, ""},
		{"anyOf", `{"header_schema":{"anyOf":[{"required":["x-a"]},{"required":["x-b"]}]}}`, []string{"X-C", "1"}, 400,
			`object matches none of the required: ["x-a"] or ["x-b"]`},
		{"anyOf passed", `{"header_schema":{"anyOf":[{"required":["x-a"]},{"required":["x-b"]}]}}`, []string{"X-B", "1"}, 200, ""},
		{"maxProperties", `{"header_schema":{"maxProperties":2}}`, []string{"A", "1", "B", "2", "C", "3"}, 400, `expect object to have at most 2 properties`},
		{"additionalProperties", `{"header_schema":{"properties":{"X-Token":{"type":"string"}},"additionalProperties":false}}`,
			[]string{"x-token", "1"}, 200, ""},
		{"additionalProperties refused", `{"header_schema":{"properties":{"X-Token":{"type":"string"}},"additionalProperties":false}}`,
			[]string{"x-token", "1", "X-Other", "2"}, 400, `additional properties forbidden, found x-other`},
		{"repeated in the whole set", `{"header_schema":{"patternProperties":{"^x-":{"type":"string"}}}}`,
			[]string{"X-A", "1", "x-a", "2"}, 400, `failed to validate x-a (matching "^x-"): wrong type: expected string, got table`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf)
			c := plugintest.NewCtx("GET", "/opentracing")
			for i := 0; i < len(tc.headers); i += 2 {
				c.WithHeader(tc.headers[i], tc.headers[i+1])
			}
			plugintest.Run(&p, c)
			if c.Status() != tc.status || string(c.Body) != tc.body {
				t.Fatalf("%d %q, want %d %q", c.Status(), c.Body, tc.status, tc.body)
			}
			if c.Upstream != (tc.status == 200) {
				t.Fatalf("upstream %v at status %d", c.Upstream, tc.status)
			}
		})
	}
}

// TestSchema: APISIX's schema and messages (request-validation.t TESTs 2,
// 30, 31, 33).
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		conf string
		want string
	}{
		{`{"header_schema":{}}`, ""},
		{`{"header_schema":{"type":"object"}}`, ""},
		{`{"header_schema":{"type":"array"}}`, ""},
		{`{"header_schema":{"type":"object","properties":{"test":{"type":"string","enum":["a","b","c"]}}},"rejected_code":599,"rejected_msg":"x","max_req_body_size":1}`, ""},
		{`{}`, `failed to check the configuration of plugin request-validation err: object matches none of the required: ["header_schema"] or ["body_schema"]`},
		{`{"rejected_code":400}`, `object matches none of the required`},
		{`{"header_schema":[]}`, `property "header_schema" validation failed: wrong type: expected object, got table`},
		{`{"header_schema":{},"rejected_code":600}`, `property "rejected_code" validation failed: expected 600 to be at most 599`},
		{`{"header_schema":{},"rejected_code":199}`, `property "rejected_code" validation failed: expected 199 to be at least 200`},
		{`{"header_schema":{},"rejected_msg":""}`, `property "rejected_msg" validation failed: string too short, expected at least 1, got 0`},
		{`{"header_schema":{},"max_req_body_size":0}`, `property "max_req_body_size" validation failed: expected 0 to be at least 1`},
		{`{"header_schema":{"type":"test"}}`, `header_schema:`},
		{`{"header_schema":{"type":"string","properties":{"test":{"type":"string","enum":"test-enum"}}}}`, `header_schema:`},
		{`{"header_schema":{"type":"object","required":"test-required"}}`, `header_schema:`},
		{`{"body_schema":{}}`, ""},
		{`{"header_schema":{},"body_schema":{"type":"object","additionalProperties":false}}`, ""},
		{`{"body_schema":{"type":"test"}}`, `failed to check the configuration of plugin request-validation err: body_schema:`},
		{`{"body_schema":[]}`, `property "body_schema" validation failed: wrong type: expected object, got table`},
		{`{"header_schema":{"additionalProperties":false}}`, ""},
		{`{"header_schema":{"anyOf":[{"required":["a"]},{"required":["b"]}]}}`, ""},
	} {
		got := ""
		if err := plugins.Check(Name, json.RawMessage(tc.conf)); err != nil {
			got = err.Error()
		}
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("%s: %q, want %q", tc.conf, got, tc.want)
		}
	}
}

// bodyConf is request-validation.t's body_schema (TEST 39), with
// rejected_msg when msg.
func bodyConf(msg bool) string {
	c := `{"body_schema":{"type":"object","properties":{"test":{"type":"string","enum":["a","b","c"]},"n":{"type":"integer","maximum":10}},"required":["test"]}`
	if msg {
		c += `,"rejected_msg":"customize reject message for body_schema.required"`
	}
	return c + `}`
}

// TestBody follows request-validation.t's body_schema tests: JSON bodies
// and forms validated, with the validator's message or rejected_msg; no
// body, one over max_req_body_size and a repeated Content-Type refused;
// a JSON body two parsers could read differently refused.
func TestBody(t *testing.T) {
	const custom = "customize reject message for body_schema.required"
	form := "application/x-www-form-urlencoded"
	for _, tc := range []struct {
		name    string
		conf    string
		headers []string
		body    string
		status  int
		resp    string
	}{
		{"valid", bodyConf(false), nil, `{"test":"a"}`, 200, ""},
		{"enum", bodyConf(false), nil, `{"test":"abc"}`, 400, `property "test" validation failed: matches none of the enum values`},
		{"required", bodyConf(false), nil, `{"n":1}`, 400, `property "test" is required`},
		{"maximum", bodyConf(false), nil, `{"test":"a","n":11}`, 400, `property "n" validation failed: expected 11 to be at most 10`},
		{"custom, refused", bodyConf(true), nil, `{"test":"abc"}`, 400, custom},
		{"custom, no body", bodyConf(true), nil, "", 400, custom},
		{"no body", bodyConf(false), nil, "", 400, "page"},
		{"not JSON", bodyConf(false), nil, `{"test":`, 400, "unexpected end of JSON input"},
		{"not JSON, custom", bodyConf(true), nil, `test=a`, 400, custom},
		{"duplicate member", bodyConf(false), nil, `{"test":"a","test":"x"}`, 400, `duplicate member "test" in the body`},
		{"duplicate member, deep", bodyConf(false), nil, `{"test":"a","o":[{"k":1,"k":2}]}`, 400, `duplicate member "k" in the body`},
		{"invalid UTF-8", bodyConf(false), nil, "{\"test\":\"a\",\"x\":\"\xff\"}", 400, "invalid UTF-8 in the body"},
		{"form", bodyConf(false), []string{"Content-Type", form}, strings.Repeat("a=b&", 101) + "test=b", 200, ""},
		{"form, charset and case", bodyConf(false), []string{"Content-Type", "Application/X-WWW-Form-Urlencoded; charset=utf-8"}, "test=c", 200, ""},
		{"form refused", bodyConf(false), []string{"Content-Type", form}, "test=d", 400, `property "test" validation failed: matches none of the enum values`},
		{"form, repeated", bodyConf(false), []string{"Content-Type", form}, "test=a&test=b", 400,
			`property "test" validation failed: wrong type: expected string, got table`},
		{"form, integer", bodyConf(false), []string{"Content-Type", form}, "test=a&n=1", 400,
			`property "n" validation failed: wrong type: expected integer, got string`},
		{"duplicated Content-Type", `{"body_schema":{"type":"object"},"rejected_msg":"duplicated content-type"}`,
			[]string{"Content-Type", form, "Content-Type", "application/json"}, `{"required_payload":"hello"}`, 400, "duplicated content-type"},
		{"over max_req_body_size", `{"body_schema":{"type":"object"},"max_req_body_size":4}`, nil, `{"a":1}`, 400, "page"},
		{"within max_req_body_size", `{"body_schema":{"type":"object"},"max_req_body_size":7}`, nil, `{"a":1}`, 200, ""},
		{"headers first", `{"header_schema":{"required":["x-id"]},"body_schema":{"type":"object"}}`, nil, `{}`, 400, `property "x-id" is required`},
		{"headers and body", `{"header_schema":{"required":["x-id"]},"body_schema":{"type":"object"}}`, []string{"X-Id", "1"}, `{}`, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf)
			if p.BodyLimit() == 0 {
				t.Fatal("body_schema makes no BodyReader")
			}
			c := plugintest.NewCtx("POST", "/opentracing").WithBody(tc.body)
			if tc.body == "" {
				c.ReqBody = nil // as the worker gives a request without a body
			}
			for i := 0; i < len(tc.headers); i += 2 {
				c.WithHeader(tc.headers[i], tc.headers[i+1])
			}
			plugintest.Run(&p, c)
			want := tc.resp
			if want == "page" {
				want = ""
				if !c.ExitPage() {
					t.Errorf("not the gateway's page: %q", c.Body)
				}
			}
			if c.Status() != tc.status || want != "" && string(c.Body) != want {
				t.Fatalf("%d %q, want %d %q", c.Status(), c.Body, tc.status, want)
			}
			if c.Upstream != (tc.status == 200) {
				t.Fatalf("upstream %v at status %d", c.Upstream, tc.status)
			}
		})
	}
	if p := build(t, `{"header_schema":{}}`); p.BodyLimit() != 0 {
		t.Fatalf("header_schema alone reads the body: %d", p.BodyLimit())
	}
	if p := build(t, `{"body_schema":{}}`); p.BodyLimit() != 64<<20 {
		t.Fatalf("max_req_body_size's default: %d", p.BodyLimit())
	}
}
