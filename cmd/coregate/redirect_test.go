package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/internal/e2e"
)

// TestAdminAPIRedirect configures redirect through the Admin API (stored
// in etcd) and sees its effect with a real client that does not follow
// redirections: a configuration APISIX refuses is refused with its
// message; http_to_https sends a plain-http request to the node's https
// listener (its port from apisix.ssl.listen), 301 for GET and 308 for
// POST, and lets one X-Forwarded-Proto says came over https through;
// regex_uri redirects the paths it matches, with the gateway's page, the
// upstream not contacted, and lets the others through; uri with
// append_query_string keeps the query; encode_uri escapes the decoded
// path. The plugin is in the plugin list, with its schema.
func TestAdminAPIRedirect(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("hello world"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	admin := legacyAdmin(adminPort)

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"redirect"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/redirect", ""); r.status != 200 || !strings.Contains(r.body, `"http_to_https"`) {
		t.Fatalf("schema/plugins/redirect: %d %s", r.status, r.body)
	}
	route := func(uri, conf string) string {
		return fmt.Sprintf(`{"uri":%q,"plugins":{"redirect":%s},"upstream":{"nodes":{%q:1}}}`, uri, conf, up.Addr())
	}
	for conf, msg := range map[string]string{
		`{"http_to_https":true,"append_query_string":true}`: "failed to check the configuration of plugin redirect err: only one of `http_to_https` and `append_query_string` can be configured.",
		`{"http_to_https":true,"uri":"/x"}`:                 "failed to check the configuration of plugin redirect err: value should match only one schema, but matches both schemas 1 and 3",
		`{"regex_uri":["^/(a","/b"]}`:                       "failed to check the configuration of plugin redirect err: invalid regex_uri (^/(a, /b), err:failed to compile the regex",
	} {
		if r := admin.do(t, c, "PUT", "routes/1", route("/hello", conf)); r.status != 400 || !strings.Contains(r.body, msg) {
			t.Errorf("%s: %d %s", conf, r.status, r.body)
		}
	}
	if r := admin.do(t, c, "GET", "routes/1", ""); r.status != 404 {
		t.Fatalf("a refused route was stored: %d %s", r.status, r.body)
	}

	for id, body := range map[string]string{
		"1": route("/hello", `{"http_to_https":true}`),
		"2": route("/test*", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301}`),
		"3": route("/q", `{"uri":"$uri?type=string","append_query_string":true}`),
		"4": route("/files/*", `{"uri":"/archive$uri","encode_uri":true}`),
	} {
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	https := fmt.Sprintf("https://foo.com:%d/hello?a=1", e2e.TLSPort(g.Port))
	eventually(t, 10*time.Second, func() error {
		for _, path := range []string{"/hello", "/test/1", "/q", "/files/x"} {
			if r := do(t, c, "GET", g.url(path), "", nil, nil); r.status == 404 {
				return fmt.Errorf("GET %s: %d", path, r.status)
			}
		}
		return nil
	})
	before := hits.Load()
	for _, tc := range []struct {
		method, path string
		hdr          map[string]string
		status       int
		location     string
	}{
		{"GET", "/hello?a=1", nil, 301, https},
		{"HEAD", "/hello?a=1", nil, 301, https},
		{"POST", "/hello?a=1", nil, 308, https},
		{"GET", "/test/1", nil, 301, "http://test.com/1"},
		{"GET", "/q?name=json", nil, 302, "/q?type=string&name=json"},
		{"GET", "/q", nil, 302, "/q?type=string"},
		{"GET", "/files/with%20space", nil, 302, "/archive/files/with%20space"},
	} {
		r := do(t, c, tc.method, g.url(tc.path), "foo.com", tc.hdr, nil)
		if r.status != tc.status || r.header.Get("Location") != tc.location {
			t.Errorf("%s %s: %d, Location %q; want %d %q", tc.method, tc.path, r.status, r.header.Get("Location"), tc.status, tc.location)
		}
		if tc.method == "GET" && tc.status == 301 && !strings.Contains(r.body, "301 Moved Permanently") {
			t.Errorf("%s %s: body %q, want the gateway's page", tc.method, tc.path, r.body)
		}
	}
	if n := hits.Load(); n != before {
		t.Fatalf("the upstream was contacted %d times for redirected requests", n-before)
	}
	for _, tc := range []struct {
		path string
		hdr  map[string]string
	}{
		{"/hello", map[string]string{"X-Forwarded-Proto": "https"}},
		{"/testx", nil}, // the route's, not the pattern's
	} {
		if r := do(t, c, "GET", g.url(tc.path), "foo.com", tc.hdr, nil); r.status != 200 || r.body != "hello world" || r.header.Get("Location") != "" {
			t.Errorf("GET %s %v: %d %q, Location %q; want the upstream's answer", tc.path, tc.hdr, r.status, r.body, r.header.Get("Location"))
		}
	}
}

// TestRedirectHTTPSPortAttr: plugin_attr.redirect.https_port of the
// config.yaml is the port of http_to_https's target, in place of the
// TLS listener's (redirect.t TEST 17).
func TestRedirectHTTPSPortAttr(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello world")) })
	adminPort := freePort(t)
	config := func(port int) string {
		return strings.Replace(etcdConfig(adminPort, adminapi.LegacyAdminKey)(port), "plugin_attr:\n", "plugin_attr:\n  redirect:\n    https_port: 8443\n", 1)
	}
	g := startSupervisor(t, "", config, 1)
	c := newClient(t)
	c.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	admin := legacyAdmin(adminPort)
	body := fmt.Sprintf(`{"uri":"/hello","plugins":{"redirect":{"http_to_https":true}},"upstream":{"nodes":{%q:1}}}`, up.Addr())
	if r := admin.do(t, c, "PUT", "routes/1", body); r.status != 201 {
		t.Fatalf("PUT routes/1: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		r := do(t, c, "GET", g.url("/hello"), "foo.com", nil, nil)
		if r.status != 301 || r.header.Get("Location") != "https://foo.com:8443/hello" {
			return fmt.Errorf("GET /hello: %d, Location %q", r.status, r.header.Get("Location"))
		}
		return nil
	})
}
