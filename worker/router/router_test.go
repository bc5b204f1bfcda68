package router

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestMatchSemantics(t *testing.T) {
	tests := []struct {
		name   string
		mode   Mode
		routes []Route
		probes []probe
	}{
		{
			name: "exact beats prefix whatever the priority",
			routes: []Route{
				{Index: 1, URIs: []string{"/foo*"}, Priority: 100},
				{Index: 2, URIs: []string{"/foo"}},
			},
			probes: []probe{{path: "/foo", want: 2}, {path: "/foobar", want: 1}},
		},
		{
			name: "slash star needs the slash",
			routes: []Route{
				{Index: 1, URIs: []string{"/foo/*"}},
			},
			probes: []probe{
				{path: "/foo", want: -1},
				{path: "/foo/", want: 1},
				{path: "/foo/a/b", want: 1},
				{path: "/foobar", want: -1},
				{path: "/fo", want: -1},
			},
		},
		{
			name: "bare star is a plain prefix",
			routes: []Route{
				{Index: 1, URIs: []string{"/foo*"}},
			},
			probes: []probe{
				{path: "/foo", want: 1},
				{path: "/foobar", want: 1},
				{path: "/foo/x", want: 1},
				{path: "/fo", want: -1},
			},
		},
		{
			name: "longest prefix first, then shorter ones",
			routes: []Route{
				{Index: 1, URIs: []string{"/*"}},
				{Index: 2, URIs: []string{"/a/*"}, Methods: MethodPOST},
				{Index: 3, URIs: []string{"/a/b/*"}, Methods: MethodPUT},
				{Index: 4, URIs: []string{"/a/b/c"}, Methods: MethodDELETE},
			},
			probes: []probe{
				{method: "DELETE", path: "/a/b/c", want: 4},
				{method: "PUT", path: "/a/b/c", want: 3},
				{method: "POST", path: "/a/b/c", want: 2},
				{method: "GET", path: "/a/b/c", want: 1},
				{method: "PUT", path: "/a/bc", want: 1},
				{method: "GET", path: "/", want: 1},
				{method: "GET", path: "", want: -1},
			},
		},
		{
			name: "empty prefix matches every path",
			routes: []Route{
				{Index: 1, URIs: []string{"*"}},
				{Index: 2, URIs: []string{"/x*"}},
			},
			probes: []probe{{path: "/x1", want: 2}, {path: "/y", want: 1}, {path: "", want: 1}},
		},
		{
			name: "priority descending within one path",
			routes: []Route{
				{Index: 1, URIs: []string{"/p"}, Priority: 1},
				{Index: 2, URIs: []string{"/p"}, Priority: 3},
				{Index: 3, URIs: []string{"/p"}, Priority: 2},
				{Index: 4, URIs: []string{"/q*"}, Priority: -1},
				{Index: 5, URIs: []string{"/q*"}},
			},
			probes: []probe{{path: "/p", want: 2}, {path: "/q", want: 5}},
		},
		{
			name: "same priority: longer written path first, then insertion order",
			routes: []Route{
				{Index: 1, URIs: []string{"/a/*"}},
				{Index: 2, URIs: []string{"/a/*xyz"}},
				{Index: 3, URIs: []string{"/b*"}},
				{Index: 4, URIs: []string{"/b*"}},
			},
			probes: []probe{
				{path: "/a/1xyz", want: 2},
				{path: "/a/1", want: 2}, // "*xyz" is one wildcard item: "xyz" is its name
				{path: "/b", want: 3},
			},
		},
		{
			name: "priority beats prefix length only within a path",
			routes: []Route{
				{Index: 1, URIs: []string{"/a*"}, Priority: 10},
				{Index: 2, URIs: []string{"/ab*"}},
			},
			probes: []probe{{path: "/abc", want: 2}, {path: "/ac", want: 1}},
		},
		{
			name: "colon segments are literal",
			routes: []Route{
				{Index: 1, URIs: []string{"/user/:id"}},
				{Index: 2, URIs: []string{"/file:list"}},
				{Index: 3, URIs: []string{"/u/:id/*"}},
			},
			probes: []probe{
				{path: "/user/:id", want: 1},
				{path: "/user/42", want: -1},
				{path: "/file:list", want: 2},
				{path: "/file:xx", want: -1},
				{path: "/u/:id/x", want: 3},
				{path: "/u/7/x", want: -1},
			},
		},
		{
			name: "text after the star is checked as lua-resty-radixtree does",
			routes: []Route{
				{Index: 1, URIs: []string{"/a/*/b"}},
				{Index: 2, URIs: []string{"/c/*x/:y"}},
				{Index: 3, URIs: []string{"/d*e"}},
			},
			probes: []probe{
				{path: "/a/x/b", want: 1},
				{path: "/a/x/y/b", want: 1},
				{path: "/a/x/c", want: -1},
				{path: "/c/1/2/z", want: 2},
				{path: "/c/1/2/", want: -1},
				{path: "/dzzz", want: 3}, // no ':' or '*' item: only the prefix counts
			},
		},
		{
			name: "methods",
			routes: []Route{
				{Index: 1, URIs: []string{"/m"}, Methods: MethodGET | MethodPOST},
				{Index: 2, URIs: []string{"/m"}},
			},
			probes: []probe{
				{method: "POST", path: "/m", want: 1},
				{method: "PUT", path: "/m", want: 2},
				{method: "BREW", path: "/m", want: 2},
				{method: "get", path: "/m", want: 2},
			},
		},
		{
			name: "remote addrs v4, v6 and v4-mapped",
			routes: []Route{
				{Index: 1, URIs: []string{"/r"}, RemoteAddrs: prefixes(t, "10.0.0.0/8", "fe80::/16")},
				{Index: 2, URIs: []string{"/r"}, RemoteAddrs: prefixes(t, "::ffff:192.168.1.0/120")},
				{Index: 3, URIs: []string{"/r"}, RemoteAddrs: prefixes(t, "127.0.0.1")},
			},
			probes: []probe{
				{path: "/r", addr: "10.1.2.3", want: 1},
				{path: "/r", addr: "::ffff:10.1.2.3", want: 1},
				{path: "/r", addr: "fe80::1", want: 1},
				{path: "/r", addr: "192.168.1.77", want: 2},
				{path: "/r", addr: "::ffff:127.0.0.1", want: 3},
				{path: "/r", addr: "127.0.0.2", want: -1},
				{path: "/r", addr: "::1", want: -1},
				{path: "/r", want: -1}, // no address
			},
		},
		{
			name: "host uri: exact host, then longest wildcard, then host-less",
			routes: []Route{
				{Index: 1, URIs: []string{"/h"}, Hosts: []string{"*"}},
				{Index: 2, URIs: []string{"/h"}, Hosts: []string{"*.foo.com"}},
				{Index: 3, URIs: []string{"/h"}, Hosts: []string{"*.a.foo.com"}},
				{Index: 4, URIs: []string{"/h"}, Hosts: []string{"a.foo.com"}},
				{Index: 5, URIs: []string{"/h", "/only"}, Priority: 100},
				{Index: 6, URIs: []string{"/w"}, Hosts: []string{"*.a.foo.com"}, Methods: MethodPOST},
				{Index: 7, URIs: []string{"/w"}, Hosts: []string{"*.foo.com"}},
			},
			probes: []probe{
				{path: "/h", host: "a.foo.com", want: 4},
				{path: "/h", host: "A.Foo.COM:8080", want: 4},
				{path: "/h", host: "a.foo.com.", want: 4},
				{path: "/h", host: "x.a.foo.com", want: 3},
				{path: "/h", host: "b.foo.com", want: 2},
				{path: "/h", host: ".foo.com", want: 2},
				{path: "/h", host: "foo.com", want: 1},
				{path: "/h", host: "", want: 1},
				{path: "/only", host: "a.foo.com", want: 5},
				{method: "GET", path: "/w", host: "x.a.foo.com", want: 7},
				{method: "POST", path: "/w", host: "x.a.foo.com", want: 6},
			},
		},
		{
			name: "host uri: host route beats host-less route of higher priority",
			routes: []Route{
				{Index: 1, URIs: []string{"/p"}, Priority: 100},
				{Index: 2, URIs: []string{"/*"}, Hosts: []string{"test.com"}, Priority: -5},
			},
			probes: []probe{
				{path: "/p", host: "test.com", want: 2},
				{path: "/p", host: "other.com", want: 1},
			},
		},
		{
			name: "host uri: wildcard is a suffix, not a label match",
			routes: []Route{
				{Index: 1, URIs: []string{"/s"}, Hosts: []string{"*foo.com"}},
				{Index: 2, URIs: []string{"/s"}, Hosts: []string{"*.foo.com"}},
			},
			probes: []probe{
				{path: "/s", host: "foo.com", want: 1},
				{path: "/s", host: "barfoo.com", want: 1},
				{path: "/s", host: "x.foo.com", want: 2},
				{path: "/s", host: "foo.co", want: -1},
			},
		},
		{
			name: "host with port compares with the whole Host header",
			routes: []Route{
				{Index: 1, URIs: []string{"/p"}, Hosts: []string{"foo.com:8080"}},
				{Index: 2, URIs: []string{"/p"}, Hosts: []string{"[::1]"}},
			},
			probes: []probe{
				{path: "/p", host: "foo.com:8080", want: 1},
				{path: "/p", host: "FOO.com:8080", want: 1},
				{path: "/p", host: "foo.com", want: -1},
				{path: "/p", host: "foo.com:80", want: -1},
				{path: "/p", host: "[::1]", want: 2},
				{path: "/p", host: "[::1]:80", want: -1},
			},
		},
		{
			name: "host uri: configured hosts are lower-cased",
			routes: []Route{
				{Index: 1, URIs: []string{"/u"}, Hosts: []string{"Test.COM"}},
			},
			probes: []probe{{path: "/u", host: "test.com", want: 1}, {path: "/u", host: "TEST.com", want: 1}},
		},
		{
			name:   "uri mode: host is a condition and priority rules",
			mode:   URI,
			routes: []Route{{Index: 1, URIs: []string{"/p"}, Priority: 100}, {Index: 2, URIs: []string{"/p"}, Hosts: []string{"test.com"}}},
			probes: []probe{{path: "/p", host: "test.com", want: 1}},
		},
		{
			name: "uri mode: hosts, wildcards and ports",
			mode: URI,
			routes: []Route{
				{Index: 1, URIs: []string{"/p"}, Hosts: []string{"a.com", "*.b.com"}, Priority: 2},
				{Index: 2, URIs: []string{"/p"}, Hosts: []string{"c.com:81"}, Priority: 1},
				{Index: 3, URIs: []string{"/p*"}, Hosts: []string{"*"}},
			},
			probes: []probe{
				{path: "/p", host: "A.com:9", want: 1},
				{path: "/p", host: "x.b.com", want: 1},
				{path: "/p", host: "b.com", want: 3},
				{path: "/p", host: "c.com:81", want: 2},
				{path: "/p", host: "c.com", want: 3},
				{path: "/px", host: "", want: 3},
			},
		},
		{
			name: "vars pick between routes on one path",
			routes: []Route{
				{Index: 1, URIs: []string{"/v"}, Vars: vars(t, `[["arg_name","==","json"],["http_x_env","~=","prod"]]`)},
				{Index: 2, URIs: []string{"/v"}, Vars: vars(t, `[["cookie_sid","~~","^[0-9]+$"]]`)},
				{Index: 3, URIs: []string{"/v"}, Vars: vars(t, `[["uri","==","/v"],["remote_addr","ipmatch","10.0.0.0/8"]]`)},
			},
			probes: []probe{
				{path: "/v", vars: map[string]string{"arg_name": "json"}, want: 1},
				{path: "/v", vars: map[string]string{"arg_name": "json", "http_x_env": "prod"}, want: -1},
				{path: "/v", vars: map[string]string{"cookie_sid": "123"}, want: 2},
				{path: "/v", vars: map[string]string{"cookie_sid": "12a"}, want: -1},
				{path: "/v", addr: "10.9.9.9", want: 3},
				{path: "/v", want: -1},
			},
		},
		{
			name: "a route with several uris and several hosts",
			routes: []Route{
				{Index: 1, URIs: []string{"/a", "/b/*"}, Hosts: []string{"x.com", "*.y.com"}},
			},
			probes: []probe{
				{path: "/a", host: "x.com", want: 1},
				{path: "/b/1", host: "q.y.com", want: 1},
				{path: "/a", host: "y.com", want: -1},
			},
		},
		{
			name:   "no routes",
			routes: nil,
			probes: []probe{{path: "/", want: -1}},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := mustBuild(t, tc.routes, tc.mode)
			got, want := matchAll(t, r, tc.probes)
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("matched indexes (-want +got):\n%s", diff)
			}
			if r.Len() != len(tc.routes) {
				t.Errorf("Len() = %d, want %d", r.Len(), len(tc.routes))
			}
		})
	}
}

func TestLongHost(t *testing.T) {
	long := make([]byte, maxHost+1)
	for i := range long {
		long[i] = 'a'
	}
	for _, mode := range []Mode{HostURI, URI} {
		r := mustBuild(t, []Route{
			{Index: 1, URIs: []string{"/"}, Hosts: []string{"*a"}},
			{Index: 2, URIs: []string{"/"}, Hosts: []string{"*"}},
			{Index: 3, URIs: []string{"/x"}},
		}, mode)
		var got []int
		for _, path := range []string{"/", "/x"} {
			i, ok := r.Match(&Request{Method: MethodGET, Path: []byte(path), Host: long})
			if !ok {
				i = -1
			}
			got = append(got, i)
		}
		if diff := cmp.Diff([]int{2, 3}, got); diff != "" {
			t.Errorf("mode %d: long host (-want +got):\n%s", mode, diff)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	tests := []struct {
		name   string
		routes []Route
		mode   Mode
		want   error
	}{
		{"no uri", []Route{{Index: 1}}, HostURI, ErrNoURI},
		{"bad mode", nil, Mode(9), ErrMode},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Build(tc.routes, tc.mode)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Build error = %v, want %v", err, tc.want)
			}
		})
	}
}

func TestParseMethods(t *testing.T) {
	got, err := ParseMethods([]string{"GET", "PURGE", "OPTIONS"})
	if err != nil {
		t.Fatal(err)
	}
	if want := MethodGET | MethodPURGE | MethodOPTIONS; got != want {
		t.Errorf("ParseMethods = %b, want %b", got, want)
	}
	if _, err := ParseMethods([]string{"GET", "get"}); !errors.Is(err, ErrMethod) {
		t.Errorf("ParseMethods(get) error = %v, want ErrMethod", err)
	}
	all := []string{"GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE"}
	seen := Method(0)
	for _, m := range all {
		b := ParseMethod([]byte(m))
		if b == 0 || seen&b != 0 {
			t.Errorf("ParseMethod(%s) = %b, not a new bit", m, b)
		}
		seen |= b
	}
}

// TestBuildTime guards against super-linear Build; the figure itself is in
// BenchmarkBuild5000Routes.
func TestBuildTime(t *testing.T) {
	routes := benchRoutes(5000, "mixed")
	start := time.Now()
	r := mustBuild(t, routes, HostURI)
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("Build(5000 routes) took %v", d)
	}
	for _, i := range []int{0, 2500, 4999} {
		p := fmt.Sprintf("/hello%d", i)
		if got, ok := r.Match(&Request{Method: MethodGET, Path: []byte(p)}); !ok || got != i {
			t.Errorf("Match(%s) = %d, %v; want %d", p, got, ok, i)
		}
	}
}

// TestInsertionOrderAtScale checks that routes equal in path, priority and
// path length match in the order they were given, as insert_tab_in_order
// keeps them, when the table is large and its candidates are interleaved:
// the build sorts all candidates at once, and an unstable sort keeps
// insertion order only for short runs.
func TestInsertionOrderAtScale(t *testing.T) {
	const paths, per = 50, 40
	var routes []Route
	for i := range paths * per {
		p := i % paths
		routes = append(routes,
			Route{Index: 2 * i, URIs: []string{fmt.Sprintf("/p%d", p)}},
			Route{Index: 2*i + 1, URIs: []string{fmt.Sprintf("/q%d/*", p)}})
	}
	for _, mode := range []Mode{HostURI, URI} {
		r := mustBuild(t, routes, mode)
		for p := range paths {
			// The first route given on each path is number p.
			if got, ok := r.Match(&Request{Method: MethodGET, Path: fmt.Appendf(nil, "/p%d", p)}); !ok || got != 2*p {
				t.Errorf("mode %d: /p%d matched %d, %v; want %d", mode, p, got, ok, 2*p)
			}
			if got, ok := r.Match(&Request{Method: MethodGET, Path: fmt.Appendf(nil, "/q%d/x", p)}); !ok || got != 2*p+1 {
				t.Errorf("mode %d: /q%d/x matched %d, %v; want %d", mode, p, got, ok, 2*p+1)
			}
		}
	}
}
