package opentelemetry

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	resourcepb "go.opentelemetry.io/proto/otlp/resource/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// ExportConfig is what the plugin's metadata says of the export: the
// collector and the batch span processor, as APISIX's metadata_schema.
type ExportConfig struct {
	// Address is collector.address: host:port (OTLP/HTTP, plain
	// HTTP, path /v1/traces), or a URL with http:// or https:// to
	// which /v1/traces is added.
	Address string
	// RequestTimeout is collector.request_timeout, the bound of one
	// upload.
	RequestTimeout time.Duration
	// Headers are collector.request_headers, sent with each upload.
	Headers map[string]string
	// Resource is resource: attributes of every span's resource, beside
	// hostname (and service.name "APISIX" when Resource is set and does
	// not name one, as APISIX); values are strings, float64 or bool.
	Resource map[string]any
	// Hostname is the hostname resource attribute.
	Hostname string
	// MaxExportBatchSize, BatchTimeout and InactiveTimeout are
	// batch_span_processor's: an upload carries at most
	// MaxExportBatchSize spans; it leaves once a batch is full, or at a
	// tick of InactiveTimeout when the oldest span queued has waited
	// BatchTimeout.
	MaxExportBatchSize int
	BatchTimeout       time.Duration
	InactiveTimeout    time.Duration
	// FailedCounter, when not nil, counts the spans of failed uploads
	// too (a metric's slot), beside Failed.
	FailedCounter *atomic.Uint64
}

// Exporter takes the spans of a Queue off the loop, converts them to
// OTLP and uploads them to the collector over HTTP. Run is its one
// goroutine (the Queue's consumer); Exported and Failed are safe
// anywhere.
type Exporter struct {
	q        *Queue
	cfg      ExportConfig
	client   otlptrace.Client
	resource *resourcepb.Resource
	exported atomic.Uint64 // spans the collector accepted
	failed   atomic.Uint64 // spans of failed uploads
	// firstSeen is when Run first saw the oldest span queued (zero: none
	// seen), for BatchTimeout.
	firstSeen time.Time
}

// NewExporter makes the exporter of q's spans; Run starts it.
func NewExporter(q *Queue, cfg ExportConfig) *Exporter {
	opts := []otlptracehttp.Option{
		otlptracehttp.WithTimeout(cfg.RequestTimeout),
		otlptracehttp.WithRetry(otlptracehttp.RetryConfig{Enabled: false}),
	}
	if strings.HasPrefix(cfg.Address, "http://") || strings.HasPrefix(cfg.Address, "https://") {
		opts = append(opts, otlptracehttp.WithEndpointURL(strings.TrimSuffix(cfg.Address, "/")+"/v1/traces"))
	} else {
		opts = append(opts, otlptracehttp.WithEndpoint(cfg.Address), otlptracehttp.WithInsecure())
	}
	if len(cfg.Headers) > 0 {
		opts = append(opts, otlptracehttp.WithHeaders(cfg.Headers))
	}
	if cfg.MaxExportBatchSize < 1 {
		cfg.MaxExportBatchSize = 1
	}
	return &Exporter{q: q, cfg: cfg, client: otlptracehttp.NewClient(opts...), resource: buildResource(cfg)}
}

// buildResource is the resource of every span: hostname, then
// service.name "APISIX" unless Resource names one, then Resource, by key.
func buildResource(cfg ExportConfig) *resourcepb.Resource {
	r := &resourcepb.Resource{Attributes: []*commonpb.KeyValue{strAttr("hostname", cfg.Hostname)}}
	if cfg.Resource == nil {
		return r
	}
	if _, ok := cfg.Resource["service.name"]; !ok {
		r.Attributes = append(r.Attributes, strAttr("service.name", "APISIX"))
	}
	keys := make([]string, 0, len(cfg.Resource))
	for k := range cfg.Resource {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		var v *commonpb.AnyValue
		switch x := cfg.Resource[k].(type) {
		case string:
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: x}}
		case float64:
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: x}}
		case bool:
			v = &commonpb.AnyValue{Value: &commonpb.AnyValue_BoolValue{BoolValue: x}}
		default:
			continue
		}
		r.Attributes = append(r.Attributes, &commonpb.KeyValue{Key: k, Value: v})
	}
	return r
}

func strAttr(k, v string) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_StringValue{StringValue: v}}}
}

func intAttr(k string, v int64) *commonpb.KeyValue {
	return &commonpb.KeyValue{Key: k, Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_IntValue{IntValue: v}}}
}

// running is the number of Run calls in progress in the process.
var running atomic.Int64

// Run exports until ctx is done, then exports what is queued once more
// and stops the client. Every upload is bounded by RequestTimeout, not by
// ctx: ctx being done (the metadata changed, or no instance holds the
// exporter any more) means "send what you hold and stop", so a batch
// already taken from the queue is never cut off by it and lost.
func (e *Exporter) Run(ctx context.Context) {
	running.Add(1)
	defer running.Add(-1)
	tick := time.NewTicker(e.cfg.InactiveTimeout)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			for e.exportBatch(context.Background()) > 0 {
			}
			stop, cancel := context.WithTimeout(context.Background(), e.cfg.RequestTimeout)
			_ = e.client.Stop(stop)
			cancel()
			return
		case <-e.q.Ready():
			for e.q.Len() >= e.cfg.MaxExportBatchSize && e.exportBatch(context.Background()) > 0 {
			}
		case now := <-tick.C:
			if e.q.Len() == 0 {
				e.firstSeen = time.Time{}
				continue
			}
			if e.firstSeen.IsZero() {
				e.firstSeen = now
			}
			if now.Sub(e.firstSeen)+e.cfg.InactiveTimeout > e.cfg.BatchTimeout {
				for e.exportBatch(context.Background()) > 0 {
				}
			}
		}
	}
}

// exportBatch uploads up to MaxExportBatchSize queued spans, giving
// their slots back first, and returns how many it took (counted exported
// or failed).
func (e *Exporter) exportBatch(ctx context.Context) int {
	var spans []*tracepb.Span
	for len(spans) < e.cfg.MaxExportBatchSize {
		s := e.q.Next()
		if s == nil {
			break
		}
		spans = append(spans, toProto(s))
		e.q.Done()
	}
	e.firstSeen = time.Time{}
	if len(spans) == 0 {
		return 0
	}
	rs := []*tracepb.ResourceSpans{{
		Resource:   e.resource,
		ScopeSpans: []*tracepb.ScopeSpans{{Scope: &commonpb.InstrumentationScope{Name: "opentelemetry-lua"}, Spans: spans}},
	}}
	if err := e.client.UploadTraces(ctx, rs); err != nil {
		e.failed.Add(uint64(len(spans)))
		if e.cfg.FailedCounter != nil {
			e.cfg.FailedCounter.Add(uint64(len(spans)))
		}
	} else {
		e.exported.Add(uint64(len(spans)))
	}
	return len(spans)
}

// Start starts the client; call it before Run.
func (e *Exporter) Start(ctx context.Context) error {
	if err := e.client.Start(ctx); err != nil {
		return fmt.Errorf("opentelemetry: exporter: %w", err)
	}
	return nil
}

// Exported is the number of spans the collector accepted.
func (e *Exporter) Exported() uint64 { return e.exported.Load() }

// Failed is the number of spans whose upload failed (not retried).
func (e *Exporter) Failed() uint64 { return e.failed.Load() }

// toProto is s as an OTLP server span: its ids, times, name and string
// attributes, then apisix.response_source, http.status_code and
// http.response.status_code, and an error status from 500 on, as
// APISIX's log phase sets them.
func toProto(s *Span) *tracepb.Span {
	p := &tracepb.Span{
		TraceId:           append([]byte(nil), s.SC.TraceID[:]...),
		SpanId:            append([]byte(nil), s.SC.SpanID[:]...),
		Flags:             uint32(s.SC.Flags),
		Name:              string(s.Name()),
		Kind:              tracepb.Span_SPAN_KIND_SERVER,
		StartTimeUnixNano: uint64(max(s.Start, 0)),
		EndTimeUnixNano:   uint64(max(s.End, 0)),
	}
	if s.Parent != (SpanID{}) {
		p.ParentSpanId = append([]byte(nil), s.Parent[:]...)
	}
	for i := range s.NumAttrs() {
		k, v := s.Attr(i)
		p.Attributes = append(p.Attributes, strAttr(string(k), string(v)))
	}
	source := "apisix"
	if s.FromUpstream {
		source = "upstream"
	}
	p.Attributes = append(p.Attributes, strAttr("apisix.response_source", source),
		intAttr("http.status_code", int64(s.Status)), intAttr("http.response.status_code", int64(s.Status)))
	if s.Status >= 500 {
		p.Status = &tracepb.Status{Code: tracepb.Status_STATUS_CODE_ERROR, Message: source + " error: " + strconv.Itoa(int(s.Status))}
	}
	return p
}
