// Package httplogger is APISIX's http-logger plugin (priority 410, log
// phase): each request's entry, the one file-logger writes
// (plugins/internal/logentry: APISIX's default entry, or a log_format,
// the configuration's or the plugin metadata's), goes to an HTTP(S)
// server in batches, POSTed to uri with auth_header as Authorization.
// The configuration, its defaults and its messages are those of
// apisix/plugins/http-logger.lua with the batch processor's members
// (name, batch_max_size, inactive_timeout, buffer_duration,
// max_retry_count, retry_delay); README.md shows them. concat_method
// json sends a batch as a JSON array (one object when batch_max_size is
// 1), new_line as the entries one per line (text/plain). A request no
// route matched has route_id "no-matched". ssl_verify checks the
// server's certificate; timeout bounds the connection and the exchange.
// include_resp_body adds response.body to the default entry: the first
// max_resp_body_bytes of the body the client got, which the worker
// copies as it relays it (plugins.ResponseBodyReader), for the requests
// include_resp_body_expr, when given, selects.
//
// The event loop never waits on the server: Log builds the entry into
// the instance's buffer (one event loop uses an instance) and pushes it
// to the configuration's batch processor (plugins/internal/batch), which
// copies it into one of max_pending_entries buffers (the plugin
// metadata's, 8192 by default); when all are taken, the server being
// slow or down, the entry is dropped and counted (the Prometheus counter
// coregate_http_logger_dropped_entries_total{reason="queue_full"},
// DroppedMetric; reason="send_failed" counts the entries of the batches
// dropped after their retries). The batches are
// gathered and POSTed on the processor's goroutines, retried
// max_retry_count times retry_delay seconds apart, then dropped with an
// error in the log. A processor serves every instance of the same
// sending and batching members, as APISIX's batch-processor-manager
// keeps one per configuration, for as long as such instances are in use:
// once a configuration change dropped the last of them (and the
// snapshots that held them were let go), the processor POSTs what it
// holds and stops, its goroutines, timers and connections with it
// (batch.Shared), at the next garbage collection (two minutes at most).
//
// Differences from APISIX:
//   - include_req_body puts the request body, its first
//     max_req_body_bytes, in the default entry's request.body, for the
//     requests include_req_body_expr matches (all without it), as
//     log-util's get_full_log; not in a log_format's entry. Such an
//     instance is a plugins.BodyTee: the body streams to the upstream as
//     without the plugin, whatever its length, while the worker copies
//     its first max_req_body_bytes for the log phase, where APISIX's
//     nginx reads the body whole first (spooling a large one to a file)
//     and logs its start. An exchange that ended before its body did logs
//     what arrived. A configuration without include_req_body copies no
//     body.
//   - response.headers holds the worker's own fields too, response.body
//     is not decoded from its Content-Encoding, and members come in a
//     fixed order (see plugins/filelogger).
//   - A processor of a configuration no longer used is flushed and
//     stopped once the collector finds it unreferenced, where APISIX's
//     batch-processor-manager checks for stale processors on a timer.
//   - max_pending_entries bounds each processor's entries, where APISIX
//     counts them across its processors.
//
// Log allocates nothing once the processor's buffers have grown to the
// entries' size.
package httplogger
