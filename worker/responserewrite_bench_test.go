package worker

import (
	"bytes"
	"testing"
)

// BenchmarkResponseRewrite is the worker's own CPU per proxied request
// (connections in memory) through response-rewrite as the bench row
// configures it (a header set, a literal filter on the seeds' 1 KiB body
// with 102 matches), through its headers alone, and with no plugin.
func BenchmarkResponseRewrite(b *testing.B) {
	const pool = `"upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":320,"idle_timeout":60,"requests":2000000000}}`
	h := realHarness(b, []string{
		`{"id":"none","uri":"/none",` + pool + `}`,
		`{"id":"row","uri":"/row","plugins":{"response-rewrite":{"headers":{"set":{"X-Server-Id":"3"}},"filters":[{"regex":"5678","replace":"abcd","scope":"global"}]}},` + pool + `}`,
		`{"id":"headers","uri":"/headers","plugins":{"response-rewrite":{"headers":{"set":{"X-Server-Id":"3"}}}},` + pool + `}`,
	}, nil, nil)
	resp := append([]byte("HTTP/1.1 200 OK\r\nServer: bench\r\nDate: Sun, 29 Nov 2026 20:00:00 GMT\r\nContent-Type: text/plain\r\nContent-Length: 1024\r\n\r\n"),
		bytes.Repeat([]byte("1234567890"), 103)[:1024]...)
	for _, path := range []string{"none", "row", "headers"} {
		req := []byte("GET /" + path + " HTTP/1.1\r\nHost: 127.0.0.1:9080\r\nUser-Agent: load\r\nAccept: */*\r\n\r\n")
		b.Run(path, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				h.roundTrip(req, resp)
			}
		})
	}
}
