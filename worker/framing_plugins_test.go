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
