//go:build !race

package proxyrewrite

import (
	"strconv"
	"testing"

	"coregate/plugins/internal/resub"
	"coregate/plugins/plugintest"
)

// TestAllocRewrite: the rewrite phase allocates nothing, for every field
// and for regex_uri patterns of the literal shapes; patterns of other
// shapes on a target seen before (TestAllocRegexp measures the others).
func TestAllocRewrite(t *testing.T) {
	for _, tc := range []struct {
		name, conf string
		req        request
	}{
		{"uri", `{"uri":"/plugin_proxy_rewrite_args"}`, request{target: "/hello?q=apisix&a=iresty"}},
		{"uri with variables", `{"uri":"/$arg_new_uri/${arg_v ?? v1}?x=$http_x"}`, request{target: "/test?new_uri=a%20b", headers: []string{"x", "a?b"}}},
		{"escaped path", `{"uri":"/a b"}`, request{target: "/t?x=1"}},
		{"regex prefix", `{"regex_uri":["^/api/(.*)","/$1"]}`, request{target: "/api/users/42?x=1"}},
		{"regex anchored literal", `{"regex_uri":["^/a/(.*)","/A/$1","^/hello$","/world"]}`, request{target: "/hello"}},
		{"regex other shape", `{"regex_uri":["^/(\\w+)/(\\d+)$","/$2/$1"]}`, request{target: "/item/42"}},
		{"regex no match", `{"regex_uri":["^/(\\w+)/(\\d+)$","/$2/$1"]}`, request{target: "/a/b/c"}},
		{"regex captures in headers", `{"regex_uri":["^/test/(.*)","/m"],"headers":{"set":{"x-multi":["cap-$1","$http_x_src"]},"add":{"x-a":"${1}-$remote_addr"}}}`,
			request{target: "/test/echo", headers: []string{"x-src", "from-src"}}},
		{"capture bringing a variable", `{"regex_uri":["^/v/(.*)","/m"],"headers":{"set":{"x-c":"$1"}}}`, request{target: "/v/$remote_addr"}},
		{"unsafe", `{"uri":"/p?x=1","use_real_request_uri_unsafe":true}`, request{target: "/hello?q=1"}},
		{"host, method, headers", `{"host":"a.com","method":"POST","headers":{"X-Api":"v2","X-Empty":"","X-Var":"$remote_addr"}}`,
			request{target: "/h", headers: []string{"X-Api", "v1", "X-Empty", "e"}}},
		{"add, set, remove", `{"headers":{"add":{"A":"1"},"set":{"B":["2","3"]},"remove":["C"]}}`, request{target: "/h", headers: []string{"C", "c"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf)
			c := tc.req.ctx()
			plugintest.AllocsPerRun(t, 200, func() { c.Reset(); plugintest.Run(&p, c) })
		})
	}
}

// TestAllocRegexp: a pattern of another shape allocates regexp's
// submatch indices on a match, once per target while the rule's cache has
// room: a target seen before costs nothing, a new one past the bound one
// allocation.
func TestAllocRegexp(t *testing.T) {
	p := build(t, `{"regex_uri":["^/(\\w+)/(\\d+)$","/$2/$1"]}`)
	c := request{target: "/item/42"}.ctx()
	plugintest.AllocsPerRun(t, 200, func() { c.Reset(); plugintest.Run(&p, c) })
	for i := range resub.MaxCached {
		c := request{target: "/item/" + strconv.Itoa(i+100)}.ctx()
		plugintest.Run(&p, c)
	}
	c = request{target: "/item/7"}.ctx()
	if n := testing.AllocsPerRun(200, func() { c.Reset(); plugintest.Run(&p, c) }); n != 1 {
		t.Fatalf("a new target past the cache's bound: %.1f allocations per request, want 1", n)
	}
	if string(c.UpstreamURI) != "/7/item" {
		t.Fatalf("upstream target %q", c.UpstreamURI)
	}
}
