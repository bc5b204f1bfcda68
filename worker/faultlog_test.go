package worker

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"
)

// TestCloseFaultWords: an answer cut short by the worker's own stop (the
// drain's deadline: the engine closes what is left) is logged as that,
// not as the upstream's early close, which is what the same cut is when
// the upstream's FIN ends it.
func TestCloseFaultWords(t *testing.T) {
	for _, tc := range []struct {
		stopping bool
		want     string
	}{
		{true, "worker stopped before the upstream answered in full while reading upstream"},
		{false, "upstream prematurely closed connection while reading upstream"},
	} {
		var log bytes.Buffer
		h := newHarnessConfig(t, framingSpec(t), Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		h.roundTrip([]byte("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"), []byte("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nab"))
		if !strings.HasSuffix(string(h.cl.out), "\r\n\r\nab") {
			t.Fatalf("stopping %v: the answer did not start: %q", tc.stopping, h.cl.out)
		}
		h.w.stopping = tc.stopping
		if tc.stopping {
			_ = h.loop.Close(h.up)
		} else {
			h.loop.peerClosed(h.up)
		}
		if !h.cl.closed || !strings.Contains(log.String(), tc.want) {
			t.Fatalf("stopping %v: client closed %v, log:\n%s\nwant %q", tc.stopping, h.cl.closed, log.String(), tc.want)
		}
	}
}

// TestCodingToHTTP10: HTTP/1.0 has no Transfer-Encoding, so an upstream
// body in a coding other than chunked cannot reach an HTTP/1.0 client as
// what it is: the client gets 502 and the error log says why, as nginx
// (1.23 and later) answers an unknown coding. A chunked body reaches it
// decoded, and an HTTP/1.1 client gets the coded body with its codings.
func TestCodingToHTTP10(t *testing.T) {
	for _, tc := range []struct {
		req, te, body string
		status, log   string
	}{
		{"GET /a HTTP/1.0\r\n\r\n", "gzip", "xy", "HTTP/1.1 502 ", `upstream sent unknown \"Transfer-Encoding\" to an HTTP/1.0 request while reading response header from upstream`},
		{"GET /a HTTP/1.0\r\n\r\n", "gzip, chunked", "2\r\nxy\r\n0\r\n\r\n", "HTTP/1.1 502 ", `unknown \"Transfer-Encoding\"`},
		{"GET /a HTTP/1.0\r\n\r\n", "chunked", "2\r\nxy\r\n0\r\n\r\n", "HTTP/1.1 200 ", ""},
		{"HEAD /a HTTP/1.0\r\n\r\n", "gzip", "", "HTTP/1.1 200 ", ""},
		{"GET /a HTTP/1.1\r\nHost: x\r\n\r\n", "gzip", "xy", "HTTP/1.1 200 ", ""},
	} {
		var log bytes.Buffer
		h := newHarnessConfig(t, framingSpec(t), Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		_, got := h.roundTrip([]byte(tc.req), []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: "+tc.te+"\r\n\r\n"+tc.body))
		if !strings.HasPrefix(string(got), tc.status) || tc.log != "" && !strings.Contains(log.String(), tc.log) || tc.log == "" && log.Len() > 0 {
			t.Fatalf("%q answered with Transfer-Encoding %q: client got\n%q\nlog:\n%s", tc.req, tc.te, got, log.String())
		}
		if tc.status == "HTTP/1.1 200 " && strings.HasPrefix(tc.req, "GET /a HTTP/1.0") && !strings.HasSuffix(string(got), "\r\n\r\nxy") {
			t.Fatalf("chunked body to HTTP/1.0, not decoded: %q", got)
		}
	}
}

// TestFaultLogRequestLine: the error line's request is the client's
// request line, as nginx's request: "...", not the line sent upstream
// (which is always HTTP/1.1, and origin-form).
func TestFaultLogRequestLine(t *testing.T) {
	for _, tc := range []struct{ req, want string }{
		{"GET /a?x=1 HTTP/1.0\r\n\r\n", `request="GET /a?x=1 HTTP/1.0"`},
		{"GET http://x/a?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", `request="GET http://x/a?x=1 HTTP/1.1"`},
		{"GET /a?x=1 HTTP/1.1\r\nHost: x\r\n\r\n", `request="GET /a?x=1 HTTP/1.1"`},
	} {
		var log bytes.Buffer
		h := newHarnessConfig(t, framingSpec(t), Config{Logger: slog.New(slog.NewTextHandler(&log, nil))})
		// Content-Length beside Transfer-Encoding: a head that does not
		// parse, a 502 and an error line.
		_, got := h.roundTrip([]byte(tc.req), []byte("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nContent-Length: 2\r\n\r\nxy"))
		if !strings.HasPrefix(string(got), "HTTP/1.1 502 ") || !strings.Contains(log.String(), tc.want) {
			t.Errorf("%q: client got %q, log:\n%s\nwant %s", tc.req, got, log.String(), tc.want)
		}
	}
}
