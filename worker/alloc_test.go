//go:build !race

package worker

import (
	"bytes"
	"testing"
	"time"
)

// TestAllocRequestPath guards the whole request path of a worker: parse,
// route, upstream head, kept-alive upstream, response parse and forward.
func TestAllocRequestPath(t *testing.T) {
	h := newHarness(t, helloSpec(t, 100))
	req := []byte("GET /hello HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n")
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"), bytes.Repeat([]byte("x"), 1024)...)
	for i := 0; i < 10; i++ {
		h.roundTrip(req, resp)
	}
	_, got := h.roundTrip(req, resp)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || !bytes.HasSuffix(got, resp[len(resp)-1024:]) {
		t.Fatalf("unexpected answer:\n%s", got)
	}
	allocs := testing.AllocsPerRun(200, func() { h.roundTrip(req, resp) })
	if allocs != 0 {
		t.Fatalf("request path allocates %.1f times per request, want 0", allocs)
	}
	// Bodies both ways, re-framed by the gateway: a chunked request with
	// extensions and a trailer, a chunked response.
	post := []byte("POST /hello HTTP/1.1\r\nHost: example.com\r\nTransfer-Encoding: chunked\r\n\r\n" +
		"5;a=b\r\nhello\r\n6\r\n world\r\n0\r\nX-T: 1\r\n\r\n")
	chunked := []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x\r\nabcd\r\n0\r\n\r\n")
	for i := 0; i < 10; i++ {
		h.roundTrip(post, chunked)
	}
	up, got := h.roundTrip(post, chunked)
	if !bytes.HasSuffix(up, []byte("\r\n\r\nb\r\nhello world\r\n0\r\n\r\n")) || !bytes.HasSuffix(got, []byte("\r\n\r\n4\r\nabcd\r\n0\r\n\r\n")) {
		t.Fatalf("unexpected exchange:\n%s\n%s", up, got)
	}
	allocs = testing.AllocsPerRun(200, func() { h.roundTrip(post, chunked) })
	if allocs != 0 {
		t.Fatalf("chunked request path allocates %.1f times per request, want 0", allocs)
	}
	// No route: answered by the worker itself.
	nf := []byte("GET /nope HTTP/1.1\r\nHost: example.com\r\n\r\n")
	h.roundTrip(nf, nil)
	allocs = testing.AllocsPerRun(200, func() { h.roundTrip(nf, nil) })
	if allocs != 0 {
		t.Fatalf("404 path allocates %.1f times per request, want 0", allocs)
	}
}

// TestAllocDropUnderscores guards the request path with
// underscores_in_headers off: the fields with "_" are dropped in place.
func TestAllocDropUnderscores(t *testing.T) {
	h := newHarnessConfig(t, helloSpec(t, 100), Config{DropUnderscores: true})
	req := []byte("GET /hello HTTP/1.1\r\nHost: example.com\r\nX_Under: 1\r\nAccept: */*\r\n\r\n")
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	for i := 0; i < 10; i++ {
		h.roundTrip(req, resp)
	}
	up, got := h.roundTrip(req, resp)
	if !bytes.HasPrefix(got, []byte("HTTP/1.1 200 OK\r\n")) || bytes.Contains(up, []byte("X_Under")) || !bytes.Contains(up, []byte("\r\nAccept: */*\r\n")) {
		t.Fatalf("unexpected exchange:\n%s\n%s", up, got)
	}
	if allocs := testing.AllocsPerRun(200, func() { h.roundTrip(req, resp) }); allocs != 0 {
		t.Fatalf("request path with underscores_in_headers off allocates %.1f times per request, want 0", allocs)
	}
}

// TestAllocPluginPhases guards the request path through the plugin phases:
// global rules and a route's plugins in every phase, upstream request
// edits, response headers (set, removed, and read in header_filter), a
// status set in header_filter, a consumer attached and its merged plugins, a
// plugin's answer, one after a delay, bodies through body_filter, and the
// response head and body kept and read in log (ResponseHeaderAt,
// ResponseBody), and a variable a plugin set (SetVar).
func TestAllocPluginPhases(t *testing.T) {
	h, rec := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-auth":{},"p-hi":{"read_fields":true,"client_addr":"10.1.2.3:5678","up_uri":"/b?x=1","up_method":"PUT","up_host":"h.example",` +
			`"req_set":{"User-Agent":"edited"},"req_add":["X-Add=1"],"req_del":["Accept"],"resp_header":{"X-Hi":"1"},"set_vars":{"opentelemetry_trace_id":"4bf9"}},` +
			`"p-lo":{"hf_header":{"X-Lo":"2"},"hf_read":["Content-Type","X-Hi"],"hf_remove":["X-Gone"],"hf_status":201,"resp_fields":true,"resp_body":2048}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/exit","plugins":{"p-hi":{"exit_at":"access","exit":403,"body":"no"},"p-lo":{"resp_fields":true,"resp_body":16}}}`,
		`{"id":"r3","uri":"/late","plugins":{"p-hi":{"exit_at":"access","exit":200,"body":"late","delay_ms":100}}}`,
		`{"id":"r4","uri":"/body","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r5","uri":"/body-exit","plugins":{"p-body":{},"p-hi":{"exit_at":"access","exit":403,"body":"no"}}}`,
		`{"id":"r6","uri":"/hold","plugins":{"p-hi":{"hold_ms":100,"keep":5,"log_kept":true}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, []string{`{"id":"g","plugins":{"p-mid":{"resp_header":{"X-G":"g"}}}}`},
		[]string{`{"username":"jack","plugins":{"p-auth":{"key":"k1"},"p-lo":{"hf_header":{"X-Lo":"jack"}}}}`}, nil))
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"), bytes.Repeat([]byte("x"), 1024)...)
	for _, tc := range []struct {
		name, req, want string
		resp            []byte
	}{
		{"proxied", "GET /a HTTP/1.1\r\nHost: example.com\r\nUser-Agent: bench\r\nAccept: */*\r\n\r\n", "\r\nX-Lo: 2\r\n", resp},
		{"consumer", "GET /a HTTP/1.1\r\nHost: example.com\r\nk: k1\r\n\r\n", "\r\nX-Lo: jack\r\n", resp},
		{"exit", "GET /exit HTTP/1.1\r\nHost: example.com\r\n\r\n", "\r\n\r\nno", nil},
		{"body_filter", "GET /body HTTP/1.1\r\nHost: example.com\r\n\r\n", "]\r\n1\r\n!\r\n0\r\n\r\n", resp},
		{"body_filter exit", "GET /body-exit HTTP/1.1\r\nHost: example.com\r\n\r\n", "\r\n\r\n[no]!", nil},
	} {
		run := func() []byte {
			rec.reset()
			_, got := h.roundTrip([]byte(tc.req), tc.resp)
			return got
		}
		for i := 0; i < 10; i++ {
			run()
		}
		if got := run(); !bytes.Contains(got, []byte(tc.want)) {
			t.Fatalf("%s: answer\n%s", tc.name, got)
		}
		req := []byte(tc.req)
		if allocs := testing.AllocsPerRun(200, func() { rec.reset(); h.roundTrip(req, tc.resp) }); allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", tc.name, allocs)
		}
	}
	late := []byte("GET /late HTTP/1.1\r\nHost: example.com\r\n\r\n")
	delayed := func() {
		rec.reset()
		h.roundTrip(late, nil)
		h.w.now += int64(100 * time.Millisecond)
		h.w.expireDeadlines()
	}
	for i := 0; i < 10; i++ {
		delayed()
	}
	if !bytes.HasSuffix(h.cl.out, []byte("\r\n\r\nlate")) {
		t.Fatalf("delayed: answer\n%s", h.cl.out)
	}
	if allocs := testing.AllocsPerRun(200, delayed); allocs != 0 {
		t.Errorf("delayed: %.1f allocations per request, want 0", allocs)
	}

	// A request held back (Delay) before it goes upstream, with a value
	// kept from access to log (Keep).
	hold := []byte("GET /hold HTTP/1.1\r\nHost: example.com\r\nK-Keep: 1\r\n\r\n")
	held := func() {
		rec.reset()
		h.roundTrip(hold, nil)
		h.w.now += int64(100 * time.Millisecond)
		h.w.expireDeadlines()
		h.up.in = append(h.up.in, resp...)
		h.w.OnTraffic(h.up)
	}
	for i := 0; i < 10; i++ {
		held()
	}
	if !bytes.HasSuffix(h.cl.out, bytes.Repeat([]byte("x"), 1024)) {
		t.Fatalf("held: answer\n%s", h.cl.out)
	}
	if allocs := testing.AllocsPerRun(200, held); allocs != 0 {
		t.Errorf("held: %.1f allocations per request, want 0", allocs)
	}
}

// TestAllocServletPath guards the request path with
// NormalizeURILikeServlet on, for a path with parameters that had to be
// normalised: its parameters removed for routing, and the target rebuilt
// for the upstream.
func TestAllocServletPath(t *testing.T) {
	h := newHarnessConfig(t, servletSpec(t), Config{NormalizeURILikeServlet: true})
	req := []byte("GET /private;a=1/x/.;/../y%20z?q=1 HTTP/1.1\r\nHost: example.com\r\n\r\n")
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
	for i := 0; i < 10; i++ {
		h.roundTrip(req, resp)
	}
	up, got := h.roundTrip(req, resp)
	if !bytes.HasPrefix(up, []byte("GET /private;a=1/x/y%20z?q=1 HTTP/1.1\r\n")) || !bytes.HasSuffix(got, []byte("\r\n\r\nok")) {
		t.Fatalf("unexpected exchange:\n%s\n%s", up, got)
	}
	if allocs := testing.AllocsPerRun(200, func() { h.roundTrip(req, resp) }); allocs != 0 {
		t.Fatalf("request path with servlet paths allocates %.1f times per request, want 0", allocs)
	}
}
