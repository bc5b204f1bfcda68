// Package filelogger is APISIX's file-logger plugin (priority 399, log
// phase): each request a route (or global rule) logs gets one JSON line
// appended to the file at path. The configuration, its defaults and its
// messages are those of apisix/plugins/file-logger.lua; README.md shows
// them.
//
// The entry is APISIX's default one (log-util's get_full_log: request
// {url, uri, method, headers, querystring, size}, response {status,
// headers, size}, server {hostname, version}, upstream, service_id, route_id,
// consumer {username}, client_ip, start_time, latency, upstream_latency,
// apisix_latency), with log_format_extra's members added (never replacing
// one), or, with log_format (the configuration's, else a non-empty one of
// the plugin metadata), that object with each "$variable" replaced by the
// request's value (a string, null when unset), nested objects down to
// five levels, then route_id and service_id. path, log_format and
// log_format_extra come from the plugin metadata when the configuration
// has none. match, lua-resty-expr lists, selects the requests logged.
// include_resp_body adds response.body to the default entry: the first
// max_resp_body_bytes of the body the client got, which the worker
// copies as it relays it (plugins.ResponseBodyReader), for the requests
// include_resp_body_expr, when given, selects ($status the response's).
//
// The event loop never touches the file: Log writes the entry into one
// of a fixed set of buffers (1024 per path) and queues it for a goroutine
// that appends it to the file. When every buffer is queued, the file not
// keeping up, the entry is dropped and counted (Dropped, a warning in
// the error log, and the Prometheus counter
// coregate_file_logger_dropped_entries_total, DroppedMetric): a request
// never waits. The file is opened at the first
// entry and reopened after a SIGUSR1, the signal with which the
// supervisor has the access log reopened once logs are rotated. One
// writer serves every instance of a path for the process's life, as
// APISIX keeps the files it opened.
//
// Differences from APISIX:
//   - include_req_body puts the request body, its first
//     max_req_body_bytes, in the default entry's request.body, for the
//     requests include_req_body_expr matches (all without it), as
//     log-util's get_full_log; not in a log_format's entry
//     ($request_body there is null). Such an instance is a
//     plugins.BodyTee: the body streams to the upstream as without the
//     plugin, whatever its length, while the worker copies its first
//     max_req_body_bytes for the log phase, where APISIX's nginx reads
//     the body whole first (spooling a large one to a file) and logs its
//     start. An exchange that ended before its body did (the client went
//     away, the upstream answered early) logs what arrived. A
//     configuration without include_req_body copies no body.
//   - response.body (include_resp_body) is the body as the client got
//     it, not decoded from its Content-Encoding as APISIX decodes gzip
//     and brotli; an empty body has none. An include_resp_body_expr that
//     does not compile is logged when the route is built and the body
//     left out, as APISIX finds it in body_filter.
//   - A configuration without a path, whose plugin metadata has none
//     either, is not refused by the Admin API, which checks a plugin's
//     configuration without the metadata: APISIX's message
//     (`property "path" is not set in either the plugin conf or the
//     metadata`) goes to the error log when the route is built, and
//     nothing is written, as APISIX does when the metadata's path goes
//     away later.
//   - response.headers is the head the client got, every field as sent,
//     names in lower case (a repeated one's values in an array), the
//     worker's own fields (Date, Server, Content-Length,
//     Transfer-Encoding, Connection) included, where ngx.resp.get_headers
//     leaves out those nginx adds when it writes the head (Date, and
//     Server unless APISIX set it).
//   - A relative path is relative to the gateway's working directory
//     (where it was started), not to the directory of config.yaml as the
//     access log's is, nor to APISIX's prefix.
//   - Members come in a fixed order (log_format's by name), where APISIX
//     follows Lua's table order; start_time is whole milliseconds.
//   - Of the access log's own variables, a log_format gets $status,
//     $bytes_sent, $request_length, $request_time, $upstream_response_time
//     and $msec (as nginx writes them); the others are null.
//
// An instance is read-only once built and shared by the event loops; its
// writer is safe for concurrent use. Log allocates nothing once the
// writer's buffers have grown to the entries' size.
package filelogger
