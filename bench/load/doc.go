// Package load is the benchmark's HTTP/1.1 load generator: one event loop on
// one locked OS thread driving C keep-alive connections over epoll, in the
// manner of wrk (closed loop: each connection sends its next request as soon
// as the previous response is complete) or wrk2 (fixed rate: requests are
// scheduled at a constant total rate, and latency is measured from the time a
// request was due, not when it could be sent, which corrects for coordinated
// omission).
//
// Latencies go into an hdr.Histogram in nanoseconds. Responses are parsed
// incrementally (Content-Length, chunked, or close-delimited bodies) without
// keeping the body; errors and non-2xx answers are counted, and a broken or
// timed-out connection is reopened. A run is bounded by a duration and,
// optionally, a number of responses.
//
// Run allocates its buffers once; the request loop does not allocate.
// A Run uses the calling goroutine's thread and is independent of any other
// Run; nothing in the package is shared between runs.
package load
