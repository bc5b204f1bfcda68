// Package proxymirror is APISIX's proxy-mirror plugin (priority 1010;
// rewrite and log phases): a copy of each sampled request is sent to a mirror
// host, off the client's path, and the mirror's answer is dropped. Its
// configuration, defaults and error texts are those of
// apisix/plugins/proxy-mirror.lua; README.md shows them.
//
// The rewrite phase draws the sample (sample_ratio), then copies the
// request's method, target and fields into a job of the process's queue
// and hands it to the queue's senders, a few goroutines that send it with
// net/http (HTTP/1.1, or https without verifying the mirror's
// certificate, as nginx's proxy_pass; 60 s to connect and to answer, as
// APISIX's proxy_mirror_timeouts) and read and drop the answer. The
// request itself goes on at once: the client's answer never waits for
// the mirror, nor does the next request on its connection (nginx's mirror
// holds that one back until the mirror answered). The copy's target is
// the mirror's scheme://host[:port], then path (path_concat_mode
// "replace") or path and $uri ("prefix") or $uri alone, then "?" and $args
// when there is a query, as APISIX's enable_mirror makes it; its Host is
// the request's, and its fields the request's but the connection's own
// (Connection, Keep-Alive, TE, Trailer, Upgrade, Proxy-Connection) and
// the framing.
//
// A request without a body (or whose body a plugins.BodyReader of the
// route read whole before the phases) is handed to the senders from the
// rewrite phase. One with a body waits for it: the instance is a
// plugins.BodyTee, so the body streams to the upstream as without the
// plugin, no wait and no limit added, while the worker copies its first
// MaxBody bytes (1 MiB, nginx's default client_max_body_size); the job,
// kept for the request (Ctx.Keep), goes from the log phase, once the
// exchange ended, with the body de-chunked and its Content-Length. A body
// over MaxBody, or one the exchange ended before (the client went away,
// a plugin answered), is not mirrored: the request is counted, and the
// first over MaxBody said at warn level in the error log.
//
// Differences from APISIX, whose nginx reads the body whole before the
// upstream is contacted (mirror_request_body), spooling a large one to a
// file, and mirrors it whatever its length (client_max_body_size is
// unlimited) at the time the request goes upstream: here the upstream
// gets the body as it arrives, the copy of a request with a body leaves
// once the exchange ended, and a body over 1 MiB is not mirrored, the
// copy being held in memory. An idle job keeps a body buffer of 64 KiB
// at most. grpc:// and grpcs:// mirrors are refused by Check. At most
// 1024 copies are in flight in a process; past that a request is not
// copied.
//
// An instance belongs to one event loop (plugins.Plugin): its random
// source is used without locks. The queue is the process's, safe for
// concurrent use; taking and handing over a job are non-blocking channel
// operations. The rewrite and log phases do not allocate (alloc_test.go);
// the senders do, off the event loop.
package proxymirror
