package mocking

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t *testing.T, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// TestCheck: APISIX's refusals.
func TestCheck(t *testing.T) {
	for _, tc := range []struct{ conf, err string }{
		{`{"response_example":"x"}`, ""},
		{`{"response_schema":{"type":"object"}}`, ""},
		{`{"response_example":"x","content_type":"application/json; charset=utf-8"}`, ""},
		{`{"delay":1}`, "failed to check the configuration of plugin mocking err: "},
		{`{"response_example":"x","content_type":"image/png"}`, "failed to check the configuration of plugin mocking err: unsupported content type!"},
		{`{"response_example":"x","response_status":99}`, "failed to check the configuration of plugin mocking err: property \"response_status\" validation failed"},
		{`{"response_example":"x","response_headers":{}}`, "failed to check the configuration of plugin mocking err: property \"response_headers\" validation failed"},
		{`{"response_example":"x","response_headers":{"a":true}}`, "failed to check the configuration of plugin mocking err: property \"response_headers\" validation failed"},
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

// TestExample: the body as written, with variables resolved (an unset one
// empty, a default, an escaped '$' kept), the content type, the mock
// header and response_headers, in the access phase; the upstream is never
// reached.
func TestExample(t *testing.T) {
	p := build(t, `{"response_status":201,"content_type":"text/plain",
		"response_example":"remote_addr:$remote_addr uri:${ uri } empty:$nope def:${nope ?? dflt} cost:\\$5 arg:$arg_a",
		"response_headers":{"X-Route-Id":"$route_id","X-N":2,"X-F":1.5}}`)
	if got := p.Names(plugins.Access); !cmp.Equal(got, []string{Name}) {
		t.Fatalf("access phase: %v", got)
	}
	c := plugintest.NewCtx("GET", "/hello?a=1&b=2").WithRoute("r7").WithVar("route_id", "r7")
	plugintest.Run(p, c)
	if c.Upstream || c.ExitStatus() != 201 || c.ExitDelay != 0 {
		t.Fatalf("upstream %v, status %d, delay %v", c.Upstream, c.ExitStatus(), c.ExitDelay)
	}
	want := `remote_addr:127.0.0.1 uri:/hello empty: def:dflt cost:\$5 arg:1`
	if string(c.Body) != want {
		t.Fatalf("body %q, want %q", c.Body, want)
	}
	for name, want := range map[string]string{
		"Content-Type": "text/plain", "x-mock-by": "APISIX/" + spec.CompatVersion,
		"X-Route-Id": "r7", "X-N": "2", "X-F": "1.5",
	} {
		if got := string(c.ResponseHeader(name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
}

// TestDefaultsAndDelay: 200, APISIX's content type, an empty example, no
// mock header when turned off; a delay exits after it (ExitAfter).
func TestDefaultsAndDelay(t *testing.T) {
	c := plugintest.NewCtx("GET", "/")
	plugintest.Run(build(t, `{"response_example":"","with_mock_header":false,"delay":2}`), c)
	if c.ExitStatus() != 200 || len(c.Body) != 0 || c.ExitDelay != 2*time.Second {
		t.Fatalf("status %d, body %q, delay %v", c.ExitStatus(), c.Body, c.ExitDelay)
	}
	if got := string(c.ResponseHeader("Content-Type")); got != "application/json;charset=utf8" {
		t.Fatalf("Content-Type %q", got)
	}
	if c.ResponseHeader("x-mock-by") != nil {
		t.Fatal("x-mock-by with with_mock_header false")
	}
}

const genSchema = `{"type":"object","properties":{
	"s":{"type":"string","example":"a/b"},
	"r":{"type":"string"},
	"n":{"type":"number","example":1.25},
	"rn":{"type":"number"},
	"i":{"type":"integer","example":7.9},
	"ri":{"type":"integer"},
	"b":{"type":"boolean","example":true},
	"rb":{"type":"boolean"},
	"arr":{"type":"array","items":{"type":"integer","example":3}},
	"noitems":{"type":"array"},
	"o":{"type":"object","properties":{"x":{"type":"string","example":"y"}}},
	"empty":{"type":"object"},
	"odd":{"type":"date"}}}`

// TestSchemaJSON: generated data follows the schema: examples as given
// (an integer's floored), random values of the right kind, arrays of 1 to
// 3 items, properties of unknown kinds or arrays without items left out,
// '/' escaped as lua-cjson does.
func TestSchemaJSON(t *testing.T) {
	p := build(t, `{"response_schema":`+genSchema+`}`)
	shape := regexp.MustCompile(`^\{"arr":\[3(,3){0,2}\],"b":true,"empty":\{\},"i":7,"n":1.25,"o":\{"x":"y"\},` +
		`"r":"[a-z]{1,10}","rb":(true|false),"ri":([1-9][0-9]{0,3}|10000),"rn":[0-9.e+-]+,"s":"a\\/b"\}$`)
	seen := map[int]bool{}
	for i := 0; i < 200; i++ {
		c := plugintest.NewCtx("GET", "/")
		plugintest.Run(p, c)
		if !shape.Match(c.Body) {
			t.Fatalf("body %s", c.Body)
		}
		var v map[string]any
		if err := json.Unmarshal(c.Body, &v); err != nil {
			t.Fatalf("not JSON: %v: %s", err, c.Body)
		}
		if rn := v["rn"].(float64); rn < 0 || rn >= 10000 {
			t.Fatalf("rn = %v", rn)
		}
		seen[len(v["arr"].([]any))] = true
	}
	if len(seen) != 3 {
		t.Fatalf("array lengths seen: %v, want 1, 2 and 3", seen)
	}
}

// TestSchemaXML: xml2lua's layout: one object under <data>, two spaces a
// level, an empty value as <tag/>; an object of one property is that
// property's value under <data>.
func TestSchemaXML(t *testing.T) {
	c := plugintest.NewCtx("GET", "/")
	plugintest.Run(build(t, `{"content_type":"application/xml","response_schema":{"type":"object","properties":{
		"name":{"type":"string","example":"jack"},"e":{"type":"string","example":""},
		"o":{"type":"object","properties":{"x":{"type":"integer","example":1},"y":{"type":"boolean","example":true}}}}}}`), c)
	want := "<data>\n  <e/>\n  <name>jack</name>\n  <o>\n    <x>1</x>\n    <y>true</y>\n  </o>\n</data>"
	if string(c.Body) != want {
		t.Fatalf("body\n%s\nwant\n%s", c.Body, want)
	}
	c = plugintest.NewCtx("GET", "/")
	plugintest.Run(build(t, `{"content_type":"text/xml","response_schema":{"type":"object","properties":{"field1":{"type":"string","example":"hello"}}}}`), c)
	if string(c.Body) != "<data>hello</data>" {
		t.Fatalf("one property: %s", c.Body)
	}
	c = plugintest.NewCtx("GET", "/")
	plugintest.Run(build(t, `{"content_type":"text/html","response_schema":{"type":"object","properties":{"a":{"type":"string"}}}}`), c)
	if len(c.Body) != 0 || c.ExitStatus() != 200 {
		t.Fatalf("text/html: %d %q", c.ExitStatus(), c.Body)
	}
}

// TestAPISIXCases are t/plugin/mocking.t's answers.
func TestAPISIXCases(t *testing.T) {
	for _, tc := range []struct{ conf, body string }{
		{`{"content_type":"text/plain","response_schema":{"type":"object","properties":{"field1":{"type":"string","example":"hello"}}}}`, `{"field1":"hello"}`},
		{`{"content_type":"text/plain","response_schema":{"type":"object","properties":{"field1":{"type":"number","example":1}}}}`, `{"field1":1}`},
		{`{"content_type":"text/plain","response_schema":{"type":"object","properties":{"field1":{"type":"integer","example":4}}}}`, `{"field1":4}`},
		{`{"content_type":"text/plain","response_schema":{"type":"object","properties":{"field1":{"type":"boolean","example":true}}}}`, `{"field1":true}`},
		{`{"content_type":"text/plain","response_schema":{"type":"object","properties":{"field1":{"type":"object"}}}}`, `{"field1":{}}`},
		{`{"content_type":"text/plain","response_example":"empty_var:$foo"}`, `empty_var:`},
	} {
		c := plugintest.NewCtx("GET", "/hello")
		plugintest.Run(build(t, tc.conf), c)
		if string(c.Body) != tc.body {
			t.Errorf("%s: body %s, want %s", tc.conf, c.Body, tc.body)
		}
	}
}
