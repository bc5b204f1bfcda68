//go:build !race

package worker

import (
	"bytes"
	"testing"
)

// TestAllocAPIBreaker: requests through a route with api-breaker, the
// upstream answering 500 (counted) or 200, and then the open breaker's
// answer, allocate nothing once the pair is tracked.
func TestAllocAPIBreaker(t *testing.T) {
	h := realHarness(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"api-breaker":{"break_response_code":502,"break_response_body":"open",` +
			`"break_response_headers":[{"key":"X-Client","value":"$remote_addr"}],"unhealthy":{"failures":1000000}}},` +
			`"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"api-breaker":{"break_response_code":502,"break_response_body":"open","unhealthy":{"failures":1}}},` +
			`"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	}, nil, nil)
	const up500 = "HTTP/1.1 500 Internal Server Error\r\nContent-Length: 2\r\n\r\nno"
	reqA := []byte("GET /a HTTP/1.1\r\nHost: h\r\n\r\n")
	for _, resp := range []string{up500, upOK} {
		h.roundTrip(reqA, []byte(resp))
		if allocs := testing.AllocsPerRun(200, func() { h.roundTrip(reqA, []byte(resp)) }); allocs != 0 {
			t.Errorf("/a, upstream %.12q: %.1f allocations per request, want 0", resp, allocs)
		}
	}
	reqB := []byte("GET /b HTTP/1.1\r\nHost: h\r\n\r\n")
	if _, got := h.roundTrip(reqB, []byte(up500)); !bytes.HasPrefix(got, []byte("HTTP/1.1 500 ")) {
		t.Fatalf("/b, the failure: %s", got)
	}
	if _, got := h.roundTrip(reqB, nil); !bytes.HasPrefix(got, []byte("HTTP/1.1 502 ")) || !bytes.HasSuffix(got, []byte("\r\n\r\nopen")) {
		t.Fatalf("/b, the open breaker: %s", got)
	}
	if allocs := testing.AllocsPerRun(200, func() { h.roundTrip(reqB, nil) }); allocs != 0 {
		t.Errorf("/b, the open breaker: %.1f allocations per request, want 0", allocs)
	}
}
