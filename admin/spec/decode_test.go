package spec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const up = `"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}`

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestDecodeRoute(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string // error text; "" for valid
	}{
		// valid
		{"benchmark route", `{"uri":"/hello","plugins":{},` + up + `}`, ""},
		{"numeric id", `{"id":1,"uri":"/a",` + up + `}`, ""},
		{"string id", `{"id":"r-1_x.y","uri":"/a",` + up + `}`, ""},
		{"plugins only", `{"uri":"/a","plugins":{"mocking":{"response_example":"x"}}}`, ""},
		{"upstream_id", `{"uri":"/a","upstream_id":"u1"}`, ""},
		{"service_id", `{"uris":["/a","/b/*"],"service_id":2}`, ""},
		{"everything", `{"id":"full","name":"n","desc":"d","labels":{"env":"prod"},"uri":"/a","priority":-3,
			"methods":["GET","PURGE"],"hosts":["*.foo.com","a.b","[::1]:80"],"remote_addrs":["1.2.3.4","10.0.0.0/8","::1","fe80::/10"],
			"vars":[["arg_a","==","1"],["http_x","!","~~","^a"],["remote_addr","ipmatch",["10.0.0.0/8"]],["arg_b","in",["1","2"]]],
			"timeout":{"connect":0.5,"send":1,"read":3},"enable_websocket":true,"status":0,"create_time":1,"update_time":2,
			"upstream":{"type":"chash","hash_on":"header","key":"X-User","nodes":[{"host":"a.example","port":8080,"weight":2,"priority":1,"metadata":{"k":1}}],
				"retries":0,"retry_timeout":1.5,"timeout":{"connect":1,"send":1,"read":1},"scheme":"https","pass_host":"rewrite","upstream_host":"b.example",
				"keepalive_pool":{"size":1,"idle_timeout":0,"requests":1},"checks":{"active":{}},"labels":{"a":"b"},"name":"u","desc":"d"}}`, ""},
		{"integral float as integer", `{"uri":"/a","priority":2.0,` + up + `}`, ""},
		{"two-item vars", `{"uri":"/a","vars":[["arg_a","jack"]],` + up + `}`, ""},

		// strict decoding
		{"unknown field", `{"uri":"/a","foo":1,` + up + `}`,
			`invalid configuration: additional properties forbidden, found foo`},
		{"unknown nested field", `{"uri":"/a","upstream":{"type":"roundrobin","nodes":{"a:1":1},"bar":1}}`,
			`invalid configuration: property "upstream" validation failed: additional properties forbidden, found bar`},
		{"unknown timeout field", `{"uri":"/a","timeout":{"connect":1,"send":1,"read":1,"x":1},` + up + `}`,
			`invalid configuration: property "timeout" validation failed: additional properties forbidden, found x`},
		{"not an object", `[]`, `invalid configuration: wrong type: expected object, got table`},
		{"priority float", `{"uri":"/a","priority":1.5,` + up + `}`,
			`invalid configuration: property "priority" validation failed: wrong type: expected integer, got number`},
		{"priority string", `{"uri":"/a","priority":"1",` + up + `}`,
			`invalid configuration: property "priority" validation failed: wrong type: expected integer, got string`},
		{"uri null", `{"uri":null,` + up + `}`,
			`invalid configuration: property "uri" validation failed: wrong type: expected string, got userdata`},
		{"methods not array", `{"uri":"/a","methods":"GET",` + up + `}`,
			`invalid configuration: property "methods" validation failed: wrong type: expected array, got string`},
		{"methods item type", `{"uri":"/a","methods":["GET",1],` + up + `}`,
			`invalid configuration: property "methods" validation failed: failed to validate item 2: wrong type: expected string, got number`},
		{"labels value type", `{"uri":"/a","labels":{"k":1},` + up + `}`,
			`invalid configuration: property "labels" validation failed: failed to validate k (matching ".*"): wrong type: expected string, got number`},
		{"websocket type", `{"uri":"/a","enable_websocket":1,` + up + `}`,
			`invalid configuration: property "enable_websocket" validation failed: wrong type: expected boolean, got number`},
		{"timeout missing read", `{"uri":"/a","timeout":{"connect":1,"send":1},` + up + `}`,
			`invalid configuration: property "timeout" validation failed: property "read" is required`},
		{"discovery_args type", `{"uri":"/a","upstream":{"service_name":"s","discovery_type":"dns","discovery_args":[]}}`,
			`invalid configuration: property "upstream" validation failed: property "discovery_args" validation failed: wrong type: expected object, got table`},

		// schema
		{"methods enum", `{"uri":"/a","methods":["GETX"],` + up + `}`,
			`invalid configuration: property "methods" validation failed: failed to validate item 1: matches none of the enum values`},
		{"methods unique", `{"uri":"/a","methods":["GET","POST","GET"],` + up + `}`,
			`invalid configuration: property "methods" validation failed: expected unique items but items 1 and 3 are equal`},
		{"id pattern", `{"id":"a b","uri":"/a",` + up + `}`,
			`invalid configuration: property "id" validation failed: object matches none of the required`},
		{"id zero", `{"id":0,"uri":"/a",` + up + `}`,
			`invalid configuration: property "id" validation failed: object matches none of the required`},
		{"id too long", `{"id":"` + strings.Repeat("a", 65) + `","uri":"/a",` + up + `}`,
			`invalid configuration: property "id" validation failed: object matches none of the required`},
		{"id bool", `{"id":true,"uri":"/a",` + up + `}`,
			`invalid configuration: property "id" validation failed: object matches none of the required`},
		{"upstream_id pattern", `{"uri":"/a","upstream_id":"x/y"}`,
			`invalid configuration: property "upstream_id" validation failed: object matches none of the required`},
		{"uri empty", `{"uri":"",` + up + `}`,
			`invalid configuration: property "uri" validation failed: string too short, expected at least 1, got 0`},
		{"name too long", `{"name":"` + strings.Repeat("é", 257) + `","uri":"/a",` + up + `}`,
			`invalid configuration: property "name" validation failed: string too long, expected at most 256, got 257`},
		{"label pattern", `{"uri":"/a","labels":{"k":"a b"},` + up + `}`,
			`invalid configuration: property "labels" validation failed: failed to validate k (matching ".*"): failed to match pattern "^\\S+$" with "a b"`},
		{"uris empty", `{"uris":[],` + up + `}`,
			`invalid configuration: property "uris" validation failed: expect array to have at least 1 items`},
		{"uris unique", `{"uris":["/a","/a"],` + up + `}`,
			`invalid configuration: property "uris" validation failed: expected unique items but items 1 and 2 are equal`},
		{"host pattern", `{"uri":"/a","host":"foo bar",` + up + `}`,
			`invalid configuration: property "host" validation failed: failed to match pattern "^\\*$|^\\*?[0-9a-zA-Z-._\\[\\]:]+$" with "foo bar"`},
		{"hosts pattern", `{"uri":"/a","hosts":["ok.com","a/b"],` + up + `}`,
			`invalid configuration: property "hosts" validation failed: failed to validate item 2: failed to match pattern "^\\*$|^\\*?[0-9a-zA-Z-._\\[\\]:]+$" with "a/b"`},
		{"hosts wildcard middle", `{"uri":"/a","hosts":["a.*.com"],` + up + `}`,
			`invalid configuration: property "hosts" validation failed: failed to validate item 1: failed to match pattern "^\\*$|^\\*?[0-9a-zA-Z-._\\[\\]:]+$" with "a.*.com"`},
		{"host and hosts", `{"uri":"/a","host":"a.com","hosts":["b.com"],` + up + `}`,
			`only one of host or hosts is allowed`},
		{"remote_addr and remote_addrs", `{"uri":"/a","remote_addr":"1.1.1.1","remote_addrs":["1.1.1.1"],` + up + `}`,
			`only one of remote_addr or remote_addrs is allowed`},
		{"remote_addrs bad", `{"uri":"/a","remote_addrs":["1.2.3.4","300.1.1.1"],` + up + `}`,
			`invalid configuration: property "remote_addrs" validation failed: failed to validate item 2: object matches none of the required`},
		{"remote_addr bad cidr", `{"uri":"/a","remote_addr":"10.0.0.0/33",` + up + `}`,
			`invalid configuration: property "remote_addr" validation failed: object matches none of the required`},
		{"remote_addr ipv6 pattern hole", `{"uri":"/a","remote_addr":":/8",` + up + `}`,
			`invalid configuration: property "remote_addr" validation failed: object matches none of the required`},
		{"remote_addrs ipv6 prefix too long", `{"uri":"/a","remote_addrs":["::1","::/200"],` + up + `}`,
			`invalid configuration: property "remote_addrs" validation failed: failed to validate item 2: object matches none of the required`},
		{"status", `{"uri":"/a","status":2,` + up + `}`,
			`invalid configuration: property "status" validation failed: matches none of the enum values`},
		{"timeout zero", `{"uri":"/a","timeout":{"connect":0,"send":1,"read":1},` + up + `}`,
			`invalid configuration: property "timeout" validation failed: property "connect" validation failed: expected 0 to be greater than 0`},
		{"timeout negative read", `{"uri":"/a","timeout":{"connect":1,"send":1,"read":-0.5},` + up + `}`,
			`invalid configuration: property "timeout" validation failed: property "read" validation failed: expected -0.5 to be greater than 0`},
		{"filter_func", `{"uri":"/a","filter_func":"return function() end",` + up + `}`,
			`invalid configuration: property "filter_func" validation failed: failed to match pattern "^function" with "return function() end"`},
		{"filter_func refused", `{"uri":"/a","filter_func":"function(vars) return vars.arg_name == 'json' end",` + up + `}`,
			`invalid configuration: property "filter_func" is not supported: coregate runs no Lua; write the condition as "vars"`},
		{"script refused", `{"uri":"/a","script":"local _M = {} return _M"}`,
			`invalid configuration: property "script" is not supported: coregate runs no Lua`},
		{"script_id refused", `{"uri":"/a","script_id":"1",` + up + `}`,
			`invalid configuration: property "script_id" is not supported: coregate runs no Lua`},
		{"no uri", `{` + up + `}`,
			`invalid configuration: allOf 1 failed: value should match only one schema, but matches none`},
		{"uri and uris", `{"uri":"/a","uris":["/b"],` + up + `}`,
			`invalid configuration: allOf 1 failed: value should match only one schema, but matches both schemas 1 and 2`},
		{"nothing to do", `{"uri":"/a"}`,
			`invalid configuration: object matches none of the required: ["plugins","uri"] or ["upstream","uri"] or ["upstream_id","uri"] or ["service_id","uri"] or ["plugins","uris"] or ["upstream","uris"] or ["upstream_id","uris"] or ["service_id","uris"] or ["script","uri"] or ["script","uris"]`},
		{"script with plugins", `{"uri":"/a","script":"local _M = {} return _M","plugins":{}}`,
			`invalid configuration: value wasn't supposed to match schema`},

		// nested upstream
		{"upstream type", `{"uri":"/a","upstream":{"type":"foo","nodes":{"a:1":1}}}`,
			`invalid configuration: property "upstream" validation failed: property "type" validation failed: matches none of the enum values`},
		{"upstream no nodes", `{"uri":"/a","upstream":{"type":"roundrobin"}}`,
			`invalid configuration: property "upstream" validation failed: value should match only one schema, but matches none`},
		{"upstream nodes and discovery", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"service_name":"s","discovery_type":"dns"}}`,
			`invalid configuration: property "upstream" validation failed: value should match only one schema, but matches both schemas 1 and 2`},
		{"negative weight", `{"uri":"/a","upstream":{"nodes":{"a:1":-1}}}`,
			`invalid configuration: property "upstream" validation failed: property "nodes" validation failed: object matches none of the required`},
		{"port out of range", `{"uri":"/a","upstream":{"nodes":[{"host":"a","port":70000,"weight":1}]}}`,
			`invalid configuration: property "upstream" validation failed: property "nodes" validation failed: object matches none of the required`},
		{"map port out of range", `{"uri":"/a","upstream":{"nodes":{"a:0":1}}}`,
			`invalid configuration: property "upstream" validation failed: property "nodes" validation failed: object matches none of the required`},
		{"fractional weight", `{"uri":"/a","upstream":{"nodes":{"a:1":0.5}}}`,
			`invalid configuration: property "upstream" validation failed: property "nodes" validation failed: object matches none of the required`},
		{"node without weight", `{"uri":"/a","upstream":{"nodes":[{"host":"a","port":1}]}}`,
			`invalid configuration: property "upstream" validation failed: property "nodes" validation failed: object matches none of the required`},
		{"retries", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"retries":-1}}`,
			`invalid configuration: property "upstream" validation failed: property "retries" validation failed: expected -1 to be at least 0`},
		{"scheme", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"scheme":"ftp"}}`,
			`invalid configuration: property "upstream" validation failed: property "scheme" validation failed: matches none of the enum values`},
		{"pass_host enum", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"pass_host":"x"}}`,
			`invalid configuration: property "upstream" validation failed: property "pass_host" validation failed: matches none of the enum values`},
		{"pass_host rewrite", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"pass_host":"rewrite"}}`,
			"`upstream_host` can't be empty when `pass_host` is `rewrite`"},
		{"keepalive size", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"keepalive_pool":{"size":0}}}`,
			`invalid configuration: property "upstream" validation failed: property "keepalive_pool" validation failed: property "size" validation failed: expected 0 to be at least 1`},
		{"keepalive idle", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"keepalive_pool":{"idle_timeout":-1}}}`,
			`invalid configuration: property "upstream" validation failed: property "keepalive_pool" validation failed: property "idle_timeout" validation failed: expected -1 to be at least 0`},
		{"keepalive requests", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"keepalive_pool":{"requests":0}}}`,
			`invalid configuration: property "upstream" validation failed: property "keepalive_pool" validation failed: property "requests" validation failed: expected 0 to be at least 1`},
		{"checks without active", `{"uri":"/a","upstream":{"nodes":{"a:1":1},"checks":{"passive":{}}}}`,
			`invalid configuration: property "upstream" validation failed: property "checks" validation failed: object matches none of the required: ["active"] or ["active","passive"]`},
		{"chash without key", `{"uri":"/a","upstream":{"type":"chash","nodes":{"a:1":1}}}`, `missing key`},
		{"chash bad vars key", `{"uri":"/a","upstream":{"type":"chash","key":"foo","nodes":{"a:1":1}}}`,
			`invalid configuration: failed to match pattern "^((uri|server_name|server_addr|request_uri|remote_port|remote_addr|query_string|host|hostname|mqtt_client_id)|arg_[0-9a-zA-z_-]+)$" with "foo"`},
		{"chash consumer", `{"uri":"/a","upstream":{"type":"chash","hash_on":"consumer","nodes":{"a:1":1}}}`, ""},
		// Every name APISIX's pattern allows is read by the worker: stored.
		{"chash vars key remote_port", `{"uri":"/a","upstream":{"type":"chash","key":"remote_port","nodes":{"a:1":1}}}`, ""},
		{"chash vars key server_addr", `{"uri":"/a","upstream":{"type":"chash","key":"server_addr","nodes":{"a:1":1}}}`, ""},
		{"chash vars key server_name", `{"uri":"/a","upstream":{"type":"chash","key":"server_name","nodes":{"a:1":1}}}`, ""},
		{"chash vars key hostname", `{"uri":"/a","upstream":{"type":"chash","key":"hostname","nodes":{"a:1":1}}}`, ""},
		// A variable the worker reads and APISIX's pattern does not allow.
		{"chash vars key server_port", `{"uri":"/a","upstream":{"type":"chash","key":"server_port","nodes":{"a:1":1}}}`,
			`invalid configuration: failed to match pattern "^((uri|server_name|server_addr|request_uri|remote_port|remote_addr|query_string|host|hostname|mqtt_client_id)|arg_[0-9a-zA-z_-]+)$" with "server_port"`},
		{"chash vars key", `{"uri":"/a","upstream":{"type":"chash","key":"arg_k","nodes":{"a:1":1}}}`, ""},

		// plugins and vars
		{"plugin not object", `{"uri":"/a","plugins":{"limit-count":1}}`,
			`failed to check the configuration of plugin limit-count err: wrong type: expected object, got number`},
		{"vars operator", `{"uri":"/a","vars":[["arg_a","=","1"]],` + up + `}`,
			`failed to validate the 'vars' expression: invalid operator '='`},
		{"vars not wrapped", `{"uri":"/a","vars":["arg_a","==","1"],` + up + `}`,
			`failed to validate the 'vars' expression: rule should be wrapped inside brackets`},
		{"vars bad not", `{"uri":"/a","vars":[["arg_a","?","==","1"]],` + up + `}`,
			`failed to validate the 'vars' expression: bad 'not' expression`},
		{"vars ipmatch", `{"uri":"/a","vars":[["remote_addr","ipmatch","1.2.3"]],` + up + `}`,
			`failed to validate the 'vars' expression: invalid ip address: 1.2.3`},
		{"vars logical", `{"uri":"/a","vars":[["OR",["a","==","1"],["b","==","2"]]],` + up + `}`,
			`failed to validate the 'vars' expression: logical operator 'OR' is not supported yet`},
		{"vars not array", `{"uri":"/a","vars":{},` + up + `}`,
			`invalid configuration: property "vars" validation failed: wrong type: expected array, got table`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeRoute([]byte(tc.in))
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Fatalf("DecodeRoute error (-want +got):\n%s", diff)
			}
			if err != nil {
				var ve *ValidationError
				if !errors.As(err, &ve) || !errors.Is(err, ErrInvalid) {
					t.Fatalf("error %T is not a *ValidationError matching ErrInvalid", err)
				}
			}
		})
	}
}

func TestDecodeSyntaxError(t *testing.T) {
	for _, in := range []string{`{"uri":`, `{"uri":"/a",}`, `{"uri":"/a"} x`, ``} {
		_, err := DecodeRoute([]byte(in))
		if !errors.Is(err, ErrSyntax) || !strings.HasPrefix(errText(err), "invalid request body: ") {
			t.Errorf("DecodeRoute(%q) = %v, want a syntax error", in, err)
		}
	}
}

func TestValidationErrorField(t *testing.T) {
	tests := []struct{ in, field string }{
		{`{"uri":"/a","methods":["GET","X"],` + up + `}`, "methods[1]"},
		{`{"uri":"/a","upstream":{"nodes":{"a:1":1},"keepalive_pool":{"size":0}}}`, "upstream.keepalive_pool.size"},
		{`{"uri":"/a","upstream":{"nodes":{"a:1":1},"pass_host":"rewrite"}}`, "upstream.upstream_host"},
		{`{"uri":"/a","labels":{"k":""},` + up + `}`, "labels.k"},
		{`{"uri":"/a","vars":[["a","==","1"],["b","=","1"]],` + up + `}`, "vars[1]"},
		{`{"uri":"/a","plugins":{"p":[]}}`, "plugins.p"},
	}
	for _, tc := range tests {
		_, err := DecodeRoute([]byte(tc.in))
		var ve *ValidationError
		if !errors.As(err, &ve) {
			t.Fatalf("DecodeRoute(%s) = %v, want a *ValidationError", tc.in, err)
		}
		if diff := cmp.Diff(tc.field, ve.Field); diff != "" {
			t.Errorf("Field for %s (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestDecodeServiceUpstream(t *testing.T) {
	tests := []struct {
		name, kind, in, want string
	}{
		{"service", "service", `{"id":1,"name":"s","upstream_id":2,"hosts":["a.com"],"plugins":{"key-auth":{}}}`, ""},
		{"service empty", "service", `{}`, ""},
		{"service uri", "service", `{"uri":"/a"}`, `invalid configuration: additional properties forbidden, found uri`},
		{"service hosts", "service", `{"hosts":[]}`, `invalid configuration: property "hosts" validation failed: expect array to have at least 1 items`},
		{"service upstream", "service", `{"upstream":{"nodes":{"a:1":1},"pass_host":"rewrite"}}`, "`upstream_host` can't be empty when `pass_host` is `rewrite`"},
		{"upstream map", "upstream", `{"id":1,"type":"roundrobin","nodes":{"127.0.0.1:1980":1,"[::1]:80":2,"example.com":0}}`, ""},
		{"upstream array", "upstream", `{"nodes":[{"host":"127.0.0.1","port":1980,"weight":1},{"host":"b","weight":0,"priority":-1}]}`, ""},
		{"upstream empty nodes", "upstream", `{"nodes":{}}`, ""},
		{"upstream discovery", "upstream", `{"service_name":"svc","discovery_type":"dns","discovery_args":{"group_name":"g"}}`, ""},
		{"upstream type", "upstream", `{"type":"random","nodes":{}}`, `invalid configuration: property "type" validation failed: matches none of the enum values`},
		{"upstream type empty", "upstream", `{"type":"","nodes":{}}`, `invalid configuration: property "type" validation failed: matches none of the enum values`},
		{"upstream retry_timeout", "upstream", `{"nodes":{},"retry_timeout":-1}`, `invalid configuration: property "retry_timeout" validation failed: expected -1 to be at least 0`},
		{"upstream upstream_host", "upstream", `{"nodes":{},"pass_host":"rewrite","upstream_host":"a b"}`,
			`invalid configuration: property "upstream_host" validation failed: failed to match pattern "^\\*$|^\\*?[0-9a-zA-Z-._\\[\\]:]+$" with "a b"`},
		{"upstream header key", "upstream", `{"nodes":{},"type":"chash","hash_on":"header","key":"a b"}`,
			`invalid configuration: failed to match pattern "^[a-zA-Z0-9-_]+$" with "a b"`},
		{"upstream bad ipv6 key", "upstream", `{"nodes":{"[::1:80":1}}`,
			`invalid configuration: property "nodes" validation failed: object matches none of the required`},
		{"upstream unknown", "upstream", `{"nodes":{},"foo":1}`, `invalid configuration: additional properties forbidden, found foo`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.kind == "service" {
				_, err = DecodeService([]byte(tc.in))
			} else {
				_, err = DecodeUpstream([]byte(tc.in))
			}
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Fatalf("decode %s error (-want +got):\n%s", tc.kind, diff)
			}
		})
	}
}

// TestUpstreamMessagesAsAPISIX: the answers to an upstream's checks,
// hash_on/key and discovery fields are APISIX's, field by field
// (schema_def.lua's health_checker and upstream_schema, upstream.lua's
// check_upstream_conf), and what APISIX takes is taken.
func TestUpstreamMessagesAsAPISIX(t *testing.T) {
	const (
		n      = `"nodes":{"a:1":1}`
		active = `invalid configuration: property "checks" validation failed: property "active" validation failed: `
		hashRE = `"^((uri|server_name|server_addr|request_uri|remote_port|remote_addr|query_string|host|hostname|mqtt_client_id)|arg_[0-9a-zA-z_-]+)$"`
	)
	tests := []struct{ name, in, want string }{
		// checks
		{"checks empty", `{` + n + `,"checks":{}}`,
			`invalid configuration: property "checks" validation failed: object matches none of the required: ["active"] or ["active","passive"]`},
		{"active type", `{` + n + `,"checks":{"active":{"type":"udp"}}}`,
			active + `property "type" validation failed: matches none of the enum values`},
		{"active timeout type", `{` + n + `,"checks":{"active":{"timeout":"1"}}}`,
			active + `property "timeout" validation failed: wrong type: expected number, got string`},
		{"active interval", `{` + n + `,"checks":{"active":{"healthy":{"interval":0}}}}`,
			active + `property "healthy" validation failed: property "interval" validation failed: expected 0 to be at least 1`},
		{"active successes low", `{` + n + `,"checks":{"active":{"healthy":{"successes":0}}}}`,
			active + `property "healthy" validation failed: property "successes" validation failed: expected 0 to be at least 1`},
		{"active successes high", `{` + n + `,"checks":{"active":{"healthy":{"successes":255}}}}`,
			active + `property "healthy" validation failed: property "successes" validation failed: expected 255 to be at most 254`},
		{"active status low", `{` + n + `,"checks":{"active":{"healthy":{"http_statuses":[99]}}}}`,
			active + `property "healthy" validation failed: property "http_statuses" validation failed: failed to validate item 1: expected 99 to be at least 200`},
		{"active statuses unique", `{` + n + `,"checks":{"active":{"healthy":{"http_statuses":[200,200]}}}}`,
			active + `property "healthy" validation failed: property "http_statuses" validation failed: expected unique items but items 1 and 2 are equal`},
		{"active statuses empty", `{` + n + `,"checks":{"active":{"healthy":{"http_statuses":[]}}}}`,
			active + `property "healthy" validation failed: property "http_statuses" validation failed: expect array to have at least 1 items`},
		{"active http_failures", `{` + n + `,"checks":{"active":{"unhealthy":{"http_failures":0}}}}`,
			active + `property "unhealthy" validation failed: property "http_failures" validation failed: expected 0 to be at least 1`},
		{"active tcp_failures", `{` + n + `,"checks":{"active":{"unhealthy":{"tcp_failures":300}}}}`,
			active + `property "unhealthy" validation failed: property "tcp_failures" validation failed: expected 300 to be at most 254`},
		{"active timeouts", `{` + n + `,"checks":{"active":{"unhealthy":{"timeouts":0}}}}`,
			active + `property "unhealthy" validation failed: property "timeouts" validation failed: expected 0 to be at least 1`},
		{"active port", `{` + n + `,"checks":{"active":{"port":0}}}`,
			active + `property "port" validation failed: expected 0 to be at least 1`},
		{"active req_headers empty", `{` + n + `,"checks":{"active":{"req_headers":[]}}}`,
			active + `property "req_headers" validation failed: expect array to have at least 1 items`},
		{"active req_headers item", `{` + n + `,"checks":{"active":{"req_headers":["a",1]}}}`,
			active + `property "req_headers" validation failed: failed to validate item 2: wrong type: expected string, got number`},
		{"active verify type", `{` + n + `,"checks":{"active":{"https_verify_certificate":1}}}`,
			active + `property "https_verify_certificate" validation failed: wrong type: expected boolean, got number`},
		{"active http_method", `{` + n + `,"checks":{"active":{"http_method":"PUT"}}}`, ""},
		{"passive status high", `{` + n + `,"checks":{"active":{},"passive":{"unhealthy":{"http_statuses":[600]}}}}`,
			`invalid configuration: property "checks" validation failed: property "passive" validation failed: property "unhealthy" validation failed: property "http_statuses" validation failed: failed to validate item 1: expected 600 to be at most 599`},
		{"passive type", `{` + n + `,"checks":{"active":{},"passive":{"type":"udp"}}}`,
			`invalid configuration: property "checks" validation failed: property "passive" validation failed: property "type" validation failed: matches none of the enum values`},
		// Passive counters may be 0 (that count off), active ones not.
		{"passive zeros", `{` + n + `,"checks":{"active":{},"passive":{"healthy":{"successes":0},"unhealthy":{"timeouts":0,"tcp_failures":0,"http_failures":0}}}}`, ""},

		// hash_on and key
		{"header without key", `{` + n + `,"type":"chash","hash_on":"header"}`, `missing key`},
		{"cookie without key", `{` + n + `,"type":"chash","hash_on":"cookie"}`, `missing key`},
		{"vars_combinations without key", `{` + n + `,"type":"chash","hash_on":"vars_combinations"}`, `missing key`},
		{"consumer without key", `{` + n + `,"type":"chash","hash_on":"consumer"}`, ""},
		{"cookie key", `{` + n + `,"type":"chash","hash_on":"cookie","key":"a b"}`,
			`invalid configuration: failed to match pattern "^[a-zA-Z0-9-_]+$" with "a b"`},
		{"vars key http_", `{` + n + `,"type":"chash","hash_on":"vars","key":"http_x"}`,
			`invalid configuration: failed to match pattern ` + hashRE + ` with "http_x"`},
		{"vars key arg_ alone", `{` + n + `,"type":"chash","key":"arg_"}`,
			`invalid configuration: failed to match pattern ` + hashRE + ` with "arg_"`},
		{"vars_combinations key", `{` + n + `,"type":"chash","hash_on":"vars_combinations","key":"$arg_a-$http_x"}`, ""},
		{"key type", `{` + n + `,"type":"chash","hash_on":"vars_combinations","key":1}`,
			`invalid configuration: property "key" validation failed: wrong type: expected string, got number`},
		{"hash_on enum", `{` + n + `,"type":"chash","hash_on":"foo","key":"x"}`,
			`invalid configuration: property "hash_on" validation failed: matches none of the enum values`},
		{"hash_on without chash", `{` + n + `,"type":"roundrobin","hash_on":"header"}`, ""},

		// nodes, service_name and discovery_type
		{"neither", `{"type":"roundrobin"}`, `invalid configuration: value should match only one schema, but matches none`},
		{"service_name alone", `{"service_name":"s"}`, `invalid configuration: value should match only one schema, but matches none`},
		{"discovery_type alone", `{"discovery_type":"dns"}`, `invalid configuration: value should match only one schema, but matches none`},
		{"both", `{` + n + `,"service_name":"s","discovery_type":"dns"}`,
			`invalid configuration: value should match only one schema, but matches both schemas 1 and 2`},
		{"service_name with nodes", `{` + n + `,"service_name":"s"}`, ""},
		{"service_name empty", `{"service_name":"","discovery_type":"dns"}`,
			`invalid configuration: property "service_name" validation failed: string too short, expected at least 1, got 0`},
		{"discovery_args type", `{"service_name":"s","discovery_type":"dns","discovery_args":[]}`,
			`invalid configuration: property "discovery_args" validation failed: wrong type: expected object, got table`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := DecodeUpstream([]byte(tc.in))
			if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
				t.Fatalf("DecodeUpstream(%s) error (-want +got):\n%s", tc.in, diff)
			}
		})
	}
}

// TestRoundTrip checks that a decoded object marshals back in the form it
// was written: ids keep their JSON type, nodes their map or array form and
// order, vars their source, and no schema default is added.
func TestRoundTrip(t *testing.T) {
	tests := []struct{ in, want string }{
		{
			`{"id":1,"uri":"/hello","plugins":{},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1,"[::1]:80":2,"example.com":3}}}`,
			`{"id":1,"uri":"/hello","plugins":{},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1,"[::1]:80":2,"example.com":3}}}`,
		},
		{
			`{"id":"r1","uris":["/a"],"vars":[ ["arg_a", "!", "==", 1], ["http_x","Jack"] ],"upstream_id":"7","status":1}`,
			`{"id":"r1","uris":["/a"],"vars":[["arg_a","!","==",1],["http_x","Jack"]],"upstream_id":"7","status":1}`,
		},
		{
			`{"uri":"/a","upstream":{"nodes":[{"host":"b","weight":1},{"host":"a","port":81,"weight":0,"metadata":{"z":1,"a":[1]}}]},"service_id":3}`,
			`{"uri":"/a","upstream":{"nodes":[{"host":"b","weight":1},{"host":"a","port":81,"weight":0,"metadata":{"z":1,"a":[1]}}]},"service_id":3}`,
		},
		{
			`{"uri":"/a","plugins":{"limit-count":{"count":2,"time_window":60,"key":"remote_addr"}},"priority":0}`,
			`{"uri":"/a","priority":0,"plugins":{"limit-count":{"count":2,"time_window":60,"key":"remote_addr"}}}`,
		},
	}
	for _, tc := range tests {
		r, err := DecodeRoute([]byte(tc.in))
		if err != nil {
			t.Fatalf("DecodeRoute(%s): %v", tc.in, err)
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(tc.want, string(b)); diff != "" {
			t.Errorf("marshal (-want +got):\n%s", diff)
		}
		// Stored values are read back with encoding/json.
		var back Route
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", b, err)
		}
		if err := back.Validate(); err != nil {
			t.Fatalf("re-read route invalid: %v", err)
		}
		b2, _ := json.Marshal(&back)
		if diff := cmp.Diff(string(b), string(b2)); diff != "" {
			t.Errorf("second round trip (-first +second):\n%s", diff)
		}
	}
}

func TestDecodedFields(t *testing.T) {
	r, err := DecodeRoute([]byte(`{"id":7,"uri":"/a","vars":[["Arg_A","IN",["x"]],["http_y","!","~*","^A"],["arg_z","JACK"]],
		"upstream":{"nodes":{"[::1]:8080":2,"h":1,"::2":3}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := r.ID, NumID(7); got != want {
		t.Errorf("ID = %#v, want %#v", got, want)
	}
	wantVars := []VarExpr{
		{Var: "Arg_A", Op: "in", Value: json.RawMessage(`["x"]`)},
		{Var: "http_y", Not: true, Op: "~*", Value: json.RawMessage(`"^A"`)},
		{Var: "arg_z", Op: "==", Value: json.RawMessage(`"jack"`)},
	}
	got := make([]VarExpr, len(r.Rare().Vars))
	for i, v := range r.Rare().Vars {
		v.Source = nil
		got[i] = v
	}
	if diff := cmp.Diff(wantVars, got); diff != "" {
		t.Errorf("vars (-want +got):\n%s", diff)
	}
	wantNodes := []Node{{Host: "::1", Port: 8080, Weight: 2}, {Host: "h", Weight: 1}, {Host: "::2", Weight: 3}}
	if diff := cmp.Diff(wantNodes, r.Upstream.Nodes.List); diff != "" {
		t.Errorf("nodes (-want +got):\n%s", diff)
	}
	if !r.Upstream.Nodes.IsMap {
		t.Error("nodes not marked as map form")
	}
}

// TestValidateBuilt checks Validate on objects built in code, not decoded.
func TestValidateBuilt(t *testing.T) {
	one := 1
	tests := []struct {
		name string
		r    Route
		want string
	}{
		{"ok", Route{URI: "/a", UpstreamID: StringID("u")}, ""},
		{"bad var op", Route{URI: "/a", UpstreamID: StringID("u"), Extra: &RouteExtra{Vars: Vars{{Var: "a", Op: "="}}}},
			`failed to validate the 'vars' expression: invalid operator '='`},
		{"bad node", Route{URI: "/a", Upstream: &Upstream{Nodes: Nodes{List: []Node{{Host: "a", Port: 70000, Weight: 1}}}}},
			`invalid configuration: property "upstream" validation failed: property "nodes" validation failed: object matches none of the required`},
		{"bad id", Route{ID: NumID(0), URI: "/a", UpstreamID: StringID("u")},
			`invalid configuration: property "id" validation failed: object matches none of the required`},
		{"status", Route{URI: "/a", UpstreamID: StringID("u"), Status: &one}, ""},
	}
	for _, tc := range tests {
		if diff := cmp.Diff(tc.want, errText(tc.r.Validate())); diff != "" {
			t.Errorf("%s: Validate (-want +got):\n%s", tc.name, diff)
		}
	}
}

func FuzzDecodeRoute(f *testing.F) {
	for _, s := range []string{
		`{"uri":"/hello","plugins":{},` + up + `}`,
		`{"id":1,"uris":["/a"],"vars":[["a","!","==",1]],"upstream":{"nodes":[{"host":"a","weight":1}]}}`,
		`{"uri":"/a","service_id":"x","timeout":{"connect":1,"send":1,"read":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := DecodeRoute(data)
		if err != nil {
			return
		}
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatalf("marshal a valid route: %v", err)
		}
		r2, err := DecodeRoute(b)
		if err != nil {
			t.Fatalf("a marshalled valid route does not decode: %v\n%s", err, b)
		}
		b2, _ := json.Marshal(r2)
		if string(b) != string(b2) {
			t.Fatalf("round trip differs:\n%s\n%s", b, b2)
		}
	})
}
