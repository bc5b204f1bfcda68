package main

import (
	"encoding/base64"
	"fmt"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIConsumerRestriction: consumer-restriction configured through
// the Admin API on routes (by consumer, with methods, by service) and on a
// consumer (by route): a real client, authenticated by basic-auth, gets
// APISIX's answers; invalid configurations are refused with 400; the
// plugin is listed with its schema.
func TestAdminAPIConsumerRestriction(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string, want int) result {
		t.Helper()
		r := admin.do(t, c, "PUT", path, body)
		if r.status != want {
			t.Fatalf("PUT %s: %d %s, want %d", path, r.status, r.body, want)
		}
		return r
	}
	basic := func(user string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":pw"))}
	}

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"consumer-restriction"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	r := do(t, c, "GET", fmt.Sprintf("http://127.0.0.1:%d/apisix/admin/schema/plugins/consumer-restriction", adminPort), "",
		map[string]string{"X-API-KEY": adminapi.LegacyAdminKey}, nil)
	if r.status != 200 || !strings.Contains(r.body, `"allowed_by_methods"`) {
		t.Fatalf("schema: %d %s", r.status, r.body)
	}

	for _, tc := range []struct{ conf, want string }{
		{`{}`, `object matches none of the required: [\"blacklist\"] or [\"whitelist\"] or [\"allowed_by_methods\"]`},
		{`{"whitelist":[]}`, `property \"whitelist\" validation failed: expect array to have at least 1 items`},
		{`{"type":"consumer","whitelist":["g"]}`, `property \"type\" validation failed: matches none of the enum values`},
	} {
		r := put("routes/bad", fmt.Sprintf(`{"uri":"/bad","plugins":{"consumer-restriction":%s},"upstream":{"nodes":{%q:1}}}`, tc.conf, up.Addr()), 400)
		if !strings.Contains(r.body, "failed to check the configuration of plugin consumer-restriction err: "+tc.want) {
			t.Errorf("%s: %s", tc.conf, r.body)
		}
	}
	if r := admin.do(t, c, "GET", "routes/bad", ""); r.status != 404 {
		t.Fatalf("an invalid route was stored: %d %s", r.status, r.body)
	}

	for _, u := range []string{"jack1", "jack2"} {
		put("consumers", fmt.Sprintf(`{"username":%q,"plugins":{"basic-auth":{"username":%q,"password":"pw"}}}`, u, u), 201)
	}
	put("routes/white", fmt.Sprintf(`{"uri":"/white","plugins":{"basic-auth":{},"consumer-restriction":{"whitelist":["jack1"]}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("routes/black", fmt.Sprintf(`{"uri":"/black","plugins":{"basic-auth":{},"consumer-restriction":{"blacklist":["jack1"],"rejected_code":401,"rejected_msg":"request is forbidden"}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("routes/methods", fmt.Sprintf(`{"uri":"/methods","plugins":{"basic-auth":{},"consumer-restriction":{"allowed_by_methods":[{"user":"jack1","methods":["POST"]}]}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("services/s1", fmt.Sprintf(`{"plugins":{"consumer-restriction":{"type":"service_id","whitelist":["s2"]}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("routes/svc", `{"uri":"/svc","service_id":"s1"}`, 201)
	put("routes/nosvc", fmt.Sprintf(`{"uri":"/nosvc","plugins":{"consumer-restriction":{"type":"service_id","whitelist":["s1"]}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/nosvc"), "", nil, nil); r.status != 401 {
			return fmt.Errorf("/nosvc: %d %q", r.status, r.body)
		}
		return nil
	})

	const (
		forbidden  = `{"message":"The consumer_name is forbidden."}` + "\n"
		noConsumer = `{"message":"The request is rejected, please check the consumer_name for this request"}` + "\n"
	)
	for _, tc := range []struct {
		name, method, path string
		hdr                map[string]string
		status             int
		body               string
	}{
		{"whitelisted", "GET", "/white", basic("jack1"), 200, ""},
		{"not whitelisted", "GET", "/white", basic("jack2"), 403, forbidden},
		{"blacklisted", "GET", "/black", basic("jack1"), 401, `{"message":"request is forbidden"}` + "\n"},
		{"not blacklisted", "GET", "/black", basic("jack2"), 200, ""},
		{"method not allowed", "GET", "/methods", basic("jack1"), 403, forbidden},
		{"method allowed", "POST", "/methods", basic("jack1"), 200, ""},
		{"user not named", "GET", "/methods", basic("jack2"), 200, ""},
		{"service not whitelisted", "GET", "/svc", nil, 403, `{"message":"The service_id is forbidden."}` + "\n"},
		{"no service", "GET", "/nosvc", nil, 401, `{"message":"The request is rejected, please check the service_id for this request"}` + "\n"},
	} {
		r := do(t, c, tc.method, g.url(tc.path), "", tc.hdr, nil)
		if r.status != tc.status || tc.status != 200 && r.body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.body, tc.status, tc.body)
		}
		if tc.status == 200 {
			if e := upstreamSaw(t, r); e.get("X-Consumer-Username") == "" {
				t.Errorf("%s: upstream saw %+v", tc.name, e)
			}
		}
	}

	// Without a consumer, a consumer_name restriction answers 401 (a
	// route that authenticates no one).
	put("routes/anon", fmt.Sprintf(`{"uri":"/anon","plugins":{"consumer-restriction":{"whitelist":["jack1"]}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	// On a consumer, by route: jack2 may not use the route white2.
	put("consumers", `{"username":"jack2","plugins":{"basic-auth":{"username":"jack2","password":"pw"},"consumer-restriction":{"type":"route_id","blacklist":["white2"]}}}`, 200)
	put("routes/white2", fmt.Sprintf(`{"uri":"/white2","plugins":{"basic-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/white2"), "", basic("jack2"), nil); r.status != 403 || r.body != `{"message":"The route_id is forbidden."}`+"\n" {
			return fmt.Errorf("jack2 on /white2: %d %q", r.status, r.body)
		}
		return nil
	})
	if r := do(t, c, "GET", g.url("/white2"), "", basic("jack1"), nil); r.status != 200 {
		t.Errorf("jack1 on /white2: %d %q", r.status, r.body)
	}
	if r := do(t, c, "GET", g.url("/anon"), "", nil, nil); r.status != 401 || r.body != noConsumer {
		t.Errorf("/anon: %d %q", r.status, r.body)
	}
}

// TestAdminAPIConsumerRestrictionGroup follows consumer-restriction2.t:
// a route restricted by consumer_group_id lets a consumer of a
// whitelisted group through, refuses one of another group, and answers
// 401 to a consumer in no group; a blacklist refuses its group.
func TestAdminAPIConsumerRestrictionGroup(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string, want int) {
		t.Helper()
		if r := admin.do(t, c, "PUT", path, body); r.status != want {
			t.Fatalf("PUT %s: %d %s, want %d", path, r.status, r.body, want)
		}
	}
	basic := func(user string) map[string]string {
		return map[string]string{"Authorization": "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":pw"))}
	}

	put("consumer_groups/group1", `{"plugins":{}}`, 201)
	put("consumer_groups/group2", `{"plugins":{}}`, 201)
	put("consumers", `{"username":"jack1","group_id":"group1","plugins":{"basic-auth":{"username":"jack1","password":"pw"}}}`, 201)
	put("consumers", `{"username":"jack2","group_id":"group2","plugins":{"basic-auth":{"username":"jack2","password":"pw"}}}`, 201)
	put("consumers", `{"username":"jack3","plugins":{"basic-auth":{"username":"jack3","password":"pw"}}}`, 201)
	put("routes/white", fmt.Sprintf(`{"uri":"/white","plugins":{"basic-auth":{},"consumer-restriction":{"type":"consumer_group_id","whitelist":["group1"]}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("routes/black", fmt.Sprintf(`{"uri":"/black","plugins":{"basic-auth":{},"consumer-restriction":{"type":"consumer_group_id","blacklist":["group1"],"rejected_msg":"request is forbidden"}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/black"), "", basic("jack2"), nil); r.status != 200 {
			return fmt.Errorf("jack2 on /black: %d %q", r.status, r.body)
		}
		return nil
	})

	const noGroup = `{"message":"The request is rejected, please check the consumer_group_id for this request"}` + "\n"
	for _, tc := range []struct {
		name, path, user string
		status           int
		body             string
	}{
		{"group whitelisted", "/white", "jack1", 200, ""},
		{"other group", "/white", "jack2", 403, `{"message":"The consumer_group_id is forbidden."}` + "\n"},
		{"no group", "/white", "jack3", 401, noGroup},
		{"group blacklisted", "/black", "jack1", 403, `{"message":"request is forbidden"}` + "\n"},
		{"no group, blacklist", "/black", "jack3", 401, noGroup},
	} {
		r := do(t, c, "GET", g.url(tc.path), "", basic(tc.user), nil)
		if r.status != tc.status || tc.status != 200 && r.body != tc.body {
			t.Errorf("%s: %d %q, want %d %q", tc.name, r.status, r.body, tc.status, tc.body)
		}
		if tc.status == 200 {
			if e := upstreamSaw(t, r); e.get("X-Consumer-Username") != tc.user {
				t.Errorf("%s: upstream saw %+v", tc.name, e)
			}
		}
	}
	if r := do(t, c, "GET", g.url("/white"), "", nil, nil); r.status != 401 || r.body != `{"message":"Missing authorization in request"}`+"\n" {
		t.Errorf("no authorization: %d %q", r.status, r.body)
	}
}
