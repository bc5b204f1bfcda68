package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPICors configures cors through the Admin API (stored in etcd)
// and sees its effect with a real client: a configuration APISIX refuses
// is refused with its message; a preflight is answered by the gateway,
// the upstream not contacted; a proxied response gets the headers, its
// own Vary kept beside "Vary: Origin"; an origin not allowed gets none;
// origins of the plugin metadata are allowed once it is stored. The plugin
// is in the plugin list, with its schema.
func TestAdminAPICors(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Vary", "Via")
		_, _ = w.Write([]byte("hello world"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"cors"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/cors", ""); r.status != 200 || !strings.Contains(r.body, `"allow_origins_by_regex"`) {
		t.Fatalf("schema/plugins/cors: %d %s", r.status, r.body)
	}
	r := admin.do(t, c, "PUT", "routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"cors":{"allow_credential":true}},"upstream":{"nodes":{%q:1}}}`, up.Addr()))
	if r.status != 400 || !strings.Contains(r.body, `failed to check the configuration of plugin cors err: you can not set '*' for other option when 'allow_credential' is true`) {
		t.Fatalf("'*' with credentials: %d %s", r.status, r.body)
	}
	conf := `{"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_methods":"GET,POST","allow_headers":"headr1,headr2",` +
		`"expose_headers":"ex-headr1,ex-headr2","max_age":50,"allow_credential":true}`
	if r := admin.do(t, c, "PUT", "routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"cors":%s},"upstream":{"nodes":{%q:1}}}`, conf, up.Addr())); r.status != 201 {
		t.Fatalf("PUT routes/1: %d %s", r.status, r.body)
	}
	origin := map[string]string{"Origin": "http://sub2.domain.com"}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", origin, nil); r.header.Get("Access-Control-Allow-Origin") != "http://sub2.domain.com" {
			return fmt.Errorf("GET /hello: %d %v", r.status, r.header)
		}
		return nil
	})
	want := map[string]string{
		"Access-Control-Allow-Origin":      "http://sub2.domain.com",
		"Access-Control-Allow-Methods":     "GET,POST",
		"Access-Control-Allow-Headers":     "headr1,headr2",
		"Access-Control-Expose-Headers":    "ex-headr1,ex-headr2",
		"Access-Control-Max-Age":           "50",
		"Access-Control-Allow-Credentials": "true",
	}
	check := func(what string, r result, want map[string]string) {
		t.Helper()
		for k, v := range want {
			if got := r.header.Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", what, k, got, v)
			}
		}
	}
	r = do(t, c, "GET", g.url("/hello"), "", origin, nil)
	if r.status != 200 || r.body != "hello world" || strings.Join(r.header.Values("Vary"), ", ") != "Via, Origin" {
		t.Fatalf("GET /hello: %d %q, Vary %q", r.status, r.body, r.header.Values("Vary"))
	}
	check("GET", r, want)

	before := hits.Load()
	r = do(t, c, "OPTIONS", g.url("/hello"), "", origin, nil)
	if r.status != 200 || r.body != "" || hits.Load() != before {
		t.Fatalf("preflight: %d %q, upstream hits %d → %d", r.status, r.body, before, hits.Load())
	}
	check("preflight", r, want)

	r = do(t, c, "GET", g.url("/hello"), "", map[string]string{"Origin": "http://sub3.domain.com"}, nil)
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("Access-Control-Allow-Methods") != "" {
		t.Fatalf("an origin not allowed: %d %v", r.status, r.header)
	}

	// Origins by the plugin metadata: none until it is stored.
	if r := admin.do(t, c, "PUT", "plugin_metadata/cors", `{"allow_origins":{"key_1":"no-scheme.com"}}`); r.status != 400 {
		t.Fatalf("invalid metadata: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "PUT", "routes/2", fmt.Sprintf(`{"uri":"/meta","plugins":{"cors":{"allow_origins_by_metadata":["key_1"]}},"upstream":{"nodes":{%q:1}}}`, up.Addr())); r.status != 201 {
		t.Fatalf("PUT routes/2: %d %s", r.status, r.body)
	}
	meta := map[string]string{"Origin": "https://domain.com"}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/meta"), "", meta, nil); r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" {
			return fmt.Errorf("GET /meta before the metadata: %d %v", r.status, r.header)
		}
		return nil
	})
	if r := admin.do(t, c, "PUT", "plugin_metadata/cors", `{"allow_origins":{"key_1":"https://domain.com,https://other.com"}}`); r.status != 201 {
		t.Fatalf("PUT metadata: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/meta"), "", meta, nil); r.header.Get("Access-Control-Allow-Origin") != "https://domain.com" {
			return fmt.Errorf("GET /meta after the metadata: %d %v", r.status, r.header)
		}
		return nil
	})
}
