package adminapi

import (
	"errors"
	"net/http"
	"strings"
	"testing"

	"coregate/admin/nodeconf"
)

func TestAuthTokenSources(t *testing.T) {
	c := newTestServer(t)
	c.key = ""
	missing := `{"error_msg":"failed to check token","description":"missing apikey"}`
	wrong := `{"error_msg":"failed to check token","description":"wrong apikey"}`

	c.want(c.do("GET", "/apisix/admin/routes", ""), 401, missing)
	c.want(c.do("GET", "/apisix/admin/routes", "", "X-API-KEY: nope"), 401, wrong)
	c.want(c.do("GET", "/apisix/admin/routes", "", "X-API-KEY: "+testKey), 200, `{"list":[],"total":0}`)
	c.want(c.do("GET", "/apisix/admin/routes?api_key="+testKey, ""), 200, "")
	c.want(c.do("GET", "/apisix/admin/routes", "", "Cookie: x_api_key="+testKey), 200, "")

	// APISIX's order: the query argument, then the header, then the cookie.
	c.want(c.do("GET", "/apisix/admin/routes?api_key=nope", "", "X-API-KEY: "+testKey), 401, wrong)
	c.want(c.do("GET", "/apisix/admin/routes?api_key="+testKey, "", "X-API-KEY: nope"), 200, "")
	c.want(c.do("GET", "/apisix/admin/routes", "", "X-API-KEY: nope", "Cookie: x_api_key="+testKey), 401, wrong)
	c.want(c.do("GET", "/apisix/admin/routes", "", "X-API-KEY: "+testKey, "Cookie: x_api_key=nope"), 200, "")

	// A key that differs in length or in its last byte.
	c.want(c.do("GET", "/apisix/admin/routes", "", "X-API-KEY: "+testKey+"x"), 401, wrong)
	c.want(c.do("GET", "/apisix/admin/routes", "", "X-API-KEY: "+testKey[:len(testKey)-1]+"!"), 401, wrong)
	// Every endpoint asks, plugin and schema ones included.
	for _, p := range []string{"/apisix/admin/plugins/list", "/apisix/admin/plugins/limit-count", "/apisix/admin/schema/route", "/apisix/admin/routes/1"} {
		c.want(c.do("GET", p, ""), 401, missing)
	}
	c.want(c.do("POST", "/apisix/admin/schema/validate/routes", `{}`), 401, missing)
}

func TestAuthViewer(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/upstreams/1", `{"nodes":{"127.0.0.1:80":1}}`), 201, "")
	c.key = testViewerKey
	c.want(c.do("GET", "/apisix/admin/upstreams/1", ""), 200, "")
	c.want(c.do("GET", "/apisix/admin/upstreams", ""), 200, "")
	viewer := `{"error_msg":"failed to check token","description":"invalid method for role viewer"}`
	for _, m := range []string{"PUT", "POST", "PATCH", "DELETE"} {
		c.want(c.do(m, "/apisix/admin/upstreams/1", `{"nodes":{"127.0.0.1:81":1}}`), 401, viewer)
	}
	if got := c.stored("/upstreams/1"); got["nodes"].(map[string]any)["127.0.0.1:80"] == nil {
		t.Fatalf("a viewer changed the upstream: %v", got)
	}
}

func TestAuthNotRequired(t *testing.T) {
	cfg := testAdmin()
	cfg.AdminKeyRequired = false
	c := newServer(t, cfg)
	c.key = ""
	c.want(c.do("PUT", "/apisix/admin/upstreams/1", `{"nodes":{"127.0.0.1:80":1}}`), 201, "")

	// admin_key: null checks nothing either, as in APISIX.
	cfg = testAdmin()
	cfg.AdminKey = nil
	c = newServer(t, cfg)
	c.key = ""
	c.want(c.do("GET", "/apisix/admin/routes", ""), 200, "")

	// An empty key (to be generated at start-up) never matches.
	cfg = testAdmin()
	cfg.AdminKey = []nodeconf.AdminKey{{Name: "admin", Role: "admin"}}
	c = newServer(t, cfg)
	c.key = ""
	c.want(c.do("GET", "/apisix/admin/routes?api_key=", ""), 401, `{"error_msg":"failed to check token","description":"wrong apikey"}`)
}

func TestAllowAdmin(t *testing.T) {
	cfg := testAdmin()
	cfg.AllowAdmin = []string{"10.0.0.0/8", "::1"}
	c := newServer(t, cfg)
	r := c.do("GET", "/apisix/admin/routes", "")
	if r.status != http.StatusForbidden || !strings.Contains(string(r.body), "403 Forbidden") {
		t.Fatalf("outside allow_admin: %d %s", r.status, r.body)
	}
	// Before the key is looked at, HEAD and OPTIONS included.
	c.key = ""
	c.want(c.do("HEAD", "/apisix/admin", ""), 403, "")
	c.want(c.do("OPTIONS", "/apisix/admin/routes", ""), 403, "")

	cfg.AllowAdmin = []string{"127.0.0.1"}
	c = newServer(t, cfg)
	c.want(c.do("GET", "/apisix/admin/routes", ""), 200, "")

	cfg.AllowAdmin = []string{"127.0.0.0/33"}
	if _, err := New(Options{Store: newStore(t), Admin: cfg}); err == nil {
		t.Fatal("New accepted allow_admin 127.0.0.0/33")
	}
}

func TestHeadersAndCORS(t *testing.T) {
	c := newTestServer(t)
	for _, r := range []response{
		c.do("GET", "/apisix/admin/routes", ""),
		c.do("GET", "/apisix/admin/routes/9", ""),
		c.do("PUT", "/apisix/admin/routes/1", `{`),
	} {
		h := r.header
		if h.Get("Content-Type") != "application/json" || h.Get("X-API-VERSION") != "v3" ||
			h.Get("Access-Control-Allow-Origin") != "*" || h.Get("Server") != serverHeader {
			t.Fatalf("headers %v", h)
		}
	}
	c.key = ""
	r := c.do("OPTIONS", "/apisix/admin/routes/1", "")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Methods") != "POST, GET, PUT, OPTIONS, DELETE, PATCH" || len(r.body) != 0 {
		t.Fatalf("OPTIONS: %d %v %q", r.status, r.header, r.body)
	}
	c.want(c.do("HEAD", "/apisix/admin", ""), 200, "")
	c.want(c.do("HEAD", "/apisix/admin/routes", ""), 404, "")

	cfg := testAdmin()
	cfg.EnableAdminCORS = false
	c = newServer(t, cfg)
	r = c.do("GET", "/apisix/admin/routes", "")
	if r.status != 200 || r.header.Get("Access-Control-Allow-Origin") != "" || r.header.Get("X-API-VERSION") != "v3" {
		t.Fatalf("without CORS: %d %v", r.status, r.header)
	}
	c.want(c.do("OPTIONS", "/apisix/admin/routes", ""), 404, `{"error_msg":"not found"}`)
}

func TestCheckKeys(t *testing.T) {
	cfg := testAdmin()
	cfg.AdminKey = []nodeconf.AdminKey{{Name: "admin", Key: LegacyAdminKey, Role: "admin"}}
	for _, ip := range []string{"127.0.0.1", "::1", "127.0.0.2", "localhost"} {
		cfg.AdminListen = nodeconf.Listen{IP: ip, Port: 9180}
		if err := CheckKeys(cfg); err != nil {
			t.Errorf("%s: %v", ip, err)
		}
	}
	for _, ip := range []string{"0.0.0.0", "", "10.1.2.3", "::"} {
		cfg.AdminListen = nodeconf.Listen{IP: ip, Port: 9180}
		err := CheckKeys(cfg)
		if !errors.Is(err, ErrLegacyKey) || !strings.Contains(err.Error(), "admin_listen is "+cfg.AdminListen.Addr()) {
			t.Errorf("%q: %v", ip, err)
		}
	}
	cfg.AdminKey = []nodeconf.AdminKey{{Name: "admin", Key: testKey}, {Name: "viewer", Key: LegacyViewerKey, Role: "viewer"}}
	if err := CheckKeys(cfg); !errors.Is(err, ErrLegacyKey) {
		t.Errorf("legacy viewer key on %s: %v", cfg.AdminListen.Addr(), err)
	}
	cfg.AdminKey = []nodeconf.AdminKey{{Name: "admin", Key: testKey}}
	if err := CheckKeys(cfg); err != nil {
		t.Error(err)
	}
	cfg.AdminKey = []nodeconf.AdminKey{{Name: "admin", Key: LegacyAdminKey}}
	cfg.AdminKeyRequired = false
	if err := CheckKeys(cfg); err != nil {
		t.Errorf("keys not required: %v", err)
	}

	// No key at all, as APISIX's start: refused unless only loopback is
	// admitted (APISIX's default allow_admin), or no key is required.
	cfg.AdminKeyRequired = true
	cfg.AdminListen = nodeconf.Listen{IP: "127.0.0.1", Port: 9180}
	for _, keys := range [][]nodeconf.AdminKey{nil, {}} {
		cfg.AdminKey = keys
		cfg.AllowAdmin = []string{"127.0.0.0/24"}
		if err := CheckKeys(cfg); err != nil {
			t.Errorf("admin_key %v, loopback only: %v", keys, err)
		}
		for _, allow := range [][]string{nil, {"0.0.0.0/0"}, {"127.0.0.0/24", "10.0.0.0/8"}} {
			cfg.AllowAdmin = allow
			if err := CheckKeys(cfg); !errors.Is(err, ErrNoKey) || !strings.Contains(err.Error(), "deployment.admin.admin_key is") {
				t.Errorf("admin_key %v, allow_admin %q: %v, want ErrNoKey", keys, allow, err)
			}
		}
		cfg.AdminKeyRequired = false
		if err := CheckKeys(cfg); err != nil {
			t.Errorf("admin_key %v, not required: %v", keys, err)
		}
		cfg.AdminKeyRequired = true
	}
}
