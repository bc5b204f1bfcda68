package main

import (
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIRequestID configures request-id through the Admin API
// (stored in etcd) and sees its effect with a real client and a real
// upstream: a configuration APISIX refuses is refused with its message;
// the upstream gets a new UUID in X-Request-Id and the client the same in
// the response; ids differ from one request to the next; a client's id
// is kept both ways; an upstream's own X-Request-Id reaches the client
// in place of the request's; a custom header with nanoid; a global
// rule's beside the route's. The plugin is in the plugin list, with its
// schema.
func TestAdminAPIRequestID(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var got []string // the ids the upstream saw
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Request-Id")+"|"+r.Header.Get("X-Trace"))
		mu.Unlock()
		if r.URL.Query().Get("own") != "" {
			w.Header().Set("X-Request-Id", "from-upstream")
		}
		_, _ = w.Write([]byte("hello world"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"request-id"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/request-id", ""); r.status != 200 || !strings.Contains(r.body, `"range_id"`) {
		t.Fatalf("schema/plugins/request-id: %d %s", r.status, r.body)
	}
	route := func(uri, conf string) string {
		return fmt.Sprintf(`{"uri":%q,"plugins":{"request-id":%s},"upstream":{"nodes":{%q:1}}}`, uri, conf, up.Addr())
	}
	if r := admin.do(t, c, "PUT", "routes/1", route("/hello", `{"algorithm":"bad_algorithm"}`)); r.status != 400 ||
		!strings.Contains(r.body, `failed to check the configuration of plugin request-id err: property \"algorithm\" validation failed`) {
		t.Fatalf("a bad algorithm: %d %s", r.status, r.body)
	}
	for id, body := range map[string]string{
		"1": route("/hello", `{}`),
		"2": route("/nano", `{"algorithm":"nanoid","header_name":"X-Trace"}`),
	} {
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	eventually(t, 10*time.Second, func() error {
		for _, path := range []string{"/hello", "/nano"} {
			if r := do(t, c, "GET", g.url(path), "", nil, nil); r.status != 200 {
				return fmt.Errorf("GET %s: %d", path, r.status)
			}
		}
		return nil
	})
	last := func() string {
		mu.Lock()
		defer mu.Unlock()
		return got[len(got)-1]
	}
	uuid := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	seen := map[string]bool{}
	for range 20 {
		r := do(t, c, "GET", g.url("/hello"), "", nil, nil)
		id := r.header.Get("X-Request-Id")
		if r.status != 200 || !uuid.MatchString(id) || last() != id+"|" || seen[id] {
			t.Fatalf("GET /hello: %d, response id %q, upstream saw %q, seen before %v", r.status, id, last(), seen[id])
		}
		seen[id] = true
	}
	r := do(t, c, "GET", g.url("/hello"), "", map[string]string{"X-Request-Id": "abctesting"}, nil)
	if r.header.Get("X-Request-Id") != "abctesting" || last() != "abctesting|" {
		t.Fatalf("the client's id: response %q, upstream saw %q", r.header.Get("X-Request-Id"), last())
	}
	r = do(t, c, "GET", g.url("/hello?own=1"), "", nil, nil)
	if vs := r.header.Values("X-Request-Id"); len(vs) != 1 || vs[0] != "from-upstream" || !uuid.MatchString(strings.TrimSuffix(last(), "|")) {
		t.Fatalf("the upstream's id: response %q, upstream saw %q", vs, last())
	}
	r = do(t, c, "GET", g.url("/nano"), "", nil, nil)
	if id := r.header.Get("X-Trace"); !regexp.MustCompile(`^[-_0-9a-zA-Z]{21}$`).MatchString(id) || last() != "|"+id || r.header.Get("X-Request-Id") != "" {
		t.Fatalf("nanoid in X-Trace: response %q, upstream saw %q", id, last())
	}

	// A global rule's, in a header of its own, beside the route's
	// (request-id.t TEST 10): two ids, each kept with the request.
	if r := admin.do(t, c, "PUT", "global_rules/1", `{"plugins":{"request-id":{"header_name":"X-Trace","algorithm":"uuidv7"}}}`); r.status != 201 {
		t.Fatalf("PUT global_rules/1: %d %s", r.status, r.body)
	}
	v7 := regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.header.Get("X-Trace") == "" {
			return fmt.Errorf("GET /hello: %d, no X-Trace", r.status)
		}
		return nil
	})
	r = do(t, c, "GET", g.url("/hello"), "", nil, nil)
	id, trace := r.header.Get("X-Request-Id"), r.header.Get("X-Trace")
	if !uuid.MatchString(id) || !v7.MatchString(trace) || last() != id+"|"+trace {
		t.Fatalf("global rule and route: response %q and %q, upstream saw %q", id, trace, last())
	}
}

// TestRequestIDConsumerPlugins: on a route with key-auth, a consumer with
// plugins of its own (or of its group) runs the route's other plugins
// after authentication from a variant built for it; request-id, whose
// rewrite phase ran before the consumer was known, still answers with the
// id the upstream saw, for such a consumer as for one without plugins.
func TestRequestIDConsumerPlugins(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var seen string
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = r.Header.Get("X-Request-Id")
		mu.Unlock()
		_, _ = w.Write([]byte("hello world"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	// In order: jack's group before jack.
	for _, o := range [][2]string{
		{"routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"request-id":{},"key-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.Addr())},
		{"consumers/rose", `{"username":"rose","plugins":{"key-auth":{"key":"k-rose"}}}`},
		{"consumers/ann", `{"username":"ann","plugins":{"key-auth":{"key":"k-ann"},"proxy-rewrite":{"headers":{"set":{"X-Who":"ann"}}}}}`},
		{"consumer_groups/g1", `{"plugins":{"proxy-rewrite":{"headers":{"set":{"X-Who":"g1"}}}}}`},
		{"consumers/jack", `{"username":"jack","group_id":"g1","plugins":{"key-auth":{"key":"k-jack"}}}`},
	} {
		if r := admin.do(t, c, "PUT", o[0], o[1]); r.status != 200 && r.status != 201 {
			t.Fatalf("PUT %s: %d %s", o[0], r.status, r.body)
		}
	}
	for _, key := range []string{"k-rose", "k-ann", "k-jack"} {
		var r result
		eventually(t, 10*time.Second, func() error {
			if r = do(t, c, "GET", g.url("/hello"), "", map[string]string{"apikey": key}, nil); r.status != 200 {
				return fmt.Errorf("key %s: %d", key, r.status)
			}
			return nil
		})
		mu.Lock()
		up := seen
		mu.Unlock()
		if id := r.header.Get("X-Request-Id"); id == "" || id != up {
			t.Errorf("key %s: the answer's X-Request-Id %q, the upstream saw %q", key, id, up)
		}
	}
}
