package worker

import (
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/worker/router"
)

func TestCompileKeepaliveDefaults(t *testing.T) {
	plain, err := spec.DecodeRoute([]byte(`{"id":"1","uri":"/a","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	own, err := spec.DecodeRoute([]byte(`{"id":"2","uri":"/b","upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":7,"idle_timeout":3,"requests":9}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{Routes: []*spec.Route{plain, own}}
	snap, err := compile(s, router.HostURI, Keepalive{Size: 16, Idle: 5 * time.Second, Requests: 100}, pluginSet{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := snap.routes[0].up, snap.routes[1].up
	if a.kaSize != 16 || a.kaIdle != 5*time.Second || a.kaRequests != 100 {
		t.Errorf("config.yaml defaults not applied: %d %v %d", a.kaSize, a.kaIdle, a.kaRequests)
	}
	if b.kaSize != 7 || b.kaIdle != 3*time.Second || b.kaRequests != 9 {
		t.Errorf("keepalive_pool not honoured: %d %v %d", b.kaSize, b.kaIdle, b.kaRequests)
	}
	snap, err = Compile(s, router.HostURI)
	if err != nil {
		t.Fatal(err)
	}
	if a := snap.routes[0].up; a.kaSize != 320 || a.kaIdle != 60*time.Second || a.kaRequests != 1000 {
		t.Errorf("APISIX defaults: %d %v %d", a.kaSize, a.kaIdle, a.kaRequests)
	}
}

func TestCompileRefusesUnknownPlugins(t *testing.T) {
	r, err := spec.DecodeRoute([]byte(`{"id":"7","uri":"/a","plugins":{"no-such-plugin":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(&spec.Spec{Routes: []*spec.Route{r}}, router.HostURI)
	if err == nil || err.Error() != "route 7: unknown plugin [no-such-plugin]" {
		t.Fatalf("err = %v", err)
	}
	svc, err := spec.DecodeService([]byte(`{"id":"s","plugins":{"from-service":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := spec.DecodeRoute([]byte(`{"id":"8","uri":"/b","service_id":"s","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(&spec.Spec{Routes: []*spec.Route{r2}, Services: []*spec.Service{svc}}, router.HostURI)
	if err == nil || err.Error() != "route 8: unknown plugin [from-service]" {
		t.Fatalf("service plugin: err = %v", err)
	}
	// An empty plugins object, as APISIX's benchmark routes have, is fine.
	r3, err := spec.DecodeRoute([]byte(`{"id":"9","uri":"/c","plugins":{},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Compile(&spec.Spec{Routes: []*spec.Route{r3}}, router.HostURI); err != nil {
		t.Fatal(err)
	}
}

// TestCompileKeepsUnchangedUpstreams: a build keeps the compiled upstream
// of every upstream object the served snapshot was compiled from (its
// balancer goes on where it was), compiles the changed ones afresh, and
// reads the served snapshot while the event loop uses it.
func TestCompileKeepsUnchangedUpstreams(t *testing.T) {
	route := func(js string) *spec.Route {
		r, err := spec.DecodeRoute([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	shared, err := spec.DecodeUpstream([]byte(`{"id":"u","nodes":{"127.0.0.1:1980":1,"127.0.0.1:1981":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	byID := route(`{"id":"1","uri":"/a","upstream_id":"u"}`)
	inline := route(`{"id":"2","uri":"/b","upstream":{"nodes":{"127.0.0.1:1982":1}}}`)
	changing := route(`{"id":"3","uri":"/c","upstream":{"nodes":{"127.0.0.1:1983":1}}}`)
	s1 := &spec.Spec{Routes: []*spec.Route{byID, inline, changing}, Upstreams: []*spec.Upstream{shared}}
	prev, err := compile(s1, router.HostURI, Keepalive{}, pluginSet{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The next configuration: route 3 replaced, a new route on the
	// shared upstream.
	changed := route(`{"id":"3","uri":"/c","upstream":{"nodes":{"127.0.0.1:1984":1}}}`)
	more := route(`{"id":"4","uri":"/d","upstream_id":"u"}`)
	s2 := &spec.Spec{Routes: []*spec.Route{byID, inline, changed, more}, Upstreams: []*spec.Upstream{shared}}

	// The event loop picks nodes of the served snapshot meanwhile (the
	// race detector checks that the build only reads what it does not
	// write).
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
				prev.routes[0].up.bal.pick(0)
			}
		}
	}()
	next, err := compile(s2, router.HostURI, Keepalive{}, pluginSet{}, prev, nil)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if next.routes[0].up != prev.routes[0].up || next.routes[3].up != prev.routes[0].up {
		t.Error("the routes on the unchanged upstream u got a new compiled upstream")
	}
	if next.routes[1].up != prev.routes[1].up {
		t.Error("the unchanged route's own upstream was compiled again")
	}
	if next.routes[2].up == prev.routes[2].up || next.routes[2].up.nodes[0].addr != "127.0.0.1:1984" {
		t.Error("the changed route kept its old upstream")
	}
	for _, addr := range []string{"127.0.0.1:1980", "127.0.0.1:1981", "127.0.0.1:1982", "127.0.0.1:1984"} {
		if !next.hasNode(addr) {
			t.Errorf("the new snapshot lacks node %s", addr)
		}
	}
	if next.hasNode("127.0.0.1:1983") {
		t.Error("the new snapshot still names the replaced route's node")
	}
	// Without a served snapshot, everything is compiled.
	fresh, err := compile(s2, router.HostURI, Keepalive{}, pluginSet{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.routes[0].up == prev.routes[0].up {
		t.Error("a build without a served snapshot reused an upstream")
	}
}
