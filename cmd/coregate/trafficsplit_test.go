package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/internal/e2e"
)

// TestAdminAPITrafficSplit runs traffic-split through the binary,
// configured through the Admin API: the plugin is listed with its schema;
// a configuration whose vars are malformed is 400 with APISIX's text and
// not stored; weights 1:2:3 over the route's own upstream, an upstream
// object and an inline upstream split 60 requests exactly so (one worker);
// a match rule on a header sends only the requests it holds for to its
// upstream; the upstream object named by the plugin cannot be deleted.
func TestAdminAPITrafficSplit(t *testing.T) {
	t.Parallel()
	a, b, c := e2e.TextUpstream(t, "a"), e2e.TextUpstream(t, "b"), e2e.TextUpstream(t, "c")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	cl := newClient(t)
	admin := legacyAdmin(adminPort)

	r := admin.do(t, cl, "GET", "plugins/list", "")
	var names []string
	if err := json.Unmarshal([]byte(r.body), &names); err != nil || !slices.Contains(names, "traffic-split") {
		t.Fatalf("plugins/list: %d %s (%v)", r.status, r.body, err)
	}
	if r := admin.do(t, cl, "GET", "schema/plugins/traffic-split", ""); r.status != 200 || !strings.Contains(r.body, `"weighted_upstreams"`) {
		t.Fatalf("schema/plugins/traffic-split: %d %s", r.status, r.body)
	}

	r = admin.do(t, cl, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"traffic-split":{"rules":[{"match":[{"vars":[["arg_name",123,"jack"]]}]}]}},`+
		`"upstream":{"nodes":{"`+a.Addr()+`":1}}}`)
	if r.status != 400 || !strings.HasPrefix(r.body, `{"error_msg":"failed to check the configuration of plugin traffic-split err: failed to validate the 'vars' expression: invalid operator '123'"`) {
		t.Fatalf("PUT a refused configuration: %d %s", r.status, r.body)
	}
	if r := admin.do(t, cl, "GET", "routes/bad", ""); r.status != 404 {
		t.Fatalf("the refused route was stored: %d %s", r.status, r.body)
	}

	if r := admin.do(t, cl, "PUT", "upstreams/u1", `{"type":"roundrobin","nodes":{"`+b.Addr()+`":1}}`); r.status != 201 {
		t.Fatalf("PUT upstream: %d %s", r.status, r.body)
	}
	inline := `{"type":"roundrobin","nodes":{"` + c.Addr() + `":1},"timeout":{"connect":5,"send":5,"read":5}}`
	r = admin.do(t, cl, "PUT", "routes/1", `{"uri":"/split","plugins":{"traffic-split":{"rules":[{"weighted_upstreams":[`+
		`{"weight":1},{"upstream_id":"u1","weight":2},{"upstream":`+inline+`,"weight":3}]}]}},`+
		`"upstream":{"nodes":{"`+a.Addr()+`":1}}}`)
	if r.status != 201 {
		t.Fatalf("PUT route 1: %d %s", r.status, r.body)
	}
	r = admin.do(t, cl, "PUT", "routes/2", `{"uri":"/canary","plugins":{"traffic-split":{"rules":[{"match":[{"vars":[["http_release","==","new"]]}],`+
		`"weighted_upstreams":[{"upstream_id":"u1"}]}]}},"upstream":{"nodes":{"`+a.Addr()+`":1}}}`)
	if r.status != 201 {
		t.Fatalf("PUT route 2: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, cl, "GET", g.url("/canary"), "", nil, nil); r.status != 200 || r.body != "a" {
			return fmt.Errorf("GET /canary = %d %q", r.status, r.body)
		}
		return nil
	})

	count := map[string]int{}
	for range 60 {
		r := do(t, cl, "GET", g.url("/split"), "", nil, nil)
		if r.status != 200 {
			t.Fatalf("/split: %d %q", r.status, r.body)
		}
		count[r.body]++
	}
	if want := map[string]int{"a": 10, "b": 20, "c": 30}; fmt.Sprint(count) != fmt.Sprint(want) {
		t.Fatalf("weights 1:2:3 over 60 requests: %v, want %v", count, want)
	}
	if r := do(t, cl, "GET", g.url("/canary"), "", map[string]string{"Release": "new"}, nil); r.status != 200 || r.body != "b" {
		t.Fatalf("/canary with the header: %d %q", r.status, r.body)
	}
	if r := do(t, cl, "GET", g.url("/canary"), "", map[string]string{"Release": "old"}, nil); r.status != 200 || r.body != "a" {
		t.Fatalf("/canary with another value: %d %q", r.status, r.body)
	}

	r = admin.do(t, cl, "DELETE", "upstreams/u1", "")
	if r.status != 400 || strings.TrimSpace(r.body) != `{"error_msg":"can not delete this upstream, plugin in route [1] is still using it now"}` {
		t.Fatalf("DELETE the upstream the plugin names: %d %s", r.status, r.body)
	}
}
