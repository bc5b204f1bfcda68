package worker

import (
	"fmt"
	"strings"
	"testing"
)

// TestExitBodylessStatus: a plugin's answer with a status whose framing
// has no body (204, 304) goes without one, whatever body the plugin gave
// or body_filter made, and without Content-Length, so that the next
// pipelined answer on the connection is not read as part of it.
func TestExitBodylessStatus(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/204","plugins":{"p-hi":{"exit_at":"access","exit":204,"body":"junk"}}}`,
		`{"id":"r2","uri":"/304","plugins":{"p-hi":{"exit_at":"access","exit":304,"body":"junk"}}}`,
		`{"id":"r3","uri":"/204f","plugins":{"p-body":{},"p-hi":{"exit_at":"access","exit":204,"body":""}}}`,
		`{"id":"r4","uri":"/ok","plugins":{"p-hi":{"exit_at":"access","exit":200,"body":"fine"}}}`,
	}, nil, nil, nil))
	for _, path := range []string{"/204", "/304", "/204f"} {
		_, got := h.roundTrip([]byte("GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
		first, rest, _ := strings.Cut(string(got), "\r\n\r\n")
		if !strings.HasPrefix(first, "HTTP/1.1 "+path[1:4]+" ") || strings.Contains(first, "Content-Length") {
			t.Fatalf("%s: head\n%q", path, got)
		}
		if !strings.HasPrefix(rest, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(rest, "\r\n\r\nfine") {
			t.Fatalf("%s: the next answer does not follow the head:\n%q", path, got)
		}
		if h.cl.closed {
			t.Fatalf("%s: connection closed", path)
		}
	}
}

// TestExitInterimStatus: a plugin's Exit with a 1xx status, an interim
// answer that cannot end a request (mocking's response_status allows
// 100), is answered 500 as an out-of-range status is, so that the client
// does not take the next pipelined answer for this request's.
func TestExitInterimStatus(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/100","plugins":{"p-hi":{"exit_at":"access","exit":100,"body":"junk"}}}`,
		`{"id":"r2","uri":"/103","plugins":{"p-hi":{"exit_at":"rewrite","exit":103}}}`,
		`{"id":"r4","uri":"/ok","plugins":{"p-hi":{"exit_at":"access","exit":200,"body":"fine"}}}`,
	}, nil, nil, nil))
	for _, tc := range []struct{ path, body string }{{"/100", "junk"}, {"/103", string(errorPages[500])}} {
		_, got := h.roundTrip([]byte("GET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\nGET /ok HTTP/1.1\r\nHost: x\r\n\r\n"), nil)
		first, rest, _ := strings.Cut(string(got), "HTTP/1.1 200 OK\r\n")
		if !strings.HasPrefix(first, "HTTP/1.1 500 ") || !strings.HasSuffix(first, "\r\n\r\n"+tc.body) ||
			!strings.Contains(first, "\r\nContent-Length: "+fmt.Sprint(len(tc.body))+"\r\n") {
			t.Fatalf("%s: first answer\n%q", tc.path, got)
		}
		if !strings.HasSuffix(rest, "\r\n\r\nfine") || h.cl.closed {
			t.Fatalf("%s: the next answer:\n%q", tc.path, got)
		}
	}
}

// TestBodyFilterPipelined: two requests sent at once on a kept-alive
// connection through a body-changing plugin get two answers, each framed
// by the worker (chunked) with its own body: a Content-Length answer, a
// chunked one with trailer fields (dropped, as the Trailer field that
// announced them), and one of Content-Length 0, each ending before the
// next begins.
func TestBodyFilterPipelined(t *testing.T) {
	h, _ := pluginHarness(t, pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil, nil))
	req := "GET /a HTTP/1.1\r\nHost: x\r\n\r\n"
	h.cl.in = append(h.cl.in, req+req+req...)
	h.w.OnTraffic(h.cl)
	for _, a := range []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok",
		"HTTP/1.1 200 OK\r\nTrailer: X-T\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	} {
		h.up.in = append(h.up.in, a...)
		h.w.OnTraffic(h.up)
	}
	got := strings.ReplaceAll(string(h.cl.out), string(h.w.dateLine), "")
	srv := string(h.w.server)
	want := "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + srv + "\r\n4\r\n[ok]\r\n1\r\n!\r\n0\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + srv + "\r\n5\r\n[abc]\r\n1\r\n!\r\n0\r\n\r\n" +
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n" + srv + "\r\n1\r\n!\r\n0\r\n\r\n"
	if got != want || h.cl.closed {
		t.Fatalf("answers (closed %v):\n%q\nwant\n%q", h.cl.closed, got, want)
	}
}

// TestBodyFilterBodyless: a body-changing plugin gives no body to an
// answer that has none by its framing (a HEAD's, a 204, a 304, whatever
// length it states), nor says chunked for it; the next pipelined answer
// follows its head.
func TestBodyFilterBodyless(t *testing.T) {
	for _, tc := range []struct{ method, up string }{
		{"HEAD", "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n"},
		{"HEAD", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"},
		{"GET", "HTTP/1.1 204 No Content\r\n\r\n"},
		{"GET", "HTTP/1.1 204 No Content\r\nContent-Length: 2\r\n\r\n"},
		{"GET", "HTTP/1.1 304 Not Modified\r\nContent-Length: 2\r\n\r\n"},
		{"GET", "HTTP/1.1 304 Not Modified\r\nTransfer-Encoding: chunked\r\n\r\n"},
	} {
		h, _ := pluginHarness(t, pluginSpec(t, []string{
			`{"id":"r1","uri":"/a","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		}, nil, nil, nil))
		h.cl.in = append(h.cl.in, tc.method+" /a HTTP/1.1\r\nHost: x\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n"...)
		h.w.OnTraffic(h.cl)
		h.up.in = append(h.up.in, tc.up...)
		h.w.OnTraffic(h.up)
		h.up.in = append(h.up.in, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"...)
		h.w.OnTraffic(h.up)
		first, rest, _ := strings.Cut(string(h.cl.out), "\r\n\r\n")
		if strings.Count(first, "chunked") > strings.Count(tc.up, "chunked") || !strings.HasPrefix(rest, "HTTP/1.1 200 OK\r\n") ||
			!strings.HasSuffix(rest, "\r\n\r\n4\r\n[ok]\r\n1\r\n!\r\n0\r\n\r\n") || h.cl.closed {
			t.Fatalf("%s, %q: answers\n%q", tc.method, tc.up, h.cl.out)
		}
	}
}

// TestBodyFilterHTTP10: to an HTTP/1.0 client the changed body of a
// chunked or Content-Length answer goes decoded, without Content-Length
// or Transfer-Encoding, delimited by the close.
func TestBodyFilterHTTP10(t *testing.T) {
	for _, up := range []string{
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\nX-T: 1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc",
		"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n",
	} {
		h, _ := pluginHarness(t, pluginSpec(t, []string{
			`{"id":"r1","uri":"/a","plugins":{"p-body":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		}, nil, nil, nil))
		_, got := h.roundTrip([]byte("GET /a HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n"), []byte(up))
		head, body, _ := strings.Cut(string(got), "\r\n\r\n")
		want := "[abc]!"
		if strings.Contains(up, "Length: 0") {
			want = "!"
		}
		if body != want || strings.Contains(head, "Content-Length") || strings.Contains(head, "Transfer-Encoding") ||
			!strings.Contains(head, "\r\nConnection: close") || !h.cl.closed {
			t.Fatalf("%q: answer (closed %v)\n%q", up, h.cl.closed, got)
		}
	}
}

// TestNoContentFraming: an upstream's 204 goes to the client without the
// Content-Length or Transfer-Encoding it came with (RFC 9110 §8.6, §6.1:
// a 204 has neither, as nginx sends it), the next answer after its head.
func TestNoContentFraming(t *testing.T) {
	for _, up := range []string{
		"HTTP/1.1 204 No Content\r\nContent-Length: 2\r\nX-A: 1\r\n\r\n",
		"HTTP/1.1 204 No Content\r\nTransfer-Encoding: chunked\r\nX-A: 1\r\n\r\n",
	} {
		h := newHarness(t, framingSpec(t))
		h.cl.in = append(h.cl.in, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /a HTTP/1.1\r\nHost: x\r\n\r\n"...)
		h.w.OnTraffic(h.cl)
		h.up.in = append(h.up.in, up...)
		h.w.OnTraffic(h.up)
		h.up.in = append(h.up.in, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"...)
		h.w.OnTraffic(h.up)
		first, rest, _ := strings.Cut(string(h.cl.out), "\r\n\r\n")
		if !strings.HasPrefix(first, "HTTP/1.1 204 No Content\r\n") || !strings.Contains(first, "\r\nX-A: 1") ||
			strings.Contains(first, "Content-Length") || strings.Contains(first, "Transfer-Encoding") ||
			!strings.HasPrefix(rest, "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(rest, "\r\n\r\nok") || h.cl.closed {
			t.Fatalf("%q: answers\n%q", up, h.cl.out)
		}
	}
}
