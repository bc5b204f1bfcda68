package main

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/adminapi"
	"coregate/admin/spec"
)

// TestMocking runs the mocking plugin through the binary: routes with no
// upstream answer with the configured status, body (variables resolved),
// content type and headers; generated data follows its schema; an
// upstream the route has is not contacted; a delayed answer leaves after
// its delay while the worker (one event loop) answers other requests.
func TestMocking(t *testing.T) {
	t.Parallel()
	var hits atomic.Int32
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		_, _ = w.Write([]byte("upstream"))
	})
	g := startGateway(t, routesYAML(
		obj{"id": "1", "uri": "/mock", "plugins": obj{"mocking": obj{
			"response_status": 201, "content_type": "text/plain",
			"response_example": "remote_addr:$remote_addr route:$route_id arg:${arg_a ?? none}",
			"response_headers": obj{"X-Apisix": "is, cool", "X-Route-Id": "$route_id", "X-Num": 5},
		}}},
		obj{"id": "schema", "uri": "/schema", "plugins": obj{"mocking": obj{
			"response_schema": obj{"type": "object", "properties": obj{
				"field1": obj{"type": "string", "example": "hello"},
				"n":      obj{"type": "integer", "example": 3},
			}},
			"with_mock_header": false,
		}}},
		obj{"id": "with-upstream", "uri": "/up", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"mocking": obj{"response_example": `{"a":1}`}}},
		obj{"id": "slow", "uri": "/slow", "plugins": obj{"mocking": obj{"response_example": "late", "delay": 2}}},
		obj{"id": "plain", "uri": "/plain", "upstream": upstreamOf(nodes(up.Addr()), nil)},
	), "")
	c := newClient(t)
	mockBy := "APISIX/" + spec.CompatVersion

	r := do(t, c, "GET", g.url("/mock?a=1"), "", nil, nil)
	if r.status != 201 || r.body != "remote_addr:127.0.0.1 route:1 arg:1" {
		t.Fatalf("/mock: %d %q", r.status, r.body)
	}
	wantHdr := map[string]string{
		"Content-Type": "text/plain", "X-Mock-By": mockBy, "X-Apisix": "is, cool", "X-Route-Id": "1",
		"X-Num": "5", "Server": mockBy, "Content-Length": "35",
	}
	got := map[string]string{}
	for k := range wantHdr {
		got[k] = r.header.Get(k)
	}
	if d := cmp.Diff(wantHdr, got); d != "" {
		t.Fatalf("/mock headers (-want +got):\n%s", d)
	}
	if r = do(t, c, "GET", g.url("/mock"), "", nil, nil); r.body != "remote_addr:127.0.0.1 route:1 arg:none" {
		t.Fatalf("/mock without the argument: %q", r.body)
	}

	r = do(t, c, "GET", g.url("/schema"), "", nil, nil)
	if r.status != 200 || r.body != `{"field1":"hello","n":3}` || r.header.Get("Content-Type") != "application/json;charset=utf8" ||
		r.header.Get("X-Mock-By") != "" {
		t.Fatalf("/schema: %d %q %v", r.status, r.body, r.header)
	}

	r = do(t, c, "POST", g.url("/up"), "", nil, nil)
	if r.status != 200 || r.body != `{"a":1}` || hits.Load() != 0 {
		t.Fatalf("/up: %d %q, upstream hits %d", r.status, r.body, hits.Load())
	}
	if r = do(t, c, "GET", g.url("/plain"), "", nil, nil); r.body != "upstream" || hits.Load() != 1 {
		t.Fatalf("/plain: %q", r.body)
	}

	// The delay: the slow answer is pending while others are answered.
	start := time.Now()
	var slow result
	var slowDone atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		slow = do(t, newClient(t), "GET", g.url("/slow"), "", nil, nil)
		slowDone.Store(true)
	}()
	for i := 0; i < 20; i++ {
		if r := do(t, c, "GET", g.url("/mock"), "", nil, nil); r.status != 201 {
			t.Fatalf("during the delay: %d", r.status)
		}
	}
	if slowDone.Load() {
		t.Fatalf("the delayed answer came before %v had passed", time.Since(start))
	}
	wg.Wait()
	if slow.status != 200 || slow.body != "late" || time.Since(start) < 2*time.Second {
		t.Fatalf("/slow: %d %q after %v", slow.status, slow.body, time.Since(start))
	}
}

// TestAdminAPIMocking: a mocking route written through the Admin API
// (plugins and no upstream, as APISIX's route schema allows) is served by
// the workers; a configuration the plugin refuses is 400 with APISIX's
// text, and nothing is stored.
func TestAdminAPIMocking(t *testing.T) {
	t.Parallel()
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	r := admin.do(t, c, "PUT", "routes/bad",
		`{"uri":"/bad","plugins":{"mocking":{"response_example":"x","content_type":"image/png"}}}`)
	if r.status != 400 || !strings.HasPrefix(r.body, `{"error_msg":"failed to check the configuration of plugin mocking err: unsupported content type!"`) {
		t.Fatalf("PUT a refused configuration: %d %s", r.status, r.body)
	}
	r = admin.do(t, c, "PUT", "routes/1",
		`{"uri":"/hello","plugins":{"mocking":{"response_example":"hello $arg_who","content_type":"text/plain","response_status":202}}}`)
	if r.status != 201 {
		t.Fatalf("PUT: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello?who=admin"), "", nil, nil); r.status != 202 || r.body != "hello admin" {
			return fmt.Errorf("GET /hello = %d %q", r.status, r.body)
		}
		return nil
	})
	if r := do(t, c, "GET", g.url("/bad"), "", nil, nil); r.status != 404 {
		t.Fatalf("the refused route: %d", r.status)
	}
}
