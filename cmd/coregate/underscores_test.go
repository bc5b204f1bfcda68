package main

import (
	"net/http"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestUnderscoresInHeaders: with APISIX's default (on) a client's fields
// with "_" in their names reach the upstream and a route's vars; with
// nginx_config.http.underscores_in_headers off they are dropped as nginx
// drops them: the upstream gets the other fields only, and a route whose
// vars ask for one does not match.
func TestUnderscoresInHeaders(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(req *http.Request, _ []byte, _ int) (string, bool) {
			var names []string
			for k := range req.Header {
				names = append(names, strings.ToLower(k))
			}
			sort.Strings(names)
			return okResponse(strings.Join(names, ",")), true
		})
	})
	routes := routesYAML(
		obj{"id": "v", "uri": "/v", "vars": [][]string{{"http_x_v", "==", "1"}}, "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "a", "uri": "/a", "upstream": upstreamOf(nodes(up.Addr()), nil)},
	)
	for _, tc := range []struct {
		name, extra, names, v string
	}{
		{"on", "", "x-dash,x-forwarded-for,x-forwarded-host,x-forwarded-port,x-forwarded-proto,x-real-ip,x_under", "HTTP/1.1 200 "},
		{"off", "  http:\n    underscores_in_headers: \"off\"\n", "x-dash,x-forwarded-for,x-forwarded-host,x-forwarded-port,x-forwarded-proto,x-real-ip", "HTTP/1.1 404 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGateway(t, routes, tc.extra)
			out := rawExchange(t, g.Addr(), "GET /a HTTP/1.1\r\nHost: x\r\nX_Under: 1\r\nX-Dash: 2\r\nConnection: close\r\n\r\n", 5*time.Second)
			if !strings.HasPrefix(out, "HTTP/1.1 200 ") || !strings.HasSuffix(out, "\r\n\r\n"+tc.names) {
				t.Errorf("%q: GET /a answered %q, want the upstream to see %s", tc.name, out, tc.names)
			}
			out = rawExchange(t, g.Addr(), "GET /v HTTP/1.1\r\nHost: x\r\nX_V: 1\r\nConnection: close\r\n\r\n", 5*time.Second)
			if !strings.HasPrefix(out, tc.v) {
				t.Errorf("%q: GET /v with X_V: 1 answered %q, want %s", tc.name, out, tc.v)
			}
		})
	}
}
