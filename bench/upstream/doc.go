// Package upstream is the benchmark's origin server: an HTTP/1.1 keep-alive
// server on one gnet event loop that answers every request with a fixed body,
// as the upstream of APISIX's benchmark/run.sh does. It costs a few
// microseconds per request, well under the gateway being measured.
//
// Requests may be pipelined and span reads; a request with a body
// (Content-Length) has its body skipped. Chunked request bodies are not
// supported and close the connection. The response is built once at start
// and shared read-only by all connections.
package upstream
