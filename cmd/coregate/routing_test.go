package main

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

const notFound = `{"error_msg":"404 Route Not Found"}` + "\n"

// TestRouting runs APISIX's radixtree_host_uri matching rules through the
// binary. Every route sends to the same origin with pass_host rewrite, the
// upstream_host naming the route, and the origin answers the Host it got:
// the answer names the route that matched.
func TestRouting(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte(r.Host))
	})
	to := func(name string) obj {
		return upstreamOf(nodes(up.Addr()), obj{"pass_host": "rewrite", "upstream_host": name})
	}
	rt := func(id, uri string, extra obj) obj {
		r := obj{"id": id, "uri": uri, "upstream": to(id)}
		for k, v := range extra {
			r[k] = v
		}
		return r
	}
	routes := []obj{
		rt("exact-foo", "/foo", nil),
		rt("foo-slash-star", "/foo/*", nil),
		rt("bar-slash-star", "/bar/*", nil),
		rt("baz-star", "/baz*", nil),
		rt("api", "/api/*", nil),
		rt("api-v1", "/api/v1/*", nil),
		rt("prio-low", "/prio", obj{"priority": 0}),
		rt("prio-high", "/prio", obj{"priority": 5}),
		rt("prio-top-post", "/prio", obj{"priority": 9, "methods": []string{"POST"}}),
		rt("host-a", "/h", obj{"hosts": []string{"a.example.com"}}),
		rt("host-wild", "/h", obj{"hosts": []string{"*.example.com"}}),
		rt("host-none", "/h", obj{"priority": 100}),
		rt("m-post", "/m", obj{"methods": []string{"POST"}}),
		rt("m-get", "/m", obj{"methods": []string{"GET", "HEAD"}}),
		rt("ra-ten", "/ra", obj{"remote_addrs": []string{"10.0.0.0/8"}, "priority": 10}),
		rt("ra-two", "/ra", obj{"remote_addrs": []string{"127.0.0.2"}}),
		rt("ra-lo", "/ra", obj{"remote_addrs": []string{"127.0.0.0/24"}, "priority": -1}),
		rt("v-has", "/v", obj{"priority": 100, "vars": []any{[]any{"arg_k", "has", "x"}}}),
		rt("v-eq", "/v", obj{"priority": 9, "vars": []any{[]any{"arg_k", "==", "eq"}}}),
		rt("v-ne", "/v", obj{"priority": 8, "vars": []any{[]any{"http_x_t", "~=", "a"}, []any{"arg_k", "==", "ne"}}}),
		rt("v-gt", "/v", obj{"priority": 7, "vars": []any{[]any{"arg_n", ">", 10}}}),
		rt("v-lt", "/v", obj{"priority": 6, "vars": []any{[]any{"arg_n", "<", 5}}}),
		rt("v-re", "/v", obj{"priority": 5, "vars": []any{[]any{"http_user_agent", "~~", "^curl/[0-9]"}}}),
		rt("v-in", "/v", obj{"priority": 4, "vars": []any{[]any{"arg_c", "in", []string{"red", "green"}}}}),
		rt("v-host", "/vh", obj{"vars": []any{[]any{"host", "==", "mixed.example.com"}}}),
		rt("off", "/off", obj{"status": 0}),
		rt("off2-disabled", "/off2", obj{"status": 0, "priority": 10}),
		rt("off2-on", "/off2", obj{"status": 1}),
		{"id": "by-upstream-id", "uri": "/uid", "upstream_id": "u1"},
		{"id": "by-service", "uri": "/svc", "service_id": "s1"},
		{"id": "by-service-upstream-id", "uri": "/svc2", "service_id": "s2"},
		{"id": "by-service-own-upstream", "uri": "/svc3", "service_id": "s2", "upstream": to("own-upstream")},
		rt("uris", "/never", nil),
	}
	routes[len(routes)-1]["uris"] = []string{"/u1", "/u2/*"}
	delete(routes[len(routes)-1], "uri")
	g := startGateway(t, standaloneYAML(map[string][]obj{
		"routes":    routes,
		"upstreams": {{"id": "u1", "nodes": nodes(up.Addr()), "type": "roundrobin", "pass_host": "rewrite", "upstream_host": "upstream-u1"}},
		"services": {
			{"id": "s1", "hosts": []string{"svc.example.com"}, "upstream": to("service-s1")},
			{"id": "s2", "upstream_id": "u1"},
		},
	}), "")

	type req struct {
		method, path, host string
		hdr                map[string]string
	}
	tests := []struct {
		name string
		req  req
		want string // the route, or "404"
	}{
		{"exact", req{path: "/foo"}, "exact-foo"},
		{"exact beats prefix", req{path: "/foo"}, "exact-foo"},
		{"slash-star prefix", req{path: "/foo/x/y"}, "foo-slash-star"},
		{"slash-star matches trailing slash", req{path: "/bar/"}, "bar-slash-star"},
		{"slash-star does not match bare", req{path: "/bar"}, "404"},
		{"star matches bare", req{path: "/baz"}, "baz-star"},
		{"star matches longer word", req{path: "/bazooka"}, "baz-star"},
		{"star matches subpath", req{path: "/baz/x"}, "baz-star"},
		{"query is not part of the path", req{path: "/foo?a=/bar"}, "exact-foo"},
		{"longest prefix", req{path: "/api/v1/users"}, "api-v1"},
		{"shorter prefix", req{path: "/api/v2/users"}, "api"},
		{"priority", req{path: "/prio"}, "prio-high"},
		{"priority with method", req{method: "POST", path: "/prio"}, "prio-top-post"},
		{"exact host", req{path: "/h", host: "a.example.com"}, "host-a"},
		{"host with port", req{path: "/h", host: "a.example.com:9080"}, "host-a"},
		{"host case-insensitive", req{path: "/h", host: "A.Example.COM"}, "host-a"},
		{"vars host is lower-case", req{path: "/vh", host: "Mixed.Example.com:8080"}, "v-host"},
		{"wildcard host", req{path: "/h", host: "b.example.com"}, "host-wild"},
		{"wildcard deeper", req{path: "/h", host: "x.b.example.com"}, "host-wild"},
		{"wildcard not bare domain", req{path: "/h", host: "example.com"}, "host-none"},
		{"host-less fallback", req{path: "/h", host: "c.other.com"}, "host-none"},
		{"method post", req{method: "POST", path: "/m"}, "m-post"},
		{"method get", req{path: "/m"}, "m-get"},
		{"method head", req{method: "HEAD", path: "/m"}, "m-get"},
		{"method not allowed", req{method: "PUT", path: "/m"}, "404"},
		{"remote_addr cidr", req{path: "/ra"}, "ra-lo"},
		{"vars ==", req{path: "/v?k=eq"}, "v-eq"},
		{"vars ~=", req{path: "/v?k=ne", hdr: map[string]string{"X-T": "b"}}, "v-ne"},
		{"vars ~= fails", req{path: "/v?k=ne", hdr: map[string]string{"X-T": "a"}}, "404"},
		{"vars ~= absent header", req{path: "/v?k=ne"}, "v-ne"},
		{"vars >", req{path: "/v?n=11"}, "v-gt"},
		{"vars > boundary", req{path: "/v?n=10"}, "404"},
		{"vars <", req{path: "/v?n=4"}, "v-lt"},
		{"vars ~~", req{path: "/v", hdr: map[string]string{"User-Agent": "curl/8.5"}}, "v-re"},
		{"vars ~~ fails", req{path: "/v", hdr: map[string]string{"User-Agent": "wget/1"}}, "404"},
		{"vars in", req{path: "/v?c=green"}, "v-in"},
		{"vars in fails", req{path: "/v?c=blue"}, "404"},
		{"vars has never on strings", req{path: "/v?k=x"}, "404"},
		{"status 0 skipped", req{path: "/off"}, "404"},
		{"status 0 skipped, next wins", req{path: "/off2"}, "off2-on"},
		{"upstream_id", req{path: "/uid"}, "upstream-u1"},
		{"service hosts and upstream", req{path: "/svc", host: "svc.example.com"}, "service-s1"},
		{"service hosts inherited", req{path: "/svc", host: "other.example.com"}, "404"},
		{"service upstream_id", req{path: "/svc2"}, "upstream-u1"},
		{"route upstream beats service", req{path: "/svc3"}, "own-upstream"},
		{"uris exact", req{path: "/u1"}, "uris"},
		{"uris prefix", req{path: "/u2/a"}, "uris"},
		{"no match", req{path: "/nothing"}, "404"},
		{"dot segments normalised", req{path: "/api/x/../v1/z"}, "api-v1"},
		{"percent-decoded", req{path: "/f%6Fo"}, "exact-foo"},
	}
	c := newClient(t)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m := tc.req.method
			if m == "" {
				m = "GET"
			}
			r := do(t, c, m, g.url(tc.req.path), tc.req.host, tc.req.hdr, nil)
			got := r.body
			if r.status == 404 {
				if m != "HEAD" && r.body != notFound {
					t.Errorf("404 body = %q, want %q", r.body, notFound)
				}
				got = "404"
			} else if r.status != 200 {
				t.Fatalf("status %d, body %q", r.status, r.body)
			}
			if m == "HEAD" {
				// No body to name the route: the origin saw it.
				got = tc.want
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("route (-want +got):\n%s", diff)
			}
		})
	}

	// From another loopback source address, 127.0.0.2.
	t.Run("remote_addr exact", func(t *testing.T) {
		tr := &http.Transport{DialContext: (&net.Dialer{
			LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)},
			Timeout:   time.Second,
		}).DialContext}
		defer tr.CloseIdleConnections()
		c2 := &http.Client{Transport: tr, Timeout: 5 * time.Second}
		r := do(t, c2, "GET", g.url("/ra"), "", nil, nil)
		if diff := cmp.Diff(result{status: 200, body: "ra-two"}, result{status: r.status, body: r.body}, cmp.AllowUnexported(result{})); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestNotFoundAnswer checks the exact 404 APISIX sends for an unmatched
// request, and that the connection stays usable after it.
func TestNotFoundAnswer(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/ok", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	_, _ = c.Write([]byte("GET /nope HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n"))
	br := newReader(c)
	r := readOne(t, br, "GET")
	if r.status != 404 || r.body != notFound {
		t.Fatalf("got %d %q", r.status, r.body)
	}
	if got := r.header.Get("Server"); got != "APISIX/3.18.0" {
		t.Errorf("Server = %q", got)
	}
	r = readOne(t, br, "GET")
	if r.status != 200 || r.body != "ok" {
		t.Fatalf("after 404: %d %q", r.status, r.body)
	}
}
