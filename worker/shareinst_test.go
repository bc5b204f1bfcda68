package worker

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
)

// proxyRewriteOf is the proxy-rewrite instance of route id of s.
func proxyRewriteOf(t *testing.T, s *Snapshot, id string) plugins.Instance {
	t.Helper()
	for _, rt := range s.routes.flat() {
		if rt.id() != id {
			continue
		}
		for _, c := range rt.plugins.Plugins {
			if c.Name == "proxy-rewrite" {
				return c.Instance
			}
		}
	}
	t.Fatalf("route %s has no proxy-rewrite", id)
	return nil
}

// TestSharedInstances: routes whose proxy-rewrite configurations are the
// same bytes share one instance, others have their own, one holding a
// reference is built on its own; an instance leaves with its last route;
// and each route still rewrites as configured.
func TestSharedInstances(t *testing.T) {
	t.Setenv("COREGATE_TEST_SHARED_HDR", "from-env")
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "path=%s x=%s", r.URL.Path, r.Header.Get("X-Shared"))
	}))
	defer up.Close()
	route := func(id, conf string) string {
		return fmt.Sprintf(`{"id":%q,"uri":"/%s","plugins":{"proxy-rewrite":%s},"upstream":{"nodes":{%q:1}}}`, id, id, conf, hostPort(up.URL))
	}
	same := `{"uri":"/up","headers":{"set":{"X-Shared":"1"}}}`
	routes := []string{
		route("a", same), route("b", same),
		route("c", `{"uri":"/up","headers":{"set":{"X-Shared":"2"}}}`),
		route("d", `{"uri":"/up","headers":{"set":{"X-Shared":"$env://COREGATE_TEST_SHARED_HDR"}}}`),
		route("e", `{"uri":"/up","headers":{"set":{"X-Shared":"$env://COREGATE_TEST_SHARED_HDR"}}}`),
	}
	s := testSpec(t, nil, routes...)
	ps := pluginSet{reg: plugins.Default, env: plugins.NewLocalEnv()}
	snap, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b, c := proxyRewriteOf(t, snap, "a"), proxyRewriteOf(t, snap, "b"), proxyRewriteOf(t, snap, "c")
	if a != b {
		t.Error("routes a and b, the same configuration: two instances")
	}
	if a == c {
		t.Error("routes a and c, other configurations: one instance")
	}
	if proxyRewriteOf(t, snap, "d") == proxyRewriteOf(t, snap, "e") {
		t.Error("routes d and e, configurations with a reference: one instance")
	}
	if n := snap.instances.len(); n != 2 {
		t.Errorf("%d shared instances, want 2 (a and b's, c's)", n)
	}
	if r, _ := snap.instanceRefs.get(a); r.refs != 2 {
		t.Errorf("a and b's instance counts %d routes, want 2", r.refs)
	}

	// Served: each route's header as configured.
	w, _ := runWorker(t, Config{}, s)
	for id, want := range map[string]string{"a": "1", "b": "1", "c": "2", "d": "from-env", "e": "from-env"} {
		resp, err := http.Get("http://" + w.Addr().String() + "/" + id)
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if got := "path=/up x=" + want; string(body) != got {
			t.Errorf("route %s: %q, want %q", id, body, got)
		}
	}

	// Route a deleted: b keeps the instance, counting one route; then b
	// deleted too: the instance leaves.
	s2 := &spec.Spec{Routes: s.Routes[1:], Checked: s.Checked}
	snap2, err := compile(s2, router.HostURI, upstreamEnv{}, ps, snap, nil)
	if err != nil {
		t.Fatal(err)
	}
	if proxyRewriteOf(t, snap2, "b") != a {
		t.Error("route b lost its instance when a was deleted")
	}
	if r, _ := snap2.instanceRefs.get(a); r.refs != 1 {
		t.Errorf("after a's delete the instance counts %d routes, want 1", r.refs)
	}
	s3 := &spec.Spec{Routes: s.Routes[2:], Checked: s.Checked}
	snap3, err := compile(s3, router.HostURI, upstreamEnv{}, ps, snap2, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := snap3.instanceRefs.get(a); ok || snap3.instances.len() != 1 {
		t.Errorf("after b's delete: a and b's instance still held (%v), %d shared instances, want c's alone", ok, snap3.instances.len())
	}
	// A route put again with the configuration gets an instance of its own
	// making, built anew.
	s4 := &spec.Spec{Routes: append([]*spec.Route{s.Routes[0]}, s.Routes[2:]...), Checked: s.Checked}
	snap4, err := compile(s4, router.HostURI, upstreamEnv{}, ps, snap3, nil)
	if err != nil {
		t.Fatal(err)
	}
	if r, ok := snap4.instanceRefs.get(proxyRewriteOf(t, snap4, "a")); !ok || r.refs != 1 {
		t.Errorf("route a put again: its instance held %v, counting %d routes, want 1", ok, r.refs)
	}
}
