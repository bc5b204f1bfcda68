package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIRealIP runs real-ip through the binary, configured through
// the Admin API: the address of X-Forwarded-For (its last, or the last
// untrusted one) or of another header is the client's for ip-restriction
// after it and for the X-Real-IP and X-Forwarded-For the upstream gets;
// a bad address, or none, leaves the connection's; the Admin API refuses
// a bad trusted address with APISIX's message.
func TestAdminAPIRealIP(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "real=%s xff=%s", r.Header.Get("X-Real-IP"), strings.Join(r.Header.Values("X-Forwarded-For"), "|"))
	})
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
	route("only", "/only", `{"real-ip":{"source":"http_x_forwarded_for","trusted_addresses":["127.0.0.0/24"],"recursive":true},`+
		`"ip-restriction":{"whitelist":["1.1.1.1"]}}`)
	route("xff", "/xff", `{"real-ip":{"source":"http_xff"}}`)
	route("untrusted", "/untrusted", `{"real-ip":{"source":"http_xff","trusted_addresses":["10.0.0.0/8"]}}`)

	r := admin.do(t, c, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"real-ip":{"source":"http_xff","trusted_addresses":["::1/129"]}},`+
		`"upstream":{"nodes":{"`+up.Addr()+`":1}}}`)
	if want := `{"error_msg":"failed to check the configuration of plugin real-ip err: invalid ip address: ::1/129"`; r.status != 400 ||
		!strings.HasPrefix(r.body, want) {
		t.Errorf("PUT a bad trusted address: %d %s, want 400 %s", r.status, r.body, want)
	}
	if r := admin.do(t, c, "GET", "routes/bad", ""); r.status != 404 {
		t.Fatalf("a refused route was stored: %d %s", r.status, r.body)
	}

	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/untrusted"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /untrusted = %d %q", r.status, r.body)
		}
		return nil
	})
	for _, tc := range []struct {
		target string
		hdr    map[string]string
		status int
		body   string
	}{
		{"/only", map[string]string{"X-Forwarded-For": "1.1.1.1"}, 200, "real=1.1.1.1 xff=1.1.1.1, 1.1.1.1"},
		{"/only", map[string]string{"X-Forwarded-For": "1.1.1.1, 127.0.0.9"}, 200, "real=1.1.1.1 xff=1.1.1.1, 127.0.0.9, 1.1.1.1"},
		{"/only", map[string]string{"X-Forwarded-For": "1.1.1.1, 2.2.2.2"}, 403, ""},
		{"/only", nil, 403, ""},
		{"/xff", map[string]string{"XFF": "[2001:db8::5]:8080"}, 200, "real=2001:db8::5 xff=2001:db8::5"},
		{"/xff", map[string]string{"XFF": "1.1.1.1:65536"}, 200, "real=127.0.0.1 xff=127.0.0.1"},
		{"/untrusted", map[string]string{"XFF": "1.1.1.1"}, 200, "real=127.0.0.1 xff=127.0.0.1"},
	} {
		r := do(t, c, "GET", g.url(tc.target), "", tc.hdr, nil)
		if r.status != tc.status || tc.body != "" && r.body != tc.body {
			t.Errorf("GET %s %v: %d %q, want %d %q", tc.target, tc.hdr, r.status, r.body, tc.status, tc.body)
		}
	}

	l := admin.do(t, c, "GET", "plugins/list", "")
	if l.status != 200 || !strings.Contains(l.body, `"real-ip"`) {
		t.Errorf("plugins/list lacks real-ip: %d %s", l.status, l.body)
	}
	if s := admin.do(t, c, "GET", "schema/plugins/real-ip", ""); s.status != 200 || !strings.Contains(s.body, `"trusted_addresses"`) {
		t.Errorf("schema/plugins/real-ip: %d %s", s.status, s.body)
	}
}
