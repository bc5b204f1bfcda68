//go:build !race

package router

import (
	"net/netip"
	"testing"

	"coregate/admin/spec"
	"coregate/httpvar"
)

func TestMatchAllocs(t *testing.T) {
	routes := []Route{
		{Index: 1, URIs: []string{"/exact"}},
		{Index: 2, URIs: []string{"/pre/*"}},
		{Index: 3, URIs: []string{"/h"}, Hosts: []string{"foo.com"}},
		{Index: 4, URIs: []string{"/h"}, Hosts: []string{"*.foo.com"}},
		{Index: 5, URIs: []string{"/v"}, Vars: vars(t, `[["arg_a","==","1"],["http_x_n",">",5],["http_ua","~*","droid"],["http_ip","ipmatch","2001:db8::/32"],["cookie_c","in",["x","y"]]]`)},
		{Index: 6, URIs: []string{"/ip"}, RemoteAddrs: prefixes(t, "10.0.0.0/8", "fe80::/10")},
		{Index: 7, URIs: []string{"/t/*/end"}},
		{Index: 8, URIs: []string{"/p"}, Hosts: []string{"foo.com:8080"}},
	}
	src := mapVars{
		{Kind: httpvar.Arg, Name: "a"}:    []byte("1"),
		{Kind: httpvar.HTTP, Name: "x_n"}: []byte("17.5"),
		{Kind: httpvar.HTTP, Name: "ua"}:  []byte("Android 14"),
		{Kind: httpvar.HTTP, Name: "ip"}:  []byte("2001:db8::7"),
		{Kind: httpvar.Cookie, Name: "c"}: []byte("y"),
	}
	cases := []struct {
		name string
		req  Request
		want int
	}{
		{"exact", Request{Method: MethodGET, Path: []byte("/exact"), Host: []byte("x.org")}, 1},
		{"prefix", Request{Method: MethodGET, Path: []byte("/pre/a/b"), Host: []byte("x.org")}, 2},
		{"host", Request{Method: MethodGET, Path: []byte("/h"), Host: []byte("FOO.com:80")}, 3},
		{"wildcard host", Request{Method: MethodGET, Path: []byte("/h"), Host: []byte("www.Foo.com")}, 4},
		{"port host", Request{Method: MethodGET, Path: []byte("/p"), Host: []byte("foo.com:8080")}, 8},
		{"vars", Request{Method: MethodGET, Path: []byte("/v"), Vars: src}, 5},
		{"remote addr", Request{Method: MethodGET, Path: []byte("/ip"), RemoteAddr: netip.MustParseAddr("::ffff:10.1.1.1")}, 6},
		{"tail regexp", Request{Method: MethodGET, Path: []byte("/t/x/y/end")}, 7},
		{"no match", Request{Method: MethodGET, Path: []byte("/nothing/here"), Host: []byte("foo.com")}, -1},
	}
	for _, mode := range []Mode{HostURI, URI} {
		r := mustBuild(t, routes, mode)
		for _, tc := range cases {
			req := tc.req
			got, ok := r.Match(&req)
			if !ok {
				got = -1
			}
			if got != tc.want {
				t.Fatalf("mode %d %s: Match = %d, want %d", mode, tc.name, got, tc.want)
			}
			if n := testing.AllocsPerRun(200, func() { r.Match(&req) }); n != 0 {
				t.Errorf("mode %d %s: %v allocs per Match, want 0", mode, tc.name, n)
			}
		}
	}
}

func TestParseAllocs(t *testing.T) {
	num := []byte(" -12.5e1 ")
	bad := []byte("12abc")
	n := testing.AllocsPerRun(200, func() {
		spec.LuaNumber(num)
		spec.LuaNumber(bad)
		ParseMethod([]byte("OPTIONS"))
	})
	if n != 0 {
		t.Errorf("%v allocs, want 0", n)
	}
}
