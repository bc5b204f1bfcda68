package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIAPIBreaker runs api-breaker through the binary, configured
// through the Admin API: a configuration the plugin refuses is 400 with
// APISIX's text and not stored; the plugin is listed with its schema; an
// origin answering 500 opens the breaker after the failures (the breaker's
// answer, with its body and headers, without reaching the origin) for 2
// seconds, after which the origin, answering 200 again, is reached and
// closes it.
func TestAdminAPIAPIBreaker(t *testing.T) {
	t.Parallel()
	var hits, failing atomic.Int32
	failing.Store(1)
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if failing.Load() == 1 {
			w.WriteHeader(500)
		}
		_, _ = w.Write([]byte("origin"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)

	r := admin.do(t, c, "PUT", "routes/bad", `{"uri":"/bad","plugins":{"api-breaker":{"break_response_code":199}},`+
		`"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
	if r.status != 400 || !strings.HasPrefix(r.body, `{"error_msg":"failed to check the configuration of plugin api-breaker err: property \"break_response_code\" validation failed: expected 199 to be at least 200"`) {
		t.Fatalf("PUT a refused configuration: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "routes/bad", ""); r.status != 404 {
		t.Fatalf("the refused route was stored: %d %s", r.status, r.body)
	}
	r = admin.do(t, c, "GET", "plugins/list", "")
	var names []string
	if err := json.Unmarshal([]byte(r.body), &names); err != nil || !slices.Contains(names, "api-breaker") {
		t.Fatalf("plugins/list: %d %s (%v)", r.status, r.body, err)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/api-breaker", ""); r.status != 200 || !strings.Contains(r.body, `"break_response_code"`) || !strings.Contains(r.body, `"max_breaker_sec"`) {
		t.Fatalf("schema/plugins/api-breaker: %d %s", r.status, r.body)
	}

	r = admin.do(t, c, "PUT", "routes/1", `{"uri":"/api_breaker","plugins":{"api-breaker":{
		"break_response_code":502,"break_response_body":"{\"message\":\"breaker opened.\"}",
		"break_response_headers":[{"key":"Content-Type","value":"application/json"},{"key":"X-Client","value":"$remote_addr"}],
		"unhealthy":{"failures":2}}},
		"upstream":{"type":"roundrobin","nodes":{"`+up.Addr()+`":1}}}`)
	if r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	// The first 500 may come while the route is not served yet (404).
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/api_breaker"), "", nil, nil); r.status != 500 || r.body != "origin" {
			return fmt.Errorf("GET /api_breaker = %d %q", r.status, r.body)
		}
		return nil
	})
	if r := do(t, c, "GET", g.url("/api_breaker"), "", nil, nil); r.status != 500 {
		t.Fatalf("the second failure: %d %q", r.status, r.body)
	}
	opened := time.Now()
	before := hits.Load()
	for i := range 3 {
		r := do(t, c, "GET", g.url("/api_breaker"), "", nil, nil)
		if time.Since(opened) >= 2*time.Second {
			t.Skipf("too slow to see the breaker open (%v)", time.Since(opened))
		}
		if r.status != 502 || r.body != `{"message":"breaker opened."}` || r.header.Get("Content-Type") != "application/json" || r.header.Get("X-Client") != "127.0.0.1" {
			t.Fatalf("open breaker, request %d: %d %q %v", i, r.status, r.body, r.header)
		}
	}
	if n := hits.Load() - before; n != 0 {
		t.Fatalf("the open breaker let %d requests reach the origin", n)
	}

	// Open 2^1 s: after that the origin, healthy again, is reached.
	failing.Store(0)
	time.Sleep(time.Until(opened.Add(3 * time.Second)))
	for i := range 3 {
		if r := do(t, c, "GET", g.url("/api_breaker"), "", nil, nil); r.status != 200 || r.body != "origin" {
			t.Fatalf("after the break, request %d: %d %q", i, r.status, r.body)
		}
	}
	// Three successes closed it and forgot the failures: one 500 does
	// not open it again.
	failing.Store(1)
	if r := do(t, c, "GET", g.url("/api_breaker"), "", nil, nil); r.status != 500 {
		t.Fatalf("one failure after closing: %d", r.status)
	}
	if r := do(t, c, "GET", g.url("/api_breaker"), "", nil, nil); r.status != 500 {
		t.Fatalf("two failures after closing: %d", r.status)
	}
	if r := do(t, c, "GET", g.url("/api_breaker"), "", nil, nil); r.status != 502 {
		t.Fatalf("open again: %d", r.status)
	}
}
