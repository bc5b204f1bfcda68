package adminapi

import (
	"strings"
	"testing"

	"coregate/admin/spec"
)

func TestPluginEndpoints(t *testing.T) {
	c := newTestServer(t)
	// By priority, highest first.
	c.want(c.do("GET", "/apisix/admin/plugins/list", ""), 200, `["key-auth","limit-count","prometheus"]`)
	c.want(c.do("GET", "/apisix/admin/plugins/list?subsystem=http", ""), 200, `["key-auth","limit-count","prometheus"]`)
	c.want(c.do("GET", "/apisix/admin/plugins/list?subsystem=stream", ""), 200, `[]`)
	r := c.do("GET", "/apisix/admin/plugins/list?subsystem=udp", "")
	if r.status != 400 || string(r.body) != "invalid subsystem passed" {
		t.Fatalf("subsystem udp: %d %q", r.status, r.body)
	}

	// A plugin's schema is the registry's: the one its configurations
	// are checked with.
	want, _ := testPlugins.Schema("limit-count")
	for _, p := range []string{"/apisix/admin/plugins/limit-count", "/apisix/admin/schema/plugins/limit-count"} {
		r := c.do("GET", p, "")
		if r.status != 200 || string(r.body) != string(want) {
			t.Fatalf("%s: %d %s", p, r.status, r.body)
		}
	}
	c.want(c.do("GET", "/apisix/admin/plugins/nope", ""), 404, `{"error_msg":"plugin not found in subsystem http"}`)
	c.want(c.do("GET", "/apisix/admin/plugins/limit-count?subsystem=stream", ""), 404, `{"error_msg":"plugin not found in subsystem stream"}`)
	c.want(c.do("GET", "/apisix/admin/plugins/limit-count?subsystem=udp", ""), 400, `{"error_msg":"unsupported subsystem: udp"}`)

	c.want(c.do("PUT", "/apisix/admin/plugins/reload", ""), 200, "")
	c.want(c.do("GET", "/apisix/admin/plugins/reload", ""), 405,
		`{"error_msg":"please use PUT method to reload the plugins, GET method is not allowed."}`)
}

func TestSchemaEndpoints(t *testing.T) {
	c := newTestServer(t)
	for _, kind := range []string{spec.KindRoute, spec.KindService, spec.KindUpstream, spec.KindConsumer, spec.KindPluginConfig, spec.KindGlobalRule} {
		r := c.do("GET", "/apisix/admin/schema/"+kind, "")
		if r.status != 200 || string(r.body) != string(spec.ObjectSchema(kind)) {
			t.Fatalf("schema %s: %d %.200s", kind, r.status, r.body)
		}
	}
	for _, kind := range []string{"ssl", "credential"} {
		r := c.do("GET", "/apisix/admin/schema/"+kind, "")
		if r.status != 200 || !strings.Contains(string(r.body), `"additionalProperties":false`) || strings.Contains(string(r.body), "$ref") {
			t.Fatalf("schema %s: %d %s", kind, r.status, r.body)
		}
	}
	c.want(c.do("GET", "/apisix/admin/schema/nope", ""), 400, `{"error_msg":"not found schema: nope"}`)

	// validate: the schema alone, its message without APISIX's
	// "invalid configuration: " prefix.
	r := c.do("POST", "/apisix/admin/schema/validate/routes", `{"uri":"/a","upstream_id":"not-there"}`)
	if r.status != 200 || len(r.body) != 0 {
		t.Fatalf("valid: %d %q", r.status, r.body)
	}
	c.want(c.do("POST", "/apisix/admin/schema/validate/routes", `{"uri":"/a","methods":["FOO"]}`), 400,
		`{"error_msg":"property \"methods\" validation failed: failed to validate item 1: matches none of the enum values","field":"methods[0]","detail":"value \"FOO\", expected one of \"GET\", \"POST\", \"PUT\", \"DELETE\", \"PATCH\", \"HEAD\", \"OPTIONS\", \"CONNECT\", \"TRACE\", \"PURGE\""}`)
	c.want(c.do("POST", "/apisix/admin/schema/validate/upstreams", `{"nodes":{"a:1":1},"foo":1}`), 400, "")
	c.want(c.do("POST", "/apisix/admin/schema/validate/ssls", `{"cert":"x"}`), 400, "")
	c.want(c.do("POST", "/apisix/admin/schema/validate/nope", `{}`), 404, `{"error_msg":"Unsupported resource type: nope"}`)
	r = c.do("POST", "/apisix/admin/schema/validate/routes", `{"uri"`)
	if m := r.json(t); r.status != 400 || m["req_body"] != `{"uri"` {
		t.Fatalf("bad JSON: %d %s", r.status, r.body)
	}
	kvs, _, _ := c.st.List(t.Context(), c.st.Prefix()+"/")
	if len(kvs) != 0 {
		t.Fatalf("validate stored %d keys", len(kvs))
	}
}
