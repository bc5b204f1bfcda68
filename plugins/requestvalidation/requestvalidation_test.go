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
// 30, 31, 33), body_schema refused, and the header_schema keywords that
// judge the whole set of headers refused.
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
		{`{"body_schema":{}}`, `failed to check the configuration of plugin request-validation err: body_schema is not supported`},
		{`{"header_schema":{},"body_schema":{"type":"object"}}`, `body_schema is not supported`},
		{`{"header_schema":{"additionalProperties":false}}`, `header_schema: keyword "additionalProperties" is not supported`},
		{`{"header_schema":{"anyOf":[{"required":["a"]},{"required":["b"]}]}}`, `header_schema: keyword "anyOf" is not supported`},
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
