package main

import (
	"fmt"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// The access restrictions through the binary, configured through the
// Admin API: what a real client is answered.

// clientFrom is an HTTP client whose connections leave from the loopback
// address ip (127.0.0.2…), so that the gateway sees another
// $remote_addr.
func clientFrom(t *testing.T, ip string) *http.Client {
	tr := &http.Transport{DialContext: (&net.Dialer{
		LocalAddr: &net.TCPAddr{IP: net.ParseIP(ip)},
		Timeout:   time.Second,
	}).DialContext}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 5 * time.Second}
}

// TestAdminAPIIPRestriction: ip-restriction's whitelist and blacklist seen
// by clients of two loopback addresses; its message and response_code; a
// list the plugin refuses is 400 with APISIX's text and not stored; the
// Admin API lists the plugin and serves its schema.
func TestAdminAPIIPRestriction(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "upstream")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	route := func(id, conf string) {
		t.Helper()
		r := admin.do(t, c, "PUT", "routes/"+id, `{"uri":"/`+id+`","plugins":{"ip-restriction":`+conf+`},`+
			`"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
		if r.status != 201 && r.status != 200 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	route("white", `{"whitelist":["127.0.0.2","::1"]}`)
	route("black", `{"blacklist":["10.0.0.0/8","127.0.0.0/31"],"message":"go away","response_code":404}`)

	r := admin.do(t, c, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"ip-restriction":{"whitelist":["::1/129"]}},`+
		`"upstream":{"nodes":{"`+up.Addr()+`":1}}}`)
	if r.status != 400 || !strings.HasPrefix(r.body, `{"error_msg":"failed to check the configuration of plugin ip-restriction err: invalid ip address: ::1/129"`) {
		t.Fatalf("PUT a refused list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "routes/bad", ""); r.status != 404 {
		t.Fatalf("the refused route was stored: %d %s", r.status, r.body)
	}

	other := clientFrom(t, "127.0.0.2")
	const denied = `{"message":"Your IP address is not allowed"}` + "\n"
	eventually(t, 10*time.Second, func() error {
		if r := do(t, other, "GET", g.url("/black"), "", nil, nil); r.status != 200 || r.body != "upstream" {
			return fmt.Errorf("GET /black from 127.0.0.2 = %d %q", r.status, r.body)
		}
		return nil
	})
	for _, tc := range []struct {
		c      *http.Client
		from   string
		path   string
		status int
		body   string
	}{
		{c, "127.0.0.1", "/white", 403, denied},
		{other, "127.0.0.2", "/white", 200, "upstream"},
		{c, "127.0.0.1", "/black", 404, `{"message":"go away"}` + "\n"},
		{other, "127.0.0.2", "/black", 200, "upstream"},
	} {
		if r := do(t, tc.c, "GET", g.url(tc.path), "", nil, nil); r.status != tc.status || r.body != tc.body {
			t.Errorf("GET %s from %s: %d %q, want %d %q", tc.path, tc.from, r.status, r.body, tc.status, tc.body)
		}
	}

	r = admin.do(t, c, "GET", "plugins/list", "")
	if r.status != 200 || !strings.Contains(r.body, `"ip-restriction"`) {
		t.Errorf("plugins/list: %d %s", r.status, r.body)
	}
	r = admin.do(t, c, "GET", "schema/plugins/ip-restriction", "")
	if r.status != 200 || !strings.Contains(r.body, `"whitelist"`) || !strings.Contains(r.body, `"Your IP address is not allowed"`) {
		t.Errorf("schema/plugins/ip-restriction: %d %s", r.status, r.body)
	}
}

// TestAdminAPIRequestRestrictions: ua-restriction, referer-restriction and
// uri-blocker configured through the Admin API, seen by a real client: the
// answers APISIX's tests expect (t/plugin/ua-restriction.t,
// referer-restriction.t, uri-blocker.t), a path that is not normalised
// caught as its normalised form, and a rule the Admin API refuses.
func TestAdminAPIRequestRestrictions(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "upstream")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	route := func(id, uri, plugins string) {
		t.Helper()
		r := admin.do(t, c, "PUT", "routes/"+id, `{"uri":"`+uri+`","plugins":`+plugins+`,`+
			`"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
		if r.status != 201 && r.status != 200 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	route("ua", "/ua", `{"ua-restriction":{"denylist":["my-bot1","(Baiduspider)/(\\d+)\\.(\\d+)"]}}`)
	route("referer", "/referer", `{"referer-restriction":{"whitelist":["*.xx.com","yy.com"]}}`)
	route("blocker", "/internal/*", `{"uri-blocker":{"block_rules":["^/internal/","aa"],"rejected_msg":"access is not allowed"}}`)
	route("open", "/open", `{"uri-blocker":{"block_rules":["AA"],"case_insensitive":true}}`)

	for _, tc := range []struct{ plugin, conf, err string }{
		{"ua-restriction", `{"allowlist":["(bad"]}`, `pcre_compile() failed: missing ) in \"(bad\"`},
		{"uri-blocker", `{"block_rules":["^b("]}`, `pcre_compile() failed: missing ) in \"^b(\"`},
		{"referer-restriction", `{}`, `value should match only one schema, but matches none`},
	} {
		r := admin.do(t, c, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"`+tc.plugin+`":`+tc.conf+`},`+
			`"upstream":{"nodes":{"`+up.Addr()+`":1}}}`)
		want := `{"error_msg":"failed to check the configuration of plugin ` + tc.plugin + ` err: ` + tc.err + `"`
		if r.status != 400 || !strings.HasPrefix(r.body, want) {
			t.Errorf("PUT %s %s: %d %s, want 400 %s", tc.plugin, tc.conf, r.status, r.body, want)
		}
	}
	if r := admin.do(t, c, "GET", "routes/bad", ""); r.status != 404 {
		t.Fatalf("a refused route was stored: %d %s", r.status, r.body)
	}

	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/open"), "", nil, nil); r.status != 200 || r.body != "upstream" {
			return fmt.Errorf("GET /open = %d %q", r.status, r.body)
		}
		return nil
	})
	const notAllowed = `{"message":"Not allowed"}` + "\n"
	const badReferer = `{"message":"Your referer host is not allowed"}` + "\n"
	const blocked = `{"error_msg":"access is not allowed"}` + "\n"
	for _, tc := range []struct {
		target string
		hdr    map[string]string
		status int
		body   string
	}{
		{"/ua", map[string]string{"User-Agent": "my-bot1"}, 403, notAllowed},
		{"/ua", map[string]string{"User-Agent": "Baiduspider/3.0"}, 403, notAllowed},
		{"/ua", map[string]string{"User-Agent": "foo/bar"}, 200, "upstream"},
		{"/referer", map[string]string{"Referer": "http://www.xx.com"}, 200, "upstream"},
		{"/referer", map[string]string{"Referer": "https://yy.com/am"}, 200, "upstream"},
		{"/referer", map[string]string{"Referer": "https://www.yy.com/am"}, 403, badReferer},
		{"/referer", nil, 403, badReferer},
		{"/referer", map[string]string{"Referer": "www.yy.com"}, 403, badReferer},
		{"/internal/x", nil, 403, blocked},
		{"/./internal/x", nil, 403, blocked},
		{"/a/../internal/y", nil, 403, blocked},
		{"/internal-not?aa=1", nil, 404, ""},
		{"/open?aa=1", nil, 403, ""},
		{"/open?bb=1", nil, 200, "upstream"},
	} {
		r := do(t, c, "GET", g.url(tc.target), "", tc.hdr, nil)
		if r.status != tc.status || tc.body != "" && r.body != tc.body {
			t.Errorf("GET %s %v: %d %q, want %d %q", tc.target, tc.hdr, r.status, r.body, tc.status, tc.body)
		}
	}

	// Several User-Agent headers (a client's http.Header would send only
	// the first): a denylist refuses the request when any is denied
	// (APISIX's tests 8 and 9), lets it in when none is.
	for _, tc := range []struct {
		uas    []string
		status int
	}{
		{[]string{"my-bot1", "my-bot2"}, 403},
		{[]string{"my-bot2", "my-bot1"}, 403},
		{[]string{"my-bot2", "foo/bar"}, 200},
	} {
		raw := "GET /ua HTTP/1.1\r\nHost: x\r\n"
		for _, ua := range tc.uas {
			raw += "User-Agent: " + ua + "\r\n"
		}
		res := exchangeN(t, g.gateway, raw+"\r\n", 1)[0]
		if res.status != tc.status {
			t.Errorf("GET /ua with User-Agents %q: %d %q, want %d", tc.uas, res.status, res.body, tc.status)
		}
	}

	r := admin.do(t, c, "GET", "plugins/list", "")
	for _, name := range []string{"ua-restriction", "referer-restriction", "uri-blocker"} {
		if r.status != 200 || !strings.Contains(r.body, `"`+name+`"`) {
			t.Errorf("plugins/list lacks %s: %d %s", name, r.status, r.body)
		}
		if s := admin.do(t, c, "GET", "schema/plugins/"+name, ""); s.status != 200 || !strings.Contains(s.body, `"properties"`) {
			t.Errorf("schema/plugins/%s: %d %s", name, s.status, s.body)
		}
	}
}
