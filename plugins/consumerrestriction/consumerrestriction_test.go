package consumerrestriction

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

// request is one request: its method, the consumer an authentication
// plugin attached ("" for none) and that consumer's group, and its
// route's and service's ids.
type request struct {
	method, consumer, group, route, service string
}

func (r request) ctx() *plugintest.Ctx {
	m := r.method
	if m == "" {
		m = "GET"
	}
	c := plugintest.NewCtx(m, "/hello")
	if r.route != "" {
		c.WithRoute(r.route)
	}
	if r.service != "" {
		c.WithVar("service_id", r.service)
	}
	if r.consumer != "" {
		c.SetConsumer(&plugins.Consumer{Username: r.consumer, GroupID: r.group})
	}
	return c
}

const (
	forbidden    = `{"message":"The consumer_name is forbidden."}` + "\n"
	noConsumer   = `{"message":"The request is rejected, please check the consumer_name for this request"}` + "\n"
	svcForbidden = `{"message":"The service_id is forbidden."}` + "\n"
	noService    = `{"message":"The request is rejected, please check the service_id for this request"}` + "\n"
)

// TestAccess follows t/plugin/consumer-restriction.t: the lists, the
// methods, the codes and messages.
func TestAccess(t *testing.T) {
	for _, tc := range []struct {
		name   string
		conf   string
		req    request
		status int
		body   string
	}{
		{"whitelisted", `{"whitelist":["jack1"]}`, request{consumer: "jack1"}, 200, ""},
		{"not whitelisted", `{"whitelist":["jack1"]}`, request{consumer: "jack2"}, 403, forbidden},
		{"no consumer", `{"whitelist":["jack1"]}`, request{}, 401, noConsumer},
		{"blacklisted", `{"blacklist":["jack1"]}`, request{consumer: "jack1"}, 403, forbidden},
		{"not blacklisted", `{"blacklist":["jack1"]}`, request{consumer: "jack2"}, 200, ""},
		{"blacklist before whitelist", `{"blacklist":["jack1"],"whitelist":["jack1"]}`, request{consumer: "jack1"}, 403, forbidden},
		{"rejected_code", `{"blacklist":["jack1"],"rejected_code":401}`, request{consumer: "jack1"}, 401, forbidden},
		{"rejected_msg", `{"blacklist":["jack1"],"rejected_msg":"request is forbidden"}`, request{consumer: "jack1"},
			403, `{"message":"request is forbidden"}` + "\n"},
		{"rejected_msg escaped", `{"blacklist":["jack1"],"rejected_msg":"no \"<jack>\""}`, request{consumer: "jack1"},
			403, `{"message":"no \"<jack>\""}` + "\n"},
		{"case matters", `{"whitelist":["jack1"]}`, request{consumer: "Jack1"}, 403, forbidden},

		// allowed_by_methods.
		{"method allowed", `{"allowed_by_methods":[{"user":"jack1","methods":["POST","GET"]}]}`,
			request{method: "GET", consumer: "jack1"}, 200, ""},
		{"method not allowed", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`,
			request{method: "GET", consumer: "jack1"}, 403, forbidden},
		{"user not named", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`,
			request{method: "GET", consumer: "jack2"}, 200, ""},
		{"first entry decides", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]},{"user":"jack1","methods":["GET"]}]}`,
			request{method: "GET", consumer: "jack1"}, 403, forbidden},
		{"entry without user", `{"allowed_by_methods":[{"methods":["POST"]}]}`,
			request{method: "GET", consumer: "jack1"}, 200, ""},
		{"whitelisted skips methods", `{"whitelist":["jack1"],"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`,
			request{method: "GET", consumer: "jack1"}, 200, ""},
		{"not whitelisted, method allowed", `{"whitelist":["jack1"],"allowed_by_methods":[{"user":"jack2","methods":["GET"]}]}`,
			request{method: "GET", consumer: "jack2"}, 403, forbidden},
		{"empty allowed_by_methods", `{"allowed_by_methods":[]}`, request{consumer: "jack1"}, 200, ""},
		{"no consumer, methods", `{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}`, request{}, 401, noConsumer},

		// service_id and route_id.
		{"service whitelisted", `{"type":"service_id","whitelist":["1"]}`, request{consumer: "x", service: "1"}, 200, ""},
		{"service not whitelisted", `{"type":"service_id","whitelist":["1"],"rejected_code":401}`, request{service: "2"}, 401, svcForbidden},
		{"no service", `{"type":"service_id","whitelist":["1"]}`, request{}, 401, noService},
		{"route blacklisted", `{"type":"route_id","blacklist":["r1"]}`, request{route: "r1"}, 403,
			`{"message":"The route_id is forbidden."}` + "\n"},
		{"route not blacklisted", `{"type":"route_id","blacklist":["r1"]}`, request{route: "r2"}, 200, ""},
		{"route's methods", `{"type":"route_id","allowed_by_methods":[{"user":"r1","methods":["PUT"]}]}`,
			request{method: "PUT", route: "r1"}, 200, ""},

		// consumer_group_id (consumer-restriction2.t).
		{"group whitelisted", `{"type":"consumer_group_id","whitelist":["group1"]}`,
			request{consumer: "jack1", group: "group1"}, 200, ""},
		{"group not whitelisted", `{"type":"consumer_group_id","whitelist":["group1"]}`,
			request{consumer: "jack2", group: "group2"}, 403, `{"message":"The consumer_group_id is forbidden."}` + "\n"},
		{"group blacklisted", `{"type":"consumer_group_id","blacklist":["group1"],"rejected_msg":"request is forbidden"}`,
			request{consumer: "jack1", group: "group1"}, 403, `{"message":"request is forbidden"}` + "\n"},
		{"group not blacklisted", `{"type":"consumer_group_id","blacklist":["group1"]}`,
			request{consumer: "jack2", group: "group2"}, 200, ""},
		{"consumer without group", `{"type":"consumer_group_id","blacklist":["group1"]}`, request{consumer: "jack3"},
			401, `{"message":"The request is rejected, please check the consumer_group_id for this request"}` + "\n"},
		{"no consumer, group", `{"type":"consumer_group_id","whitelist":["group1"]}`, request{},
			401, `{"message":"The request is rejected, please check the consumer_group_id for this request"}` + "\n"},
		{"group's methods", `{"type":"consumer_group_id","allowed_by_methods":[{"user":"group1","methods":["POST"]}]}`,
			request{method: "GET", consumer: "jack1", group: "group1"}, 403, `{"message":"The consumer_group_id is forbidden."}` + "\n"},
		{"group not the name", `{"type":"consumer_group_id","whitelist":["jack1"]}`,
			request{consumer: "jack1", group: "group1"}, 403, `{"message":"The consumer_group_id is forbidden."}` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf)
			c := tc.req.ctx()
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

// TestSchema: APISIX's schema (TESTs 1 and 2 of consumer-restriction.t)
// and its messages.
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		conf string
		want string
	}{
		{`{"title":"whitelist","whitelist":["jack1","jack2"]}`, ""},
		{`{"whitelist":["jack1"],"blacklist":["jack2"],"allowed_by_methods":[]}`, ""},
		{`{"type":"route_id","blacklist":["1"],"rejected_code":200,"rejected_msg":""}`, ""},
		{`{}`, `failed to check the configuration of plugin consumer-restriction err: object matches none of the required: ["blacklist"] or ["whitelist"] or ["allowed_by_methods"]`},
		{`{"rejected_code":403}`, `object matches none of the required: ["blacklist"] or ["whitelist"] or ["allowed_by_methods"]`},
		{`{"whitelist":[]}`, `property "whitelist" validation failed: expect array to have at least 1 items`},
		{`{"blacklist":[1]}`, `property "blacklist" validation failed: failed to validate item 1: wrong type: expected string, got number`},
		{`{"type":"consumer","whitelist":["a"]}`, `property "type" validation failed: matches none of the enum values`},
		{`{"whitelist":["a"],"rejected_code":199}`, `property "rejected_code" validation failed: expected 199 to be at least 200`},
		{`{"allowed_by_methods":[{"user":"a","methods":["get"]}]}`,
			`property "allowed_by_methods" validation failed: failed to validate item 1: property "methods" validation failed: failed to validate item 1: matches none of the enum values`},
		{`{"allowed_by_methods":[{"user":"a","methods":[]}]}`,
			`property "allowed_by_methods" validation failed: failed to validate item 1: property "methods" validation failed: expect array to have at least 1 items`},
		{`{"type":"consumer_group_id","whitelist":["g"]}`, ""},
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
