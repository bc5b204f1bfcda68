package worker

import (
	"reflect"
	"slices"
	"testing"
	"unsafe"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
	"coregate/worker/router"
)

// TestRouteSize: the route struct a worker keeps per route, in a slab, is
// at most 368 bytes (it was 576 with what few routes have inline, 480
// with its host patterns and splits, 448 with a copy of its uris, 424 with
// its timeouts inline, 408 with its router input's Index and Order, 392
// with its plugins' body and response limits inline, 368 with a string of
// its id), its
// router input (routeIn) has every field of router.Route but those two, a
// route with no name, service or consumers' variants shares noAbout, and
// the route's variables read what it was built from.
func TestRouteSize(t *testing.T) {
	if n := unsafe.Sizeof(route{}); n > 352 {
		t.Errorf("route is %d bytes, want at most 352 (50 000 of them in a slab)", n)
	}
	var inFields, routerFields []string
	for _, f := range reflect.VisibleFields(reflect.TypeFor[routeIn]()) {
		inFields = append(inFields, f.Name+" "+f.Type.String())
	}
	for _, f := range reflect.VisibleFields(reflect.TypeFor[router.Route]()) {
		if f.Name != "Index" && f.Name != "Order" {
			routerFields = append(routerFields, f.Name+" "+f.Type.String())
		}
	}
	if !slices.Equal(inFields, routerFields) {
		t.Errorf("routeIn has %v, router.Route %v and Index and Order", inFields, routerFields)
	}
	s := testSpec(t, nil,
		`{"id":"plain","uri":"/plain","upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"named","name":"the-name","uri":"/named","upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
	svc, err := spec.DecodeService([]byte(`{"id":"svc","name":"svc-name","upstream":{"nodes":{"127.0.0.1:1981":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	served, err := spec.DecodeRoute([]byte(`{"id":"served","uri":"/served","service_id":"svc"}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Services, s.Routes = append(s.Services, svc), append(s.Routes, served)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	ps := pluginSet{reg: plugins.Default, env: plugins.NewLocalEnv()}
	snap, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	type vars struct{ id, name, serviceID, serviceName string }
	want := map[string]vars{
		"plain":  {"plain", "", "", ""},
		"named":  {"named", "the-name", "", ""},
		"served": {"served", "", "svc", "svc-name"},
	}
	for _, rt := range snap.routes.flat() {
		w, ok := want[rt.id()]
		if !ok {
			t.Fatalf("route %s not asked for", rt.id())
		}
		delete(want, rt.id())
		if rt.to != &rt.up.to || *rt.to != defaultTimeouts {
			t.Errorf("route %s: timeouts %+v, not its upstream's", rt.id(), *rt.to)
		}
		if (rt.about == noAbout) != (rt.id() == "plain") {
			t.Errorf("route %s: shares noAbout %v", rt.id(), rt.about == noAbout)
		}
		cc := &clientConn{}
		cc.rt = rt
		got := vars{string(cc.routeVar(httpvar.RouteID)), string(cc.routeVar(httpvar.RouteName)),
			string(cc.routeVar(httpvar.ServiceID)), string(cc.routeVar(httpvar.ServiceName))}
		if got != w {
			t.Errorf("route %s: variables %+v, want %+v", rt.id(), got, w)
		}
	}
	if len(want) > 0 {
		t.Errorf("routes not built: %v", want)
	}
	if a := noAbout; a.name != nil || a.serviceID != nil || a.serviceName != nil || a.byConsumer != nil || a.hosts != nil || a.splits != nil {
		t.Error("noAbout written")
	}
}

// TestNodeSize: the node struct a worker keeps per upstream node stays in
// the 128-byte size class (it was 192 with a copy of its address, 160
// with its Host and host as byte slices, 144 with its host a string of
// its own), and
// the upstream_addr and balancer_ip variables and its Host for
// pass_host=node read the node's address and host.
func TestNodeSize(t *testing.T) {
	if n := unsafe.Sizeof(node{}); n > 128 {
		t.Errorf("node is %d bytes, want at most 128", n)
	}
	for _, c := range []struct{ node, addr, ip, host string }{
		{"127.0.0.1:1980", "127.0.0.1:1980", "127.0.0.1", "127.0.0.1:1980"},
		{"[::1]:1980", "[::1]:1980", "::1", "[::1]:1980"},
		{"example.com", "example.com:80", "example.com", "example.com"},
	} {
		cu := testUpstream(t, `{"nodes":{"`+c.node+`":1}}`)
		if h := string(cu.nodes[0].hostHeader); h != c.host {
			t.Errorf("%s: the node's Host for pass_host=node: %q, want %q", c.node, h, c.host)
		}
		cc := &clientConn{}
		cc.rt, cc.tries = &route{up: cu}, 1
		vars := (*reqVars)(cc)
		for name, want := range map[string]string{"upstream_addr": c.addr, "balancer_ip": c.ip} {
			x := httpvar.Parse(name)
			v, ok := vars.Lookup(&x)
			if !ok || string(v) != want {
				t.Errorf("%s: $%s: %q %v, want %q", c.node, name, v, ok, want)
			}
		}
	}
}

// TestBalancerSize: a roundrobin balancer, which most upstreams have,
// stays in the 80-byte size class (it was 224 with the other kinds'
// state inline, 96 with its groups inline) and holds none of that
// state; each other kind has its own.
func TestBalancerSize(t *testing.T) {
	if n := unsafe.Sizeof(balancer{}); n > 80 {
		t.Errorf("balancer is %d bytes, want at most 80", n)
	}
	seen := map[*balancerKinds]bool{}
	for _, typ := range []string{"roundrobin", "chash", "least_conn", "ewma", "least_conn"} {
		k := testBalancer(t, `{"type":"`+typ+`","key":"remote_addr","nodes":{"127.0.0.1:1980":1,"127.0.0.1:1981":1}}`).balancerKinds
		if (k == nil) != (typ == "roundrobin") {
			t.Errorf("%s: its kind's state %v", typ, k != nil)
		}
		if k != nil && seen[k] {
			t.Errorf("%s: state shared with another balancer", typ)
		}
		seen[k] = true
	}
}

// TestUpstreamSize: the upstream struct a worker keeps per upstream stays
// in the 144-byte size class (168 bytes, in the 176-byte class, with
// passHost apart from disc, 160 with retries a word and upstream_host a
// byte slice), and a node's Host for pass_host=node is its
// host, bracketed where it is an IPv6 address, with its port where that
// is not the scheme's default: viewed in addr where it is addr's text,
// joined otherwise.
func TestUpstreamSize(t *testing.T) {
	if n := unsafe.Sizeof(upstream{}); n > 144 {
		t.Errorf("upstream is %d bytes, want at most 144", n)
	}
	for _, tc := range []struct{ nodes, scheme, host string }{
		{`{"127.0.0.1:1980":1}`, "http", "127.0.0.1:1980"},
		{`{"example.com:8080":1}`, "http", "example.com:8080"},
		{`{"127.0.0.1:80":1}`, "http", "127.0.0.1"},
		{`{"127.0.0.1":1}`, "http", "127.0.0.1"},
		{`{"127.0.0.1:80":1}`, "https", "127.0.0.1:80"},
		{`{"[::1]:1980":1}`, "http", "[::1]:1980"},
		{`{"[::1]:80":1}`, "http", "[::1]"},
		{`{"[::1]":1}`, "http", "[::1]"},
	} {
		cu := testUpstream(t, `{"scheme":"`+tc.scheme+`","nodes":`+tc.nodes+`}`)
		if h := string(cu.nodes[0].hostHeader); h != tc.host {
			t.Errorf("%s %s: Host for pass_host=node %q, want %q", tc.scheme, tc.nodes, h, tc.host)
		}
	}
}
