// Package opentelemetry holds the parts of APISIX's opentelemetry plugin
// (priority 12009) that run on the event loop, each without allocating:
//
//   - W3C Trace Context: a client's traceparent read (ParseTraceparent)
//     and the one sent upstream written (AppendTraceparent); X-Request-Id
//     read as a trace id (ParseTraceID), as trace_id_source x-request-id;
//   - the samplers of sampler.name (always_on, always_off,
//     trace_id_ratio, parent_base with its root): Sampler;
//   - the compact record of a request's span (Span: ids, times, status,
//     name and string attributes copied into a fixed record) and the
//     bounded queue between the loops and the exporter's goroutine
//     (Queue: lock-free; a full queue drops the span and counts it,
//     never blocks).
//
// Off the loop, an Exporter takes the queued spans in batches
// (batch_span_processor's max_export_batch_size, batch_timeout,
// inactive_timeout), converts them to OTLP as APISIX's log phase sets
// them, and uploads them to collector.address over OTLP/HTTP with the
// OpenTelemetry SDK's client (otlptracehttp), not retrying a failed
// upload (its spans are counted).
//
// The plugin itself (its schema and metadata, the rewrite, header_filter
// and log phases over these parts) is not registered yet.
//
// trace_id_ratio decides as OpenTelemetry's TraceIDRatioBased sampler
// does (the low 63 bits of the trace id's last 8 bytes below
// fraction·2^63), so that services sampling by one ratio agree on a
// trace.
//
// Concurrency: Sampler values are immutable and safe for concurrent use;
// a Span is written by one goroutine then read by another through a
// Queue, whose producers may be several and whose consumer is one
// goroutine (see Queue). The byte slices a Span returns alias its slot and are
// valid until the slot is given back (Queue.Done).
package opentelemetry
