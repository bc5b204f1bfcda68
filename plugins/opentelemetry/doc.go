// Package opentelemetry is APISIX's opentelemetry plugin (priority 12009;
// rewrite and log phases): a server span per request, the trace carried
// to the upstream in a W3C traceparent header, the spans exported to a
// collector over OTLP/HTTP. Its configuration and metadata (collector,
// batch_span_processor, trace_id_source, resource) are those of
// apisix/plugins/opentelemetry.lua (APISIX 3.18 reads them from the
// plugin metadata, no longer plugin_attr); README.md shows them.
//
// The rewrite phase reads the client's traceparent (ParseTraceparent: a
// valid one is the parent, its trace kept), takes a new span id and, for
// a new trace, a random trace id or, with trace_id_source x-request-id,
// a valid X-Request-Id (ParseTraceID); the Sampler of sampler.name
// (always_on, always_off, trace_id_ratio, parent_base with its root)
// decides; the upstream gets a traceparent naming this span, the
// decision as its flag (AppendTraceparent). A sampled span's ids are kept
// on the request (Ctx.Keep: four values). The log phase copies the span
// into a fixed record (Span: ids, times from the request's start to the
// log, status, the name "METHOD uri-pattern" and APISIX's string
// attributes) in a bounded queue (Queue, lock-free, shared by the loops
// of the process; a full queue drops the span and counts it). Neither
// phase allocates nor blocks.
//
// Off the loop, one Exporter per process and metadata takes the queued
// spans in batches (max_export_batch_size; a partial batch once its
// oldest span waited batch_timeout, checked every inactive_timeout),
// converts them to OTLP as APISIX's log phase sets them
// (apisix.response_source, http.status_code, an error status from 500
// on) and uploads them to collector.address with the OpenTelemetry SDK's
// OTLP/HTTP client (otlptracehttp), not retrying a failed upload (its
// spans are counted). New metadata starts a new exporter; the old one
// sends what it has and stops, as does an exporter no instance holds any
// more (its routes dropped), at the next garbage collection. Without metadata the plugin does nothing,
// as APISIX.
//
// With the metadata's set_ngx_var, the rewrite phase sets the variables
// $opentelemetry_context_traceparent (the traceparent the upstream
// gets), $opentelemetry_trace_id and $opentelemetry_span_id (Ctx.SetVar),
// sampled or not, as APISIX: the plugins after it and the access log's
// format read them.
//
// trace_id_ratio decides as OpenTelemetry's TraceIDRatioBased sampler
// does (the low 63 bits of the trace id's last 8 bytes below
// fraction·2^63), so that services sampling by one ratio agree on a
// trace.
//
// additional_header_prefix_attributes names headers, or with a final '*'
// a prefix of their lower-cased names (Ctx.RequestHeaderAt), as APISIX
// matches the keys of core.request.headers: the attribute is named by the
// lower-cased name, a repeated header's values joined with ", ".
//
// The spans dropped are counted in the Prometheus counter
// coregate_opentelemetry_dropped_spans_total (DroppedMetric) of the
// export server, by reason: queue_full (counted by the event loop that
// could not queue the span) and export_failed (the spans of an upload the
// collector refused), as opentelemetry-lua's otel.bsp.dropped_spans.
//
// Differences from APISIX: with drop_on_queue_full false, where
// opentelemetry-lua hands the full queue to an export at once and queues
// the span anyway, without bound, the queue holds four times
// max_queue_size (queueSize) and a span past that is dropped and
// counted: the event loop never waits for an export. Only the request's span is
// exported, not spans of the gateway's own phases; the span starts when
// the request's head was read, on the worker's coarse clock; the spans a
// worker has queued when its process exits are not sent (a snapshot's
// new metadata does flush the old exporter's).
//
// Concurrency: Sampler values are immutable and safe for concurrent use;
// an instance runs on one event loop (its traceparent buffer is written
// by Rewrite; Ctx.SetRequestHeader copies it). A Span is written by a loop
// then read by the exporter's goroutine through a Queue; the byte slices
// a Span returns alias its slot and are valid until the slot is given
// back (Queue.Done).
package opentelemetry
