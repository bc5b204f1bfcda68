package adminapi

import (
	"strings"
	"testing"
)

// The consumer group of APISIX's t/admin/consumer-group.t.
const companyA = `{"plugins":{"limit-count":{"count":2,"time_window":60,"rejected_code":503,"key":"remote_addr"}}}`

// TestConsumerGroups: /apisix/admin/consumer_groups as APISIX's
// (t/admin/consumer-group.t): PUT, GET, list, PATCH of the object and of a
// sub-path, no POST; plugins checked as a route's; a consumer names an
// existing group; a group in use is not deleted but with force=true.
func TestConsumerGroups(t *testing.T) {
	c := newTestServer(t)
	wantValue(t, c, c.do("PUT", "/apisix/admin/consumer_groups/company_a", companyA), 201,
		"/consumer_groups/company_a", `{"id":"company_a",`+companyA[1:])
	r := c.do("GET", "/apisix/admin/consumer_groups/company_a", "")
	c.want(r, 200, "")
	if v := r.json(t)["value"].(map[string]any); v["id"] != "company_a" || v["plugins"].(map[string]any)["limit-count"] == nil {
		t.Fatalf("GET: %s", r.body)
	}
	r = c.do("GET", "/apisix/admin/consumer_groups", "")
	if m := r.json(t); r.status != 200 || m["total"] == nil || len(m["list"].([]any)) != 1 {
		t.Fatalf("list: %d %s", r.status, r.body)
	}
	r = c.do("PATCH", "/apisix/admin/consumer_groups/company_a", `{"desc":"d","plugins":{"limit-count":{"count":3,"time_window":60,"rejected_code":503,"key":"remote_addr"}}}`)
	c.want(r, 200, "")
	if g := c.stored("/consumer_groups/company_a"); g["desc"] != "d" || !strings.Contains(string(encodeJSON(g["plugins"])), `"count":3`) {
		t.Fatalf("PATCH stored %v", g)
	}
	c.want(c.do("PATCH", "/apisix/admin/consumer_groups/company_a/plugins", `{"limit-count":{"count":2,"time_window":60,"rejected_code":503,"key":"remote_addr"}}`), 200, "")
	if g := c.stored("/consumer_groups/company_a"); !strings.Contains(string(encodeJSON(g["plugins"])), `"count":2`) {
		t.Fatalf("PATCH plugins stored %v", g)
	}
	c.want(c.do("POST", "/apisix/admin/consumer_groups", companyA), 405,
		"{\"error_msg\":\"not supported `POST` method for consumer group\"}")

	// Refusals, with APISIX's messages; nothing stored.
	r = c.do("PUT", "/apisix/admin/consumer_groups/company_b", `{"plugins":{"limit-count":{"rejected_code":503,"time_window":60,"key":"remote_addr"}}}`)
	c.want(r, 400, "")
	if m := r.json(t); !strings.HasPrefix(m["error_msg"].(string), "failed to check the configuration of plugin limit-count err: ") {
		t.Fatalf("invalid plugin: %s", r.body)
	}
	c.want(c.do("PUT", "/apisix/admin/consumer_groups/company_b", `{"plugins":{},"labels":"x"}`), 400,
		`{"error_msg":"invalid configuration: property \"labels\" validation failed: wrong type: expected object, got string","field":"labels","detail":"value \"x\""}`)
	c.want(c.do("PUT", "/apisix/admin/consumer_groups/company_b", `{"desc":"no plugins"}`), 400,
		`{"error_msg":"invalid configuration: property \"plugins\" is required"}`)
	c.want(c.do("PUT", "/apisix/admin/consumer_groups/company_b", `{"plugins":{"no-such-plugin":{}}}`), 400, "")
	if c.stored("/consumer_groups/company_b") != nil {
		t.Fatal("an invalid consumer group stored")
	}

	// A consumer in the group; one in a group that does not exist is
	// refused.
	wantValue(t, c, c.do("PUT", "/apisix/admin/consumers", `{"username":"foobar","group_id":"company_a","plugins":{"key-auth":{"key":"auth-one"}}}`), 201,
		"/consumers/foobar", `{"username":"foobar","group_id":"company_a","plugins":{"key-auth":{"key":"auth-one"}}}`)
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"other","group_id":"company_c"}`), 400,
		`{"error_msg":"failed to fetch consumer group info by consumer group id [company_c], response code: 404","field":"group_id"}`)
	if c.stored("/consumers/other") != nil {
		t.Fatal("a consumer of a missing group stored")
	}
	// A credential under the consumer does not keep the group.
	c.want(c.do("PUT", "/apisix/admin/consumers/foobar/credentials/c1", `{"plugins":{"key-auth":{"key":"auth-two"}}}`), 201, "")

	c.want(c.do("DELETE", "/apisix/admin/consumer_groups/company_a", ""), 400,
		`{"error_msg":"can not delete this consumer group, consumer [foobar] is still using it now"}`)
	if c.stored("/consumer_groups/company_a") == nil {
		t.Fatal("a group in use deleted")
	}
	// Out of the group, the group goes.
	c.want(c.do("PUT", "/apisix/admin/consumers/foobar", `{"username":"foobar","plugins":{"key-auth":{"key":"auth-one"}}}`), 200, "")
	c.want(c.do("DELETE", "/apisix/admin/consumer_groups/company_a", ""), 200, "")
	// force=true deletes one in use, as APISIX (consumer-group-force-delete.t).
	c.want(c.do("PUT", "/apisix/admin/consumer_groups/g2", companyA), 201, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/foobar", `{"username":"foobar","group_id":"g2"}`), 200, "")
	c.want(c.do("DELETE", "/apisix/admin/consumer_groups/g2", ""), 400, "")
	c.want(c.do("DELETE", "/apisix/admin/consumer_groups/g2?force=true", ""), 200, "")
	if c.stored("/consumer_groups/g2") != nil {
		t.Fatal("force=true did not delete")
	}

	// The schema endpoints know the kind.
	r = c.do("GET", "/apisix/admin/schema/consumer_group", "")
	if c.want(r, 200, ""); !strings.Contains(string(r.body), `"required":["id","plugins"]`) {
		t.Fatalf("schema: %s", r.body)
	}
	c.want(c.do("POST", "/apisix/admin/schema/validate/consumer_groups", `{"id":"x","plugins":{},"foo":1}`), 400,
		`{"error_msg":"additional properties forbidden, found foo"}`)
}

// The proto of APISIX's t/admin/protos.t.
const helloProto = `syntax = \"proto3\";\npackage helloworld;\nservice Greeter {\n  rpc SayHello (HelloRequest) returns (HelloReply) {}\n}\nmessage HelloRequest { string name = 1; }\nmessage HelloReply { string message = 1; }\n`

// TestProtos: /apisix/admin/protos as APISIX's (t/admin/protos.t): the
// schema, the content compiled ("invalid content: …"), POST but no PATCH.
func TestProtos(t *testing.T) {
	c := newTestServer(t)
	wantValue(t, c, c.do("PUT", "/apisix/admin/protos/1", `{"content":"`+helloProto+`"}`), 201,
		"/protos/1", `{"id":"1","content":"`+helloProto+`"}`)
	r := c.do("POST", "/apisix/admin/protos", `{"content":"`+helloProto+`","desc":"d"}`)
	c.want(r, 201, "")
	id, _ := r.json(t)["value"].(map[string]any)["id"].(string)
	if len(id) != 20 || c.stored("/protos/" + id)["desc"] != "d" {
		t.Fatalf("POST: %s", r.body)
	}
	c.want(c.do("PATCH", "/apisix/admin/protos/1", `{"desc":"x"}`), 405,
		"{\"error_msg\":\"not supported `PATCH` method for proto\"}")

	r = c.do("PUT", "/apisix/admin/protos/2", `{"content":"syntax = \"proto3\";\nmessage M { Missing a = 1; }"}`)
	c.want(r, 400, "")
	if m := r.json(t); m["error_msg"] != "invalid content: proto:2:13: field M.a: unknown type Missing" || m["field"] != "content" {
		t.Fatalf("invalid content: %s", r.body)
	}
	r = c.do("PUT", "/apisix/admin/protos/2", `{"content":"message"}`)
	if m := r.json(t); r.status != 400 || !strings.HasPrefix(m["error_msg"].(string), "invalid content: proto:1:") {
		t.Fatalf("syntax error: %d %s", r.status, r.body)
	}
	c.want(c.do("PUT", "/apisix/admin/protos/2", `{"desc":"x"}`), 400,
		`{"error_msg":"invalid configuration: property \"content\" is required"}`)
	c.want(c.do("PUT", "/apisix/admin/protos/2", `{"content":""}`), 400, "")
	if c.stored("/protos/2") != nil {
		t.Fatal("an invalid proto stored")
	}
	c.want(c.do("DELETE", "/apisix/admin/protos/1", ""), 200, "")
	c.want(c.do("GET", "/apisix/admin/protos/1", ""), 404, "")
}
