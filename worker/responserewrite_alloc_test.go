//go:build !race

package worker

import (
	"bytes"
	"strings"
	"testing"
)

// TestAllocResponseRewrite guards a proxied request through
// response-rewrite as the bench row configures it (a header set, a literal
// filter over the body, re-framed chunked), through its headers alone
// (the body forwarded as it came), and a HEAD through the filter (no
// Content-Length): none allocates once the buffers have grown.
func TestAllocResponseRewrite(t *testing.T) {
	const pool = `"upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":320,"idle_timeout":60,"requests":2000000000}}`
	h := realHarness(t, []string{
		`{"id":"row","uri":"/row","plugins":{"response-rewrite":{"headers":{"set":{"X-Server-Id":"3"}},"filters":[{"regex":"5678","replace":"abcd","scope":"global"}]}},` + pool + `}`,
		`{"id":"headers","uri":"/headers","plugins":{"response-rewrite":{"headers":{"set":{"X-Server-Id":"3"}}}},` + pool + `}`,
	}, nil, nil)
	body := bytes.Repeat([]byte("1234567890"), 103)[:1024]
	head := "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"
	resp := append([]byte(head), body...)
	for _, tc := range []struct {
		req, resp []byte
		want      string
		length    bool // Content-Length said
	}{
		{[]byte("GET /row HTTP/1.1\r\nHost: x\r\n\r\n"), resp, "\r\n\r\n400\r\n" + strings.ReplaceAll(string(body), "5678", "abcd") + "\r\n0\r\n\r\n", false},
		{[]byte("GET /headers HTTP/1.1\r\nHost: x\r\n\r\n"), resp, "\r\nContent-Length: 1024\r\n", true},
		{[]byte("HEAD /row HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(head), "\r\nX-Server-Id: 3\r\n", false},
	} {
		for range 10 {
			h.roundTrip(tc.req, tc.resp)
		}
		if _, got := h.roundTrip(tc.req, tc.resp); !strings.Contains(string(got), tc.want) ||
			strings.Contains(string(got), "Content-Length") != tc.length {
			t.Fatalf("%q: answer\n%q", tc.req, got)
		}
		if n := testing.AllocsPerRun(200, func() { h.roundTrip(tc.req, tc.resp) }); n != 0 {
			t.Errorf("%q: %.1f allocations per request", tc.req, n)
		}
	}
}
