package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIEcho runs echo through the binary, configured through the
// Admin API: APISIX's tests 4, 6, 9 and 11 (the body replaced or wrapped,
// from an upstream answering with a length or in chunks, the headers
// set), and a fault-injection's answer wrapped, with its new length; the
// Admin API refuses a header of another type with echo.lua's message.
func TestAdminAPIEcho(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hello_chunked" {
			for _, p := range []string{"hello ", "world\n"} {
				_, _ = w.Write([]byte(p))
				w.(http.Flusher).Flush()
			}
			return
		}
		w.Header().Set("Content-Length", "12")
		_, _ = w.Write([]byte("hello world\n"))
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
	route("all", "/hello", `{"echo":{"before_body":"before the body modification ","body":"hello upstream",`+
		`"after_body":" after the body modification.","headers":{"Location":"https://www.iresty.com","Authorization":"userpass"}}}`)
	route("before", "/before", `{"echo":{"before_body":"before the body modification ","headers":{"Location":"https://www.iresty.com"}}}`)
	route("chunked", "/hello_chunked", `{"echo":{"before_body":"<","after_body":">"}}`)
	route("fault", "/fault", `{"echo":{"before_body":"<","after_body":">"},"fault-injection":{"abort":{"http_status":403,"body":"no"}}}`)

	r := admin.do(t, c, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"echo":{"body":"x","headers":{"X-A":true}}},`+
		`"upstream":{"nodes":{"`+up.Addr()+`":1}}}`)
	if want := `{"error_msg":"failed to check the configuration of plugin echo err: invalid type as header value"`; r.status != 400 ||
		!strings.HasPrefix(r.body, want) {
		t.Errorf("PUT a bad header: %d %s, want 400 %s", r.status, r.body, want)
	}

	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/fault"), "", nil, nil); r.status != 403 {
			return fmt.Errorf("GET /fault = %d %q", r.status, r.body)
		}
		return nil
	})
	for _, tc := range []struct {
		target, body, location string
		status                 int
		length                 string // Content-Length, "" for chunked
	}{
		{"/hello", "before the body modification hello upstream after the body modification.", "https://www.iresty.com", 200, ""},
		{"/before", "before the body modification hello world\n", "https://www.iresty.com", 200, ""},
		{"/hello_chunked", "<hello world\n>", "", 200, ""},
		{"/fault", "<no>", "", 403, "4"},
	} {
		r := do(t, c, "GET", g.url(tc.target), "", nil, nil)
		if r.status != tc.status || r.body != tc.body || r.header.Get("Location") != tc.location || r.header.Get("Content-Length") != tc.length {
			t.Errorf("GET %s: %d %q, Location %q, Content-Length %q; want %d %q %q %q", tc.target, r.status, r.body,
				r.header.Get("Location"), r.header.Get("Content-Length"), tc.status, tc.body, tc.location, tc.length)
		}
		if tc.target == "/hello" && r.header.Get("Authorization") != "userpass" {
			t.Errorf("GET /hello: Authorization %q", r.header.Get("Authorization"))
		}
	}

	l := admin.do(t, c, "GET", "plugins/list", "")
	if l.status != 200 || !strings.Contains(l.body, `"echo"`) {
		t.Errorf("plugins/list lacks echo: %d %s", l.status, l.body)
	}
	if s := admin.do(t, c, "GET", "schema/plugins/echo", ""); s.status != 200 || !strings.Contains(s.body, `"before_body"`) {
		t.Errorf("schema/plugins/echo: %d %s", s.status, s.body)
	}
}
