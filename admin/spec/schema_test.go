package spec

import (
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestRefusalNamesFieldAndValue checks that a refusal whose APISIX text
// is only "object matches none of the required" still says, in Field and
// Detail, which value is at fault.
func TestRefusalNamesFieldAndValue(t *testing.T) {
	const nodesMsg = `invalid configuration: property "upstream" validation failed: property "nodes" validation failed: object matches none of the required`
	tests := []struct {
		name, kind, in           string
		wantMsg, field, wantDetl string
	}{
		{"map port out of range", "route", `{"uri":"/a","upstream":{"nodes":{"127.0.0.1:99999":1}}}`,
			nodesMsg, `upstream.nodes["127.0.0.1:99999"]`, `node "127.0.0.1:99999": port 99999 out of range`},
		{"map port zero", "route", `{"uri":"/a","upstream":{"nodes":{"a:0":1}}}`,
			nodesMsg, `upstream.nodes["a:0"]`, `node "a:0": port 0 out of range`},
		{"map unclosed ipv6", "service", `{"upstream":{"nodes":{"[::1:80":1}}}`,
			nodesMsg, `upstream.nodes["[::1:80"]`, `node "[::1:80": no ] after the IPv6 address`},
		{"map bad host", "upstream", `{"nodes":{"a b:80":1}}`,
			`invalid configuration: property "nodes" validation failed: object matches none of the required`,
			`nodes["a b:80"]`, `node "a b:80": host "a b" is not a host name or address`},
		{"map negative weight", "route", `{"uri":"/a","upstream":{"nodes":{"a:1":-1}}}`,
			nodesMsg, `upstream.nodes["a:1"]`, `failed to validate a:1 (matching ".*"): expected -1 to be at least 0`},
		{"map weight too large", "route", `{"uri":"/a","upstream":{"nodes":{"h":2000000000}}}`,
			nodesMsg, `upstream.nodes.h`, `node "h": weight 2000000000 is not an integer from 0 to 1073741824`},
		{"list port out of range", "route", `{"uri":"/a","upstream":{"nodes":[{"host":"a","port":1,"weight":1},{"host":"b","port":70000,"weight":1}]}}`,
			nodesMsg, `upstream.nodes[1].port`, `failed to validate item 2: property "port" validation failed: expected 70000 to be at most 65535`},
		{"list without weight", "route", `{"uri":"/a","upstream":{"nodes":[{"host":"a","port":1}]}}`,
			nodesMsg, `upstream.nodes[0]`, `failed to validate item 1: property "weight" is required`},
		{"nodes a string", "upstream", `{"nodes":"a:1"}`,
			`invalid configuration: property "nodes" validation failed: object matches none of the required`,
			`nodes`, `wrong type: expected object, got string`},
		{"id pattern", "route", `{"id":"a b","uri":"/a","upstream_id":1}`,
			`invalid configuration: property "id" validation failed: object matches none of the required`,
			`id`, `failed to match pattern "^[a-zA-Z0-9-_.]+$" with "a b"`},
		{"remote address", "route", `{"uri":"/a","upstream_id":1,"remote_addrs":["10.0.0.1","300.1.1.1"]}`,
			`invalid configuration: property "remote_addrs" validation failed: failed to validate item 2: object matches none of the required`,
			`remote_addrs[1]`, `"300.1.1.1" is not a valid ipv4`},
		{"method not in enum", "route", `{"uri":"/a","upstream_id":1,"methods":["GET","GOT"]}`,
			`invalid configuration: property "methods" validation failed: failed to validate item 2: matches none of the enum values`,
			`methods[1]`, `value "GOT", expected one of "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE"`},
		{"upstream type not in enum", "upstream", `{"type":"random","nodes":{"a:1":1}}`,
			`invalid configuration: property "type" validation failed: matches none of the enum values`,
			`type`, `value "random", expected one of "roundrobin", "chash", "ewma", "least_conn"`},
		{"wrong type", "route", `{"uri":"/a","upstream_id":1,"priority":"high"}`,
			`invalid configuration: property "priority" validation failed: wrong type: expected integer, got string`,
			`priority`, `value "high"`},
		{"long value cut", "route", `{"uri":"/a","upstream_id":1,"priority":` + strconv.Quote(strings.Repeat("é", 80)) + `}`,
			`invalid configuration: property "priority" validation failed: wrong type: expected integer, got string`,
			`priority`, `value "` + strings.Repeat("é", 47) + `...`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			switch tc.kind {
			case "route":
				_, err = DecodeRoute([]byte(tc.in))
			case "service":
				_, err = DecodeService([]byte(tc.in))
			default:
				_, err = DecodeUpstream([]byte(tc.in))
			}
			var ve *ValidationError
			if !errors.As(err, &ve) {
				t.Fatalf("decode = %v, want a *ValidationError", err)
			}
			got := []string{ve.Msg, ve.Field, ve.Detail}
			want := []string{tc.wantMsg, tc.field, tc.wantDetl}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("msg, field, detail (-want +got):\n%s", diff)
			}
			if !strings.Contains(ve.Explain(), tc.wantDetl) || !strings.HasPrefix(ve.Explain(), tc.wantMsg) {
				t.Errorf("Explain() = %q, want the message and the detail", ve.Explain())
			}
		})
	}
}

// TestValidateBuiltNodeDetail: an object built in code gets the same detail.
func TestValidateBuiltNodeDetail(t *testing.T) {
	r := Route{URI: "/a", Upstream: &Upstream{Nodes: Nodes{List: []Node{{Host: "a", Port: 70000, Weight: 1}}}}}
	var ve *ValidationError
	if !errors.As(r.Validate(), &ve) {
		t.Fatal("a node with port 70000 passes Validate")
	}
	if ve.Field != "upstream.nodes[0].port" || !strings.Contains(ve.Detail, "70000") {
		t.Errorf("Field %q, Detail %q: want the node's port and its value", ve.Field, ve.Detail)
	}
}

// TestFirstErrorOrder checks that of several failures the one APISIX's
// validator meets first is reported, whatever the order in which the
// library found them (it walks Go maps). Each input runs many times.
func TestFirstErrorOrder(t *testing.T) {
	tests := []struct{ in, want string }{
		// properties in the schema's order: name before uri before methods
		{`{"methods":["X"],"uri":"","name":"","upstream_id":1}`,
			`invalid configuration: property "name" validation failed: string too short, expected at least 1, got 0`},
		// a property before allOf/anyOf
		{`{"uri":"","uris":["/a"]}`,
			`invalid configuration: property "uri" validation failed: string too short, expected at least 1, got 0`},
		// additional properties in written order
		{`{"zz":1,"aa":1,"uri":"/a","upstream_id":1}`,
			`invalid configuration: additional properties forbidden, found zz`},
		// allOf before anyOf before not
		{`{"script":"local _M = {} return _M","plugins":{}}`,
			`invalid configuration: allOf 1 failed: value should match only one schema, but matches none`},
		// minLength before pattern
		{`{"uri":"/a","upstream_id":1,"labels":{"k":""}}`,
			`invalid configuration: property "labels" validation failed: failed to validate k (matching ".*"): string too short, expected at least 1, got 0`},
		// items in order, inside a nested object
		{`{"uri":"/a","upstream":{"nodes":{"a:1":1},"checks":{"active":{"healthy":{"http_statuses":[200,700,100]}}}}}`,
			`invalid configuration: property "upstream" validation failed: property "checks" validation failed: property "active" validation failed: ` +
				`property "healthy" validation failed: property "http_statuses" validation failed: failed to validate item 2: expected 700 to be at most 599`},
		// the host/hosts rule of the Admin API comes before the schema
		{`{"uri":"","host":"a","hosts":["b"],"upstream_id":1}`, `only one of host or hosts is allowed`},
		// APISIX's allOf 2: an explicit null host still counts as given
		{`{"uri":"/a","host":"a","upstream_id":1,"desc":null}`,
			`invalid configuration: property "desc" validation failed: wrong type: expected string, got userdata`},
	}
	for _, tc := range tests {
		for range 30 {
			_, err := DecodeRoute([]byte(tc.in))
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Fatalf("DecodeRoute(%s) (-want +got):\n%s", tc.in, diff)
			}
		}
	}
}

func TestObjectSchema(t *testing.T) {
	for _, kind := range []string{KindRoute, KindService, KindUpstream, KindConsumer, KindPluginConfig, KindGlobalRule, KindSSL} {
		b := ObjectSchema(kind)
		var doc map[string]any
		if err := json.Unmarshal(b, &doc); err != nil {
			t.Fatalf("ObjectSchema(%q) is not JSON: %v", kind, err)
		}
		if strings.Contains(string(b), `"$ref"`) {
			t.Errorf("ObjectSchema(%q) still has a $ref", kind)
		}
		if doc["type"] != "object" || doc["properties"] == nil {
			t.Errorf("ObjectSchema(%q) does not describe an object: %.80s", kind, b)
		}
		// the bundled document is a schema that works on its own
		s, err := CompileSchema(kind, b)
		if err != nil {
			t.Fatalf("CompileSchema(ObjectSchema(%q)): %v", kind, err)
		}
		if err := s.Validate(json.RawMessage(`{"id":"a b"}`)); err == nil {
			t.Errorf("%s: a bad id passes the bundled schema", kind)
		}
	}
	if ObjectSchema("stream_route") != nil {
		t.Error("ObjectSchema of an unknown kind is not nil")
	}
	if !strings.Contains(string(ObjectSchema(KindRoute)), `"remote_addrs"`) {
		t.Error("route schema lacks remote_addrs")
	}
}

func TestValidateObject(t *testing.T) {
	tests := []struct{ kind, in, want string }{
		{KindConsumer, `{"username":"jack","plugins":{"key-auth":{"key":"k"}}}`, ""},
		{KindConsumer, `{"plugins":{}}`, `invalid configuration: property "username" is required`},
		{KindConsumer, `{"username":"ja ck"}`,
			`invalid configuration: property "username" validation failed: failed to match pattern "^[a-zA-Z0-9_\\-]+$" with "ja ck"`},
		{KindPluginConfig, `{"id":"pc","plugins":{}}`, ""},
		{KindPluginConfig, `{"id":"pc"}`, `invalid configuration: property "plugins" is required`},
		{KindPluginConfig, `{"id":"pc","plugins":[]}`,
			`invalid configuration: property "plugins" validation failed: wrong type: expected object, got table`},
		{KindGlobalRule, `{"id":1,"plugins":{}}`, ""},
		{KindGlobalRule, `{"id":0,"plugins":{}}`, `invalid configuration: property "id" validation failed: object matches none of the required`},
		{KindGlobalRule, `{"id":1,"plugins":{},"x":1}`, `invalid configuration: additional properties forbidden, found x`},
	}
	for _, tc := range tests {
		err := ValidateObject(tc.kind, json.RawMessage(tc.in))
		if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
			t.Errorf("ValidateObject(%s, %s) (-want +got):\n%s", tc.kind, tc.in, diff)
		}
	}
	if err := ValidateObject("nope", json.RawMessage(`{}`)); err == nil {
		t.Error("ValidateObject of an unknown kind passes")
	}
	if err := ValidateObject(KindConsumer, json.RawMessage(`{`)); !errors.Is(err, ErrSyntax) {
		t.Errorf("malformed JSON: err = %v, want ErrSyntax", err)
	}
}

// TestCompileSchema checks the API the plugin layer uses: a plugin's
// schema, with a reference to the shared definitions, gives APISIX's
// messages without a prefix.
func TestCompileSchema(t *testing.T) {
	s, err := CompileSchema("limit-count", []byte(`{
		"type": "object",
		"properties": {
			"count": {"type": "integer", "exclusiveMinimum": 0},
			"time_window": {"type": "integer", "exclusiveMinimum": 0},
			"key_type": {"type": "string", "enum": ["var", "var_combination", "constant"], "default": "var"},
			"rejected_code": {"type": "integer", "minimum": 200, "maximum": 599, "default": 503},
			"host": {"$ref": "defs.json#/definitions/host"}
		},
		"required": ["count", "time_window"]
	}`))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct{ in, want string }{
		{`{"count":1,"time_window":60}`, ""},
		{`{"count":1.0,"time_window":6e1,"rejected_code":429}`, ""},
		{`{"time_window":60}`, `property "count" is required`},
		{`{"count":0,"time_window":60}`, `property "count" validation failed: expected 0 to be greater than 0`},
		{`{"count":1,"time_window":60,"rejected_code":600}`, `property "rejected_code" validation failed: expected 600 to be at most 599`},
		{`{"count":1,"time_window":60,"key_type":"x"}`, `property "key_type" validation failed: matches none of the enum values`},
		{`{"count":1,"time_window":60,"host":"a b"}`,
			`property "host" validation failed: failed to match pattern "^\\*$|^\\*?[0-9a-zA-Z-._\\[\\]:]+$" with "a b"`},
		{`[]`, `wrong type: expected object, got table`},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, errText(s.Validate(json.RawMessage(tc.in)))); diff != "" {
			t.Errorf("Validate(%s) (-want +got):\n%s", tc.in, diff)
		}
	}
	// A dependencies schema's failure, as jwt-auth's consumer schema
	// (t/plugin/jwt-auth.t TEST 49).
	dep, err := CompileSchema("jwt-auth.consumer", []byte(`{
		"type": "object",
		"properties": {"algorithm": {"type": "string"}, "dependencies": {"type": "string"}},
		"dependencies": {"algorithm": {"oneOf": [
			{"properties": {"algorithm": {"enum": ["HS256"]}}},
			{"properties": {"public_key": {"type": "string"}}, "required": ["public_key"]}
		]}}
	}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ in, want string }{
		{`{"algorithm":"HS256"}`, ""},
		{`{"algorithm":"RS256","public_key":"k"}`, ""},
		{`{"algorithm":"RS256"}`, `failed to validate dependent schema for "algorithm": value should match only one schema, but matches none`},
		{`{"dependencies":1}`, `property "dependencies" validation failed: wrong type: expected string, got number`},
	} {
		if diff := cmp.Diff(tc.want, errText(dep.Validate(json.RawMessage(tc.in)))); diff != "" {
			t.Errorf("Validate(%s) (-want +got):\n%s", tc.in, diff)
		}
	}
	// The upstream's tls, as t/node/upstream-mtls.t TEST 3.
	err = ValidateObject(KindUpstream, []byte(`{"nodes":{"127.0.0.1:80":1},"tls":{"client_cert":"x"}}`))
	if want := `invalid configuration: property "tls" validation failed: failed to validate dependent schema for "client_cert": property "client_key" is required`; errText(err) != want {
		t.Errorf("tls without client_key: %v, want %s", err, want)
	}
	if _, err := CompileSchema("bad", []byte(`{"type":"nope"}`)); err == nil {
		t.Error("an invalid schema compiles")
	}
	if _, err := CompileSchema("bad", []byte(`{"type":`)); err == nil {
		t.Error("malformed schema JSON compiles")
	}
}

// TestIntegerForms: numbers the schema types as integer may be written
// 2.0 or 1e3 (APISIX reads them as integers); they decode into int fields.
func TestIntegerForms(t *testing.T) {
	r, err := DecodeRoute([]byte(`{"uri":"/a","priority":1e3,"status":1.0,"create_time":2.0,
		"upstream":{"nodes":{"a:1":1.0},"retries":2.0,"keepalive_pool":{"size":1e1,"requests":5.0},"timeout":{"connect":1,"send":1.5,"read":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	got := []int{*r.Priority, *r.Status, int(r.CreateTime), *r.Upstream.Rare().Retries, *r.Upstream.Rare().KeepalivePool.Size, *r.Upstream.Rare().KeepalivePool.Requests, r.Upstream.Nodes.List[0].Weight}
	if diff := cmp.Diff([]int{1000, 1, 2, 2, 10, 5, 1}, got); diff != "" {
		t.Errorf("integers (-want +got):\n%s", diff)
	}
}

// BenchmarkDecodeRoutes5000 decodes 5000 distinct routes, as a large
// apisix.yaml does on load.
func BenchmarkDecodeRoutes5000(b *testing.B) {
	routes := make([][]byte, 5000)
	for i := range routes {
		routes[i] = fmt.Appendf(nil, `{"id":%d,"uri":"/r/%d","methods":["GET","POST"],"hosts":["a%d.example.com"],
			"vars":[["arg_a","==","1"]],"plugins":{"limit-count":{"count":10,"time_window":60}},
			"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:%d":1}}}`, i+1, i, i, 1024+i)
	}
	b.ReportAllocs()
	for b.Loop() {
		for _, r := range routes {
			if _, err := DecodeRoute(r); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// FuzzParseJSON checks the direct scan of well-formed JSON against
// encoding/json, and that malformed input is a *SyntaxError.
func FuzzParseJSON(f *testing.F) {
	for _, s := range []string{`{"a":[1,2.5e3,"x\"y",true,null],"b":{}}`, `"\u00e9\ud83d\ude00"`, "\"\xff\"", ` [ ] `, `{"a":1,"a":2}`, `{`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := parseJSON(data)
		dec := json.NewDecoder(strings.NewReader(string(data)))
		dec.UseNumber()
		var want any
		if !json.Valid(data) {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("parseJSON(%q) = %v, want a syntax error", data, err)
			}
			return
		}
		if err != nil {
			t.Fatalf("parseJSON(%q): %v", data, err)
		}
		if err := dec.Decode(&want); err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, v.toAny()); diff != "" {
			t.Fatalf("parseJSON(%q) (-encoding/json +scan):\n%s", data, diff)
		}
	})
}

// TestConcurrentDecode: schemas compile once and validate from many
// goroutines (run with -race).
func TestConcurrentDecode(t *testing.T) {
	in := []byte(`{"uri":"/a","labels":{"k":"a b"},"upstream":{"nodes":{"a:1":1}}}`)
	want := `invalid configuration: property "labels" validation failed: failed to validate k (matching ".*"): failed to match pattern "^\\S+$" with "a b"`
	errs := make(chan string, 8)
	for range 8 {
		go func() {
			msg := ""
			for range 50 {
				if _, err := DecodeRoute(in); errText(err) != want {
					msg = errText(err)
				}
			}
			errs <- msg
		}()
	}
	for range 8 {
		if msg := <-errs; msg != "" {
			t.Fatalf("concurrent DecodeRoute: %s", msg)
		}
	}
}
