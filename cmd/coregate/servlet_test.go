package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"
)

// rawRequest sends raw on a connection of its own, as it is (no client
// cleans its path), and reads the one answer; the answer's body is the
// echo upstream's account of the request when it got there.
func rawRequest(t testing.TB, g *gateway, raw string) (result, *bufio.Reader, net.Conn) {
	t.Helper()
	c := dialGateway(t, g)
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := newReader(c)
	return readOne(t, br, "GET"), br, c
}

// TestNormalizeURILikeServlet: apisix.normalize_uri_like_servlet, with
// /public/* open and /private/* behind key-auth in front of a servlet
// container, which drops a segment's ";" parameters before it resolves
// dot segments. Off, "/public/..;/private/x" takes the open route and
// reaches the upstream as sent, which the container serves as
// /private/x; on, it is answered 400 with the close, as APISIX answers
// it, parameters no longer take a path off the route that guards it, and
// a path that had to be normalised goes upstream as it was routed.
func TestNormalizeURILikeServlet(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	routes := standaloneYAML(map[string][]obj{
		"routes": {
			{"id": "public", "uri": "/public/*", "upstream": upstreamOf(nodes(up.Addr()), nil)},
			{"id": "private", "uri": "/private/*", "upstream": upstreamOf(nodes(up.Addr()), nil),
				"plugins": obj{"key-auth": obj{}}},
		},
		"consumers": {{"username": "jack", "plugins": obj{"key-auth": obj{"key": "jack-key"}}}},
	})
	config := func(on bool) func(port int) string {
		return func(port int) string {
			c := baseConfig(port, "")
			return strings.Replace(c, "apisix:\n", fmt.Sprintf("apisix:\n  normalize_uri_like_servlet: %v\n", on), 1)
		}
	}
	off := startGatewayConfig(t, routes, config(false))
	on := startGatewayConfig(t, routes, config(true))
	get := func(target, extra string) string {
		return "GET " + target + " HTTP/1.1\r\nHost: x\r\n" + extra + "\r\n"
	}
	const key = "apikey: jack-key\r\n"

	// Off: the bypass, through the open route.
	r, _, _ := rawRequest(t, off, get("/public/..;/private/x", ""))
	if e := upstreamSaw(t, r); e.URI != "/public/..;/private/x" {
		t.Errorf("off: upstream got %q", e.URI)
	}

	for _, tc := range []struct {
		target, extra string
		status        int
		sent          string // the target the upstream got
	}{
		{"/public/..;/private/x", "", 400, ""},
		{"/public/%2e%2e;/private/x", "", 400, ""},
		{"/public/.;x/private/x", "", 400, ""},
		{"/;x/private/x", "", 400, ""},
		{"/private;jsessionid=1/x", "", 401, ""},
		{"/private;x/", "", 401, ""},
		{"/private;jsessionid=1/x?q=1", key, 200, "/private;jsessionid=1/x?q=1"},
		// Normalised: sent as routed, so that the container cannot
		// resolve the ".." otherwise ("/public/./../private/x").
		{"/public/.;/../private/x", "", 200, "/public/private/x"},
		{"/private;a/%78%20y?q=1", key, 200, "/private;a/x%20y?q=1"},
		{"/public/a", "", 200, "/public/a"},
	} {
		r, br, c := rawRequest(t, on, get(tc.target, tc.extra))
		if r.status != tc.status {
			t.Errorf("on: %s: status %d, want %d (%s)", tc.target, r.status, tc.status, r.body)
			continue
		}
		switch tc.status {
		case 400:
			if !r.close {
				t.Errorf("on: %s: 400 without Connection: close", tc.target)
			}
			expectClosed(t, c, br, 2*time.Second)
		case 200:
			if e := upstreamSaw(t, r); e.URI != tc.sent {
				t.Errorf("on: %s: upstream got %q, want %q", tc.target, e.URI, tc.sent)
			}
		}
	}
}
