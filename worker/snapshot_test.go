package worker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
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
	snap, err := compile(s, router.HostURI, upstreamEnv{ka: Keepalive{Size: 16, Idle: 5 * time.Second, Requests: 100}}, pluginSet{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	a, b := snap.routes.at(0).up, snap.routes.at(1).up
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
	if a := snap.routes.at(0).up; a.kaSize != 320 || a.kaIdle != 60*time.Second || a.kaRequests != 1000 {
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
	prev, err := compile(s1, router.HostURI, upstreamEnv{}, pluginSet{}, nil, nil)
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
				prev.routes.at(0).up.bal.pick(0, 0, 0)
			}
		}
	}()
	next, err := compile(s2, router.HostURI, upstreamEnv{}, pluginSet{}, prev, nil)
	close(stop)
	<-done
	if err != nil {
		t.Fatal(err)
	}
	if next.routes.at(0).up != prev.routes.at(0).up || next.routes.at(3).up != prev.routes.at(0).up {
		t.Error("the routes on the unchanged upstream u got a new compiled upstream")
	}
	if next.routes.at(1).up != prev.routes.at(1).up {
		t.Error("the unchanged route's own upstream was compiled again")
	}
	if next.routes.at(2).up == prev.routes.at(2).up || next.routes.at(2).up.nodes[0].addr != "127.0.0.1:1984" {
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
	fresh, err := compile(s2, router.HostURI, upstreamEnv{}, pluginSet{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if fresh.routes.at(0).up == prev.routes.at(0).up {
		t.Error("a build without a served snapshot reused an upstream")
	}
}

// TestCompileTakesOverUnchangedRoutes: a build whose routes are, for the
// most part, the Spec objects of the served snapshot's takes those routes
// over as built (their plugins, consumer variants and timeouts), builds
// the others, and routes every request as a build from nothing would; a
// change to what every route's build reads (here a consumer) builds them
// all again.
func TestCompileTakesOverUnchangedRoutes(t *testing.T) {
	decode := func(js string) *spec.Route {
		r, err := spec.DecodeRoute([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	svc1, err := spec.DecodeService([]byte(`{"id":"s","hosts":["a.com"],"plugins":{"proxy-rewrite":{"uri":"/svc"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	svc2, err := spec.DecodeService([]byte(`{"id":"s","hosts":["b.com"],"plugins":{"proxy-rewrite":{"uri":"/svc2"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	ups, err := spec.DecodeUpstream([]byte(`{"id":"u","nodes":{"127.0.0.1:1980":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	kept := decode(`{"id":"1","uri":"/a","methods":["GET"],"upstream_id":"u","plugins":{"key-auth":{}}}`)
	replaced := decode(`{"id":"2","uri":"/b","upstream_id":"u"}`)
	onService := decode(`{"id":"3","uri":"/c","service_id":"s"}`)
	withVars := decode(`{"id":"4","uri":"/d","vars":[["arg_x","==","1"]],"upstream_id":"u","timeout":{"connect":1,"send":2,"read":3}}`)
	consumer := `{"username":"jack","plugins":{"key-auth":{"key":"k1"},"proxy-rewrite":{"uri":"/jack"}}}`
	s1 := &spec.Spec{
		Routes:    []*spec.Route{kept, replaced, onService, withVars},
		Services:  []*spec.Service{svc1},
		Upstreams: []*spec.Upstream{ups},
		Consumers: []*spec.Consumer{mustDecode(t, spec.DecodeConsumer, consumer)},
	}
	ps := pluginSet{env: plugins.NewLocalEnv()}
	prev, err := compile(s1, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}

	// Route 2 replaced, routes moved, one added, the service of route 3
	// replaced.
	replacement := decode(`{"id":"2","uri":"/b2","upstream_id":"u"}`)
	added := decode(`{"id":"5","uri":"/e","upstream":{"nodes":{"127.0.0.1:1985":1}}}`)
	s2 := &spec.Spec{
		Routes:    []*spec.Route{withVars, kept, replacement, added, onService},
		Services:  []*spec.Service{svc2},
		Upstreams: []*spec.Upstream{ups},
		Consumers: []*spec.Consumer{mustDecode(t, spec.DecodeConsumer, consumer)}, // equal, not the same
	}
	next, err := compile(s2, router.HostURI, upstreamEnv{}, ps, prev, nil)
	if err != nil {
		t.Fatal(err)
	}
	byID := func(s *Snapshot, id string) *route {
		for _, r := range s.routes.flat() {
			if r.id() == id {
				return r
			}
		}
		return nil
	}
	for id, want := range map[string]bool{"1": true, "4": true, "2": false, "3": false, "5": false} {
		if got := byID(next, id) != nil && byID(next, id) == byID(prev, id); got != want {
			t.Errorf("route %s taken over: %v, want %v", id, got, want)
		}
	}
	if next.consumers != prev.consumers {
		t.Error("the unchanged consumers were indexed again")
	}
	if c := next.consumers.ByCredential("key-auth", []byte("k1")); c == nil || byID(next, "1").about.byConsumer[c] == nil {
		t.Error("the route taken over has no plugins for the consumer of the new snapshot")
	}

	// The routes taken over route as a build from nothing routes them.
	fresh, err := compile(s2, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		method, host, path string
		vars               map[string]string
		want               string // route id; "" none
	}{
		{"GET", "x", "/a", nil, "1"},
		{"POST", "x", "/a", nil, ""},
		{"GET", "x", "/b", nil, ""},
		{"GET", "x", "/b2", nil, "2"},
		{"GET", "a.com", "/c", nil, ""},
		{"GET", "b.com", "/c", nil, "3"},
		{"GET", "x", "/d", map[string]string{"arg_x": "1"}, "4"},
		{"GET", "x", "/d", map[string]string{"arg_x": "2"}, ""},
		{"GET", "x", "/e", nil, "5"},
	} {
		for name, s := range map[string]*Snapshot{"taken over": next, "fresh": fresh} {
			req := &router.Request{Method: router.ParseMethod([]byte(tc.method)), Host: []byte(tc.host),
				Path: []byte(tc.path), Vars: varMap(tc.vars)}
			got := ""
			if i, ok := s.router.Match(req); ok {
				got = s.slots.at(i).id()
			}
			if got != tc.want {
				t.Errorf("%s: %s %s%s: route %q, want %q", name, tc.method, tc.host, tc.path, got, tc.want)
			}
		}
	}
	if r := byID(next, "4"); r.to.connect != time.Second || r.to.read != 3*time.Second {
		t.Errorf("route 4 taken over with timeouts %v/%v", r.to.connect, r.to.read)
	}
	if got := byID(next, "3").about.hosts; len(got) != 1 || string(got[0]) != "b.com" {
		t.Errorf("route 3 on the replaced service has hosts %q", got)
	}

	// A consumer more: every route is built again, with the new index.
	s3 := *s2
	s3.Consumers = append(slices.Clone(s2.Consumers), mustDecode(t, spec.DecodeConsumer, `{"username":"jill","plugins":{"key-auth":{"key":"k2"}}}`))
	again, err := compile(&s3, router.HostURI, upstreamEnv{}, ps, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range again.routes.flat() {
		if again.routes.at(i) == next.routes.at(i) {
			t.Errorf("route %s taken over across a change of consumers", again.routes.at(i).id())
		}
	}
	// Another Env (another worker's, or a test's): nothing is taken over.
	other, err := compile(s2, router.HostURI, upstreamEnv{}, pluginSet{env: plugins.NewLocalEnv()}, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	if other.routes.at(0) == next.routes.at(0) {
		t.Error("a route built with another Env was taken over")
	}
}

// varMap is a router.VarSource over APISIX variable names and values.
type varMap map[string]string

func (m varMap) Lookup(v *httpvar.Var) ([]byte, bool) {
	for name, val := range m {
		if httpvar.Parse(name) == *v {
			return []byte(val), true
		}
	}
	return nil, false
}

// TestCompileTakesOverInServedOrder changes routes the way the store
// serves them (in creation order: one replaced in place, one deleted, new
// ones last) and checks that every route left unchanged is taken over and
// every other one built, through the search that follows that order.
func TestCompileTakesOverInServedOrder(t *testing.T) {
	route := func(id, uri string) *spec.Route {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":%q,"uri":%q,"upstream":{"nodes":{"127.0.0.1:1980":1}}}`, id, uri))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	var rs []*spec.Route
	for i := 1; i <= 6; i++ {
		rs = append(rs, route(fmt.Sprint(i), fmt.Sprint("/", i)))
	}
	ps := pluginSet{env: plugins.NewLocalEnv()}
	prev, err := compile(&spec.Spec{Routes: rs}, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	// 2 replaced, 3 deleted, 7 and 8 created; then 5 deleted and 6
	// replaced, the next build over that one.
	s2 := []*spec.Route{rs[0], route("2", "/2b"), rs[3], rs[4], rs[5], route("7", "/7"), route("8", "/8")}
	next, err := compile(&spec.Spec{Routes: s2}, router.HostURI, upstreamEnv{}, ps, prev, nil)
	if err != nil {
		t.Fatal(err)
	}
	s3 := []*spec.Route{s2[0], s2[1], s2[2], route("6", "/6b"), s2[5], s2[6]}
	last, err := compile(&spec.Spec{Routes: s3}, router.HostURI, upstreamEnv{}, ps, next, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name       string
		prev, snap *Snapshot
		taken      []bool
	}{
		{"second build", prev, next, []bool{true, false, true, true, true, false, false}},
		{"third build", next, last, []bool{true, true, true, false, true, true}},
	} {
		if c.snap.routes.len() != len(c.taken) {
			t.Fatalf("%s: %d routes, want %d", c.name, c.snap.routes.len(), len(c.taken))
		}
		for i, r := range c.snap.routes.flat() {
			if got := slices.Contains(c.prev.routes.flat(), r); got != c.taken[i] {
				t.Errorf("%s: route %s taken over: %v, want %v", c.name, r.id(), got, c.taken[i])
			}
		}
		for i, r := range c.snap.routes.flat() {
			req := &router.Request{Method: router.ParseMethod([]byte("GET")), Host: []byte("x"), Path: []byte(c.snap.routes.at(i).in.URIs[0])}
			if j, ok := c.snap.router.Match(req); !ok || c.snap.slots.at(j) != r {
				t.Errorf("%s: %s does not route to route %s", c.name, req.Path, r.id())
			}
		}
	}
}

// mustDecode decodes one object with decode (spec.DecodeConsumer, …).
func mustDecode[T any](t testing.TB, decode func([]byte) (*T, error), s string) *T {
	t.Helper()
	v, err := decode([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}
