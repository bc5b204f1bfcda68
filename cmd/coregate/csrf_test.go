package main

import (
	"context"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPICSRF configures csrf through the Admin API and sees its
// effect with a real client and a real upstream: the key is stored
// encrypted in etcd; a GET gets the token cookie; a POST without the
// token, or with a cookie and header that differ, is refused with
// APISIX's message; one carrying the cookie's token back, or a token
// APISIX made with the same key (t/plugin/csrf.t), passes. The plugin is
// in the plugin list, with its schema.
func TestAdminAPICSRF(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello world"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"csrf"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/csrf", ""); r.status != 200 || !strings.Contains(r.body, `"apisix-csrf-token"`) {
		t.Fatalf("schema/plugins/csrf: %d %s", r.status, r.body)
	}
	route := func(conf string) string {
		return fmt.Sprintf(`{"uri":"/hello","plugins":{"csrf":%s},"upstream":{"nodes":{%q:1}}}`, conf, up.Addr())
	}
	if r := admin.do(t, c, "PUT", "routes/1", route(`{"expires":10}`)); r.status != 400 ||
		!strings.Contains(r.body, `failed to check the configuration of plugin csrf err: property \"key\" is required`) {
		t.Fatalf("no key: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "PUT", "routes/1", route(`{"key":"userkey","expires":1000000000}`)); r.status != 201 {
		t.Fatalf("PUT routes/1: %d %s", r.status, r.body)
	}
	kv, err := embeddedStore(t, g.dir).Get(context.Background(), "/apisix/routes/1")
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(kv.Value), "userkey") {
		t.Fatalf("etcd holds the key in clear: %s", kv.Value)
	}
	var cookie string
	eventually(t, 10*time.Second, func() error {
		r := do(t, c, "GET", g.url("/hello"), "", nil, nil)
		if cookie = r.header.Get("Set-Cookie"); r.status != 200 || cookie == "" {
			return fmt.Errorf("GET: %d, Set-Cookie %q", r.status, cookie)
		}
		return nil
	})
	m := regexp.MustCompile(`^apisix-csrf-token=([A-Za-z0-9+/=]+);path=/;SameSite=Lax;Expires=[A-Z][a-z]{2}, \d\d-[A-Z][a-z]{2}-\d\d+ \d\d:\d\d:\d\d GMT$`).FindStringSubmatch(cookie)
	if m == nil {
		t.Fatalf("Set-Cookie %q", cookie)
	}
	const apisixToken = "eyJyYW5kb20iOjAuNDI5ODYzMTk3MTYxMzksInNpZ24iOiI0ODRlMDY4NTkxMWQ5NmJhMDc5YzQ1ZGI0OTE2NmZkYjQ0ODhjODVkNWQ0NmE1Y2FhM2UwMmFhZDliNjE5OTQ2IiwiZXhwaXJlcyI6MjY0MzExOTYyNH0="
	for _, tc := range []struct {
		header, cookie string
		status         int
		body           string
	}{
		{"", "", 401, `{"error_msg":"no csrf token in headers"}`},
		{m[1], "", 401, `{"error_msg":"no csrf cookie"}`},
		{"wrongtoken", m[1], 401, `{"error_msg":"csrf token mismatch"}`},
		{"dGVzdA==", "dGVzdA==", 401, `{"error_msg":"Failed to verify the csrf token signature"}`},
		{m[1], m[1], 200, "hello world"},
		{apisixToken, apisixToken, 200, "hello world"},
	} {
		hdr := map[string]string{}
		if tc.header != "" {
			hdr["apisix-csrf-token"] = tc.header
		}
		if tc.cookie != "" {
			hdr["Cookie"] = "apisix-csrf-token=" + tc.cookie
		}
		r := do(t, c, "POST", g.url("/hello"), "", hdr, strings.NewReader("x=1"))
		if r.status != tc.status || strings.TrimSuffix(r.body, "\n") != tc.body {
			t.Fatalf("POST %.12s/%.12s: %d %q, want %d %q", tc.header, tc.cookie, r.status, r.body, tc.status, tc.body)
		}
		if r.header.Get("Set-Cookie") == "" {
			t.Errorf("POST %.12s/%.12s: no new token", tc.header, tc.cookie)
		}
	}
}
