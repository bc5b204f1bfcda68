package worker

import (
	"bytes"
	"strings"
	"testing"

	"coregate/admin/spec"
)

func TestServletPath(t *testing.T) {
	tests := []struct {
		in, want string
		ok       bool
	}{
		{"/a/b", "/a/b", true},
		{"/hello;world", "/hello", true},
		{"/a;jsessionid=1/b", "/a/b", true},
		{"/a;x;y=1/b;z", "/a/b", true},
		{"/hello;a=b/world;a/;", "/hello/world/", true},
		// The trailing '/' stays, as the servlet keeps it.
		{"/a;x/", "/a/", true},
		{"/a;x/b/", "/a/b/", true},
		// An empty segment with parameters, last only.
		{"/a/;x", "/a/", true},
		{"/a/;x/", "/a/", true},
		{"/;x", "/", true},
		{"/;", "/", true},
		{"/;/a", "", false},
		{"/b/;/c", "", false},
		{"/a/;x/b/", "", false},
		// Dot segments behind parameters, decoded or not.
		{"/.;", "", false},
		{"/..;", "", false},
		{"/public/..;/private/x", "", false},
		{"/a/.;x/b", "", false},
		{"/a/..;x", "", false},
		{"/%2e;", "", false},
		{"/%2E%2E;", "", false},
		{"/%2E%2e;/x", "", false},
		{"/a/%2e%2e;x/b", "", false},
		// Dots that are not a segment of their own.
		{"/a/...;x", "/a/...", true},
		{"/a/.b;x", "/a/.b", true},
		{"/a/%2e%2e%2e;x", "/a/%2e%2e%2e", true},
		{"/a/%2f;x", "/a/%2f", true},
		{"*", "*", true},
	}
	var buf []byte
	for _, tc := range tests {
		got, nb, ok := servletPath([]byte(tc.in), buf)
		buf = nb
		if ok != tc.ok || ok && string(got) != tc.want {
			t.Errorf("servletPath(%q) = %q, %v; want %q, %v", tc.in, got, ok, tc.want, tc.ok)
		}
	}
	// A path without parameters is not copied.
	p := []byte("/a/b")
	if got, _, _ := servletPath(p, nil); &got[0] != &p[0] {
		t.Errorf("a path without ';' was copied")
	}
}

func TestAppendEscapedPath(t *testing.T) {
	var all []byte
	for c := range 256 {
		all = append(all, byte(c))
	}
	got := appendEscapedPath([]byte("x"), all)
	kept := "!$&'()*+,-./0123456789:;=@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]_abcdefghijklmnopqrstuvwxyz~"
	var want strings.Builder
	want.WriteByte('x')
	for _, c := range all {
		if strings.IndexByte(kept, c) >= 0 {
			want.WriteByte(c)
		} else {
			want.WriteString("%" + strings.ToUpper(string("0123456789abcdef"[c>>4])+string("0123456789abcdef"[c&15])))
		}
	}
	if string(got) != want.String() {
		t.Errorf("appendEscapedPath:\n got %q\nwant %q", got, want.String())
	}
	// Decoded once, the escaped path is the path again.
	p := []byte("/a b/%2e%2e;x/?#\x01\xff\"<>\\^`{|}")
	dec, _, ok := normalizePath(appendEscapedPath(nil, p), nil)
	if !ok || !bytes.Equal(dec, p) {
		t.Errorf("decoded %q, %v; want %q", dec, ok, p)
	}
}

// servletSpec is one route, /private/*, to one node.
func servletSpec(t testing.TB) *spec.Spec {
	t.Helper()
	r, err := spec.DecodeRoute([]byte(`{"id":"private","uri":"/private/*","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{Routes: []*spec.Route{r}}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestServletRouting: with Config.NormalizeURILikeServlet, a route
// matches the path without its parameters, a path whose parameters hide a
// dot segment is answered 400 with the close, and the upstream gets the
// target as received, or the path as routed, parameters kept, when it had
// to be normalised. Off, the parameters are part of the path.
func TestServletRouting(t *testing.T) {
	const ok200 = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	tests := []struct {
		target string
		status string // the answer's status line
		sent   string // the target the upstream got; "" for none
	}{
		{"/private/x", "200", "/private/x"},
		{"/private;jsessionid=1/x", "200", "/private;jsessionid=1/x"},
		{"/private/a;x/b?q=1", "200", "/private/a;x/b?q=1"},
		{"/private;x/", "200", "/private;x/"},
		{"/private/x/.;/../y?q=1", "200", "/private/x/y?q=1"},
		{"/x;a/../private/y", "200", "/private/y"},
		{"/priv%61te;a/x%3Fy%20z?q=1", "200", "/private;a/x%3Fy%20z?q=1"},
		{"/private/%2541;x", "200", "/private/%2541;x"},
		{"/private", "404", ""},
		{"/private;x", "404", ""},
		{"/public/..;/private/x", "400", ""},
		{"/public/%2e%2e;/private/x", "400", ""},
		{"/private/%252e%252e;/x", "400", ""},
		{"/;x/private/y", "400", ""},
		{"/private/.;x/y", "400", ""},
	}
	h := newHarnessConfig(t, servletSpec(t), Config{NormalizeURILikeServlet: true})
	for _, tc := range tests {
		h.cl = h.newClient()
		req := "GET " + tc.target + " HTTP/1.1\r\nHost: example.com\r\n\r\n"
		var resp []byte
		if tc.sent != "" {
			resp = []byte(ok200)
		}
		up, got := h.roundTrip([]byte(req), resp)
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 "+tc.status+" ")) {
			t.Errorf("%s: answer %q, want %s", tc.target, got, tc.status)
			continue
		}
		if tc.status == "400" && !bytes.Contains(got, []byte("\r\nConnection: close\r\n")) {
			t.Errorf("%s: 400 without Connection: close: %q", tc.target, got)
		}
		wantUp := ""
		if tc.sent != "" {
			wantUp = "GET " + tc.sent + " HTTP/1.1\r\n"
		}
		if line, _, _ := bytes.Cut(up, []byte("\r\n")); len(up) > 0 {
			up = append(line, "\r\n"...)
		}
		if string(up) != wantUp {
			t.Errorf("%s: upstream got %q, want %q", tc.target, up, wantUp)
		}
	}

	// Off, the parameters are part of the path and nothing is refused.
	off := newHarnessConfig(t, servletSpec(t), Config{})
	for _, target := range []string{"/private;jsessionid=1/x", "/public/..;/private/x"} {
		off.cl = off.newClient()
		_, got := off.roundTrip([]byte("GET "+target+" HTTP/1.1\r\nHost: example.com\r\n\r\n"), nil)
		if !bytes.HasPrefix(got, []byte("HTTP/1.1 404 ")) {
			t.Errorf("off: %s: answer %q, want 404", target, got)
		}
	}
}
