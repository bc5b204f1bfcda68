package worker

import (
	"bytes"
	"fmt"
	"testing"

	"coregate/admin/spec"
)

// helloSpec is n routes /hello, /hello1 ... /hello{n-1} to one node.
func helloSpec(t testing.TB, n int) *spec.Spec {
	t.Helper()
	u, err := spec.DecodeUpstream([]byte(`{"id":"1","nodes":{"127.0.0.1:1980":1}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{Upstreams: []*spec.Upstream{u}}
	for i := 0; i < n; i++ {
		uri := "/hello"
		if i > 0 {
			uri = fmt.Sprintf("/hello%d", i)
		}
		r, err := spec.DecodeRoute([]byte(fmt.Sprintf(`{"id":"%d","uri":"%s","upstream_id":"1"}`, i+1, uri)))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, r)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

// BenchmarkRequestPath is the worker's own CPU per proxied request (no
// syscalls: connections are in memory).
func BenchmarkRequestPath(b *testing.B) {
	for _, n := range []int{1, 100, 5000} {
		b.Run(fmt.Sprintf("routes=%d", n), func(b *testing.B) {
			h := newHarness(b, helloSpec(b, n))
			// The in-memory upstream connection serves every request.
			for _, rt := range h.w.snap.Load().routes.flat() {
				rt.up.kaRequests = 0
			}
			req := []byte("GET /hello HTTP/1.1\r\nHost: 127.0.0.1:9080\r\nUser-Agent: wrk\r\nAccept: */*\r\n\r\n")
			resp := append([]byte("HTTP/1.1 200 OK\r\nServer: nginx\r\nDate: Sun, 29 Nov 2026 20:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\nConnection: keep-alive\r\n\r\n"), bytes.Repeat([]byte("1234567890"), 103)[:1024]...)
			b.ReportAllocs()
			b.SetBytes(int64(len(req) + len(resp)))
			for i := 0; i < b.N; i++ {
				h.roundTrip(req, resp)
			}
		})
	}
}
