package worker

import (
	"bytes"
	"testing"
)

// BenchmarkPluginPhases is one proxied request through the worker (fake
// connections, a kept-alive upstream) with no plugin, with a plugin in
// every phase, and answered by a plugin (no upstream). The upstream
// connection serves every request (keepalive_pool.requests).
func BenchmarkPluginPhases(b *testing.B) {
	h, rec := pluginHarness(b, pluginSpec(b, []string{
		`{"id":"none","uri":"/none","upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":320,"idle_timeout":60,"requests":2000000000}}}`,
		`{"id":"all","uri":"/all","plugins":{"p-hi":{"resp_header":{"X-Hi":"1"},"hf_header":{"X-HF":"2"}},"p-lo":{}},"upstream":{"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":320,"idle_timeout":60,"requests":2000000000}}}`,
		`{"id":"exit","uri":"/exit","plugins":{"p-hi":{"exit_at":"access","exit":200,"body":"hello"}}}`,
	}, nil, nil, nil))
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n\r\n"), bytes.Repeat([]byte("x"), 1024)...)
	for _, bc := range []struct {
		name string
		req  []byte
		resp []byte
	}{
		{"none", []byte("GET /none HTTP/1.1\r\nHost: x\r\n\r\n"), resp},
		{"every-phase", []byte("GET /all HTTP/1.1\r\nHost: x\r\n\r\n"), resp},
		{"exit", []byte("GET /exit HTTP/1.1\r\nHost: x\r\n\r\n"), nil},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				rec.reset()
				h.roundTrip(bc.req, bc.resp)
			}
		})
	}
}
