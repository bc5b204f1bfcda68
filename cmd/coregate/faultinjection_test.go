package main

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIFaultInjection runs fault-injection through the binary,
// configured through the Admin API: an abort by vars (APISIX's tests 29
// to 33) with a body and a header of variables, an abort without a body,
// a delay that a real client waits for before the upstream answers, and
// the Admin API's refusals with APISIX's messages, nothing stored.
func TestAdminAPIFaultInjection(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "upstream")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	route := func(id, uri, conf string) {
		t.Helper()
		r := admin.do(t, c, "PUT", "routes/"+id, `{"uri":"`+uri+`","plugins":{"fault-injection":`+conf+`},`+
			`"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
		if r.status != 201 && r.status != 200 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	route("vars", "/vars", `{"abort":{"http_status":403,"body":"Fault Injection! $remote_addr\n","headers":{"X-Fault":"$arg_name","X-N":7},`+
		`"vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]}}`)
	route("nobody", "/nobody", `{"abort":{"http_status":200}}`)
	route("page", "/page", `{"abort":{"http_status":403}}`)
	route("slow", "/slow", `{"delay":{"duration":0.6}}`)
	route("never", "/never", `{"abort":{"http_status":500,"percentage":0},"delay":{"duration":5,"percentage":0}}`)

	for _, tc := range []struct{ conf, err string }{
		{`{}`, `expect object to have at least 1 properties`},
		{`{"abort":{"http_status":100}}`, `property \"abort\" validation failed`},
		{`{"delay":{"duration":"test"}}`, `property \"delay\" validation failed: property \"duration\" validation failed: wrong type: expected number, got string`},
		{`{"abort":{"http_status":403,"vars":[["arg_name","!=","jack"]]}}`, `rule should be wrapped inside brackets`},
	} {
		r := admin.do(t, c, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"fault-injection":`+tc.conf+`},`+
			`"upstream":{"nodes":{"`+up.Addr()+`":1}}}`)
		want := `{"error_msg":"failed to check the configuration of plugin fault-injection err: ` + tc.err
		if r.status != 400 || !strings.HasPrefix(r.body, want) {
			t.Errorf("PUT %s: %d %s, want 400 %s", tc.conf, r.status, r.body, want)
		}
	}
	if r := admin.do(t, c, "GET", "routes/bad", ""); r.status != 404 {
		t.Fatalf("a refused route was stored: %d %s", r.status, r.body)
	}

	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/never"), "", nil, nil); r.status != 200 || r.body != "upstream" {
			return fmt.Errorf("GET /never = %d %q", r.status, r.body)
		}
		return nil
	})
	const fault = "Fault Injection! 127.0.0.1\n"
	for _, tc := range []struct {
		target string
		hdr    map[string]string
		status int
		body   string
		fault  string // X-Fault
	}{
		{"/vars?name=jack&age=18", map[string]string{"apikey": "api-key"}, 403, fault, "jack"},
		{"/vars?name=jack&age=20", nil, 403, fault, "jack"},
		{"/vars", map[string]string{"apikey": "api-key"}, 403, fault, ""},
		{"/vars?name=allen", nil, 200, "upstream", ""},
		{"/vars", nil, 200, "upstream", ""},
		{"/nobody", nil, 200, "", ""},
	} {
		r := do(t, c, "GET", g.url(tc.target), "", tc.hdr, nil)
		if r.status != tc.status || r.body != tc.body || r.header.Get("X-Fault") != tc.fault {
			t.Errorf("GET %s %v: %d %q X-Fault %q, want %d %q %q", tc.target, tc.hdr, r.status, r.body,
				r.header.Get("X-Fault"), tc.status, tc.body, tc.fault)
		}
		if tc.status == 403 && r.header.Get("X-N") != "7" {
			t.Errorf("GET %s: X-N %q", tc.target, r.header.Get("X-N"))
		}
	}
	if r := do(t, c, "GET", g.url("/page"), "", nil, nil); r.status != 403 || !strings.Contains(r.body, "403 Forbidden") {
		t.Errorf("GET /page: %d %q, want the gateway's 403 page", r.status, r.body)
	}

	start := time.Now()
	r := do(t, c, "GET", g.url("/slow"), "", nil, nil)
	if took := time.Since(start); r.status != 200 || r.body != "upstream" || took < 600*time.Millisecond || took > 5*time.Second {
		t.Errorf("GET /slow: %d %q after %v, want the upstream's answer after 0.6 s", r.status, r.body, took)
	}

	l := admin.do(t, c, "GET", "plugins/list", "")
	if l.status != 200 || !strings.Contains(l.body, `"fault-injection"`) {
		t.Errorf("plugins/list lacks fault-injection: %d %s", l.status, l.body)
	}
	if s := admin.do(t, c, "GET", "schema/plugins/fault-injection", ""); s.status != 200 || !strings.Contains(s.body, `"http_status"`) {
		t.Errorf("schema/plugins/fault-injection: %d %s", s.status, s.body)
	}
}
