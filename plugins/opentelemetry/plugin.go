package opentelemetry

import (
	"bytes"
	"context"
	_ "embed"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"weak"

	"coregate/httpvar"
	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "opentelemetry"

var (
	//go:embed schema.json
	schema []byte
	//go:embed metadata_schema.json
	metadataSchema []byte
)

// DroppedMetric is the Prometheus counter of the spans dropped, by
// reason: queue_full, the queue full when the log phase recorded the span
// (drop_on_queue_full, or past the overflow of queueSize), and
// export_failed, an upload the collector did not take (not retried), as
// opentelemetry-lua counts both in otel.bsp.dropped_spans.
const DroppedMetric = "coregate_opentelemetry_dropped_spans_total"

func init() {
	plugins.Register(Name, Plugin{})
	plugins.RegisterMetric(plugins.MetricFamily{Name: DroppedMetric, Kind: plugins.Counter,
		Help: "Spans the opentelemetry plugin dropped, by reason (queue_full, export_failed).", Labels: []string{"reason"}})
}

// Plugin is opentelemetry's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin               = Plugin{}
	_ plugins.MetadataSchemaPlugin = Plugin{}
	_ plugins.RewritePhase         = (*instance)(nil)
	_ plugins.LogPhase             = (*instance)(nil)
)

// Schema implements plugins.Plugin: APISIX's schema.
func (Plugin) Schema() []byte { return schema }

// MetadataSchema implements plugins.MetadataSchemaPlugin: APISIX's
// metadata_schema.
func (Plugin) MetadataSchema() []byte { return metadataSchema }

// samplerConf is sampler, with APISIX's defaults.
type samplerConf struct {
	Name    string `json:"name"`
	Options struct {
		Fraction float64 `json:"fraction"`
		Root     *struct {
			Name    string `json:"name"`
			Options struct {
				Fraction float64 `json:"fraction"`
			} `json:"options"`
		} `json:"root"`
	} `json:"options"`
}

// conf is a route's configuration.
type conf struct {
	Sampler                          samplerConf `json:"sampler"`
	AdditionalAttributes             []string    `json:"additional_attributes"`
	AdditionalHeaderPrefixAttributes []string    `json:"additional_header_prefix_attributes"`
}

// metadata is the plugin metadata, with APISIX's defaults.
type metadata struct {
	TraceIDSource string         `json:"trace_id_source"`
	Resource      map[string]any `json:"resource"`
	Collector     struct {
		Address        string         `json:"address"`
		RequestTimeout int            `json:"request_timeout"`
		RequestHeaders map[string]any `json:"request_headers"`
	} `json:"collector"`
	BatchSpanProcessor batchSpanProcessor `json:"batch_span_processor"`
	SetNgxVar          bool               `json:"set_ngx_var"`
}

// batchSpanProcessor is the metadata's batch_span_processor.
type batchSpanProcessor struct {
	DropOnQueueFull    *bool   `json:"drop_on_queue_full"`
	MaxQueueSize       int     `json:"max_queue_size"`
	BatchTimeout       float64 `json:"batch_timeout"`
	InactiveTimeout    float64 `json:"inactive_timeout"`
	MaxExportBatchSize int     `json:"max_export_batch_size"`
}

// The batch span processor's defaults, opentelemetry-lua's.
const (
	defaultMaxQueueSize       = 2048
	defaultBatchTimeout       = 5.0
	defaultInactiveTimeout    = 2.0
	defaultMaxExportBatchSize = 256
)

func decodeMetadata(raw json.RawMessage) (metadata, error) {
	var m metadata
	m.TraceIDSource = "random"
	m.Collector.Address, m.Collector.RequestTimeout = "127.0.0.1:4318", 3
	err := json.Unmarshal(raw, &m)
	bsp := &m.BatchSpanProcessor
	if bsp.MaxQueueSize <= 0 {
		bsp.MaxQueueSize = defaultMaxQueueSize
	}
	if bsp.BatchTimeout <= 0 {
		bsp.BatchTimeout = defaultBatchTimeout
	}
	if bsp.InactiveTimeout <= 0 {
		bsp.InactiveTimeout = defaultInactiveTimeout
	}
	if bsp.MaxExportBatchSize <= 0 {
		bsp.MaxExportBatchSize = defaultMaxExportBatchSize
	}
	if m.Collector.RequestTimeout <= 0 {
		m.Collector.RequestTimeout = 3
	}
	return m, err
}

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(json.RawMessage) error { return nil }

// buildSampler is the sampler a configuration names.
func buildSampler(c samplerConf) Sampler {
	byName := func(name string, fraction float64) Sampler {
		switch name {
		case "always_on":
			return AlwaysOn
		case "trace_id_ratio":
			return TraceIDRatio(fraction)
		}
		return AlwaysOff
	}
	if c.Name == "parent_base" {
		if r := c.Options.Root; r != nil {
			return ParentBase(byName(r.Name, r.Options.Fraction))
		}
		return ParentBase(AlwaysOff)
	}
	return byName(c.Name, c.Options.Fraction)
}

// Build implements plugins.Plugin. The exporter of the snapshot's
// metadata is the process's (exporterFor); without metadata the
// instance does nothing, as APISIX's rewrite warns and returns.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	c := conf{}
	c.Sampler.Name = "always_off"
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{sampler: buildSampler(c.Sampler)}
	for _, name := range c.AdditionalAttributes {
		in.attrs = append(in.attrs, namedVar{key: []byte(name), v: httpvar.Parse(name)})
	}
	for _, name := range c.AdditionalHeaderPrefixAttributes {
		if len(name) >= 2 && name[len(name)-1] == '*' {
			in.prefixes = append(in.prefixes, []byte(name[:len(name)-1]))
			continue
		}
		in.headers = append(in.headers, namedVar{key: []byte(name), v: httpvar.Parse("http_" + name)})
	}
	if raw := env.Metadata.Of(Name); raw != nil {
		m, err := decodeMetadata(raw)
		if err != nil {
			return nil, fmt.Errorf("opentelemetry: metadata: %w", err)
		}
		in.fromRequestID = m.TraceIDSource == "x-request-id"
		in.setVars = m.SetNgxVar
		var failed *atomic.Uint64
		if env.Metrics != nil {
			in.dropped = env.Metrics.Slot(DroppedMetric, "queue_full")
			failed = env.Metrics.Slot(DroppedMetric, "export_failed")
		}
		in.exp = exporterFor(raw, m, failed)
		in.q = in.exp.q
	}
	return in, nil
}

// namedVar is an attribute read from a variable.
type namedVar struct {
	key []byte
	v   httpvar.Var
}

// The process's exporter: one per metadata, replaced (the old one
// flushed and stopped) when a snapshot brings other metadata, and
// stopped the same way once no instance holds it any more (the routes
// with the plugin dropped, their snapshots let go): the instances hold
// its exporterRef, which exporters holds weakly.
var exporters struct {
	mu     sync.Mutex
	raw    []byte
	ref    weak.Pointer[exporterRef]
	cancel context.CancelFunc
}

// exporterRef is the instances' handle on the exporter of their
// metadata: its queue. Once it is unreachable the collector has the
// exporter stopped (exporterFor's clean-up), which sends what is queued.
type exporterRef struct{ q *Queue }

// overflow is how many times max_queue_size the queue holds with
// drop_on_queue_full false (queueSize).
const overflow = 4

// queueSize is the capacity of the queue of bsp. With drop_on_queue_full
// false, where opentelemetry-lua hands the full queue's batches to an
// export at once and queues the span all the same, without bound, the
// queue holds overflow times max_queue_size: the exporter, woken by every
// full batch, exports them one after the other, and a span is dropped
// (and counted) only past that, since the event loop cannot wait for an
// upload.
func queueSize(bsp batchSpanProcessor) int {
	if bsp.DropOnQueueFull != nil && !*bsp.DropOnQueueFull {
		return overflow * bsp.MaxQueueSize
	}
	return bsp.MaxQueueSize
}

// exporterFor returns the queue of the exporter of metadata raw (m
// decoded), starting it when the process has none for it; failed, when
// not nil, counts the spans of failed uploads (DroppedMetric's
// export_failed).
func exporterFor(raw []byte, m metadata, failed *atomic.Uint64) *exporterRef {
	exporters.mu.Lock()
	defer exporters.mu.Unlock()
	if ref := exporters.ref.Value(); ref != nil && bytes.Equal(exporters.raw, raw) {
		return ref
	}
	if exporters.cancel != nil {
		exporters.cancel()
	}
	bsp := m.BatchSpanProcessor
	q := NewQueue(queueSize(bsp), bsp.MaxExportBatchSize)
	host, _ := os.Hostname()
	headers := map[string]string{}
	for k, v := range m.Collector.RequestHeaders {
		switch x := v.(type) {
		case string:
			headers[k] = x
		case bool:
			headers[k] = strconv.FormatBool(x)
		case float64:
			headers[k] = strconv.FormatFloat(x, 'g', -1, 64)
		}
	}
	e := NewExporter(q, ExportConfig{
		Address:            m.Collector.Address,
		RequestTimeout:     time.Duration(m.Collector.RequestTimeout) * time.Second,
		Headers:            headers,
		Resource:           m.Resource,
		Hostname:           host,
		MaxExportBatchSize: bsp.MaxExportBatchSize,
		BatchTimeout:       time.Duration(bsp.BatchTimeout * float64(time.Second)),
		InactiveTimeout:    time.Duration(bsp.InactiveTimeout * float64(time.Second)),
		FailedCounter:      failed,
	})
	ctx, cancel := context.WithCancel(context.Background())
	_ = e.Start(ctx) // the HTTP client's Start does not fail
	go e.Run(ctx)
	ref := &exporterRef{q}
	// Run holds q and the exporter, not ref: once the instances let ref
	// go, the exporter is stopped (cancel may run twice, harmlessly).
	runtime.AddCleanup(ref, func(cancel context.CancelFunc) { cancel() }, cancel)
	exporters.raw, exporters.ref, exporters.cancel = bytes.Clone(raw), weak.Make(ref), cancel
	return ref
}

// instance is one configuration, built; shared by the requests of its
// routes on one event loop. Its phases allocate nothing.
type instance struct {
	sampler       Sampler
	fromRequestID bool
	setVars       bool         // set_ngx_var: the $opentelemetry_* variables
	attrs         []namedVar   // additional_attributes
	headers       []namedVar   // additional_header_prefix_attributes without '*'
	prefixes      [][]byte     // and those with, without it
	q             *Queue       // nil: no metadata, nothing done
	exp           *exporterRef // q's exporter, held
	// dropped is DroppedMetric's queue_full series, this worker's slot
	// (nil without metrics), which Log counts on its event loop.
	dropped *atomic.Uint64
	// keys are the owners of the request's kept values: the trace id's
	// two halves, the parent's span id and the span's own.
	keys [4]byte
	// tp is the traceparent being written (SetRequestHeader copies it);
	// name and value are a header prefix attribute's, being written
	// (Span.AddAttr copies them).
	tp, name, value []byte
}

// Rewrite reads the client's traceparent, decides sampling, sends the
// upstream a traceparent naming this span, and keeps the ids of a
// sampled span for the log phase.
func (in *instance) Rewrite(c plugins.Ctx) {
	if in.q == nil {
		return
	}
	parent, hasParent := ParseTraceparent(c.Header("traceparent"))
	var sc SpanContext
	switch {
	case hasParent:
		sc.TraceID = parent.TraceID
	case in.fromRequestID:
		var ok bool
		if sc.TraceID, ok = ParseTraceID(c.Header("X-Request-Id")); !ok {
			sc.TraceID = randomTraceID()
		}
	default:
		sc.TraceID = randomTraceID()
	}
	putUint64(sc.SpanID[:], nonZero())
	if in.sampler.Sample(sc.TraceID, parent, hasParent) {
		sc.Flags = 1
	}
	in.tp = AppendTraceparent(in.tp[:0], sc)
	c.SetRequestHeader("traceparent", in.tp)
	if in.setVars {
		// "00-" trace id "-" span id "-" flags.
		c.SetVar(varTraceparent, in.tp)
		c.SetVar(varTraceID, in.tp[3:35])
		c.SetVar(varSpanID, in.tp[36:52])
	}
	if sc.Flags&1 == 0 {
		return
	}
	var pid uint64
	if hasParent {
		pid = getUint64(parent.SpanID[:])
	}
	// keys[0] last: the log phase records a span only when all four
	// were kept.
	_ = c.Keep(&in.keys[1], getUint64(sc.TraceID[8:])) &&
		c.Keep(&in.keys[2], pid) &&
		c.Keep(&in.keys[3], getUint64(sc.SpanID[:])) &&
		c.Keep(&in.keys[0], getUint64(sc.TraceID[:8]))
}

func randomTraceID() TraceID {
	var id TraceID
	putUint64(id[:8], rand.Uint64())
	putUint64(id[8:], nonZero())
	return id
}

func nonZero() uint64 {
	for {
		if v := rand.Uint64(); v != 0 {
			return v
		}
	}
}

func putUint64(b []byte, v uint64) {
	for i := 7; i >= 0; i-- {
		b[i] = byte(v)
		v >>= 8
	}
}

func getUint64(b []byte) uint64 {
	var v uint64
	for _, c := range b[:8] {
		v = v<<8 | uint64(c)
	}
	return v
}

// The variables of the span's attributes.
var (
	varHost        = httpvar.Parse("host")
	varScheme      = httpvar.Parse("scheme")
	varRequestURI  = httpvar.Parse("request_uri")
	varUserAgent   = httpvar.Parse("http_user_agent")
	varURI         = httpvar.Parse("uri")
	varRouteID     = httpvar.Parse("route_id")
	varRouteName   = httpvar.Parse("route_name")
	varMatchedURI  = httpvar.Parse("matched_uri")
	varServiceID   = httpvar.Parse("service_id")
	varServiceName = httpvar.Parse("service_name")
)

var space = []byte(" ")

// The variables of set_ngx_var.
var (
	varTraceparent = httpvar.Parse("opentelemetry_context_traceparent")
	varTraceID     = httpvar.Parse("opentelemetry_trace_id")
	varSpanID      = httpvar.Parse("opentelemetry_span_id")
)

// Log records the span of a sampled request into the exporter's queue
// (dropped and counted when the queue is full): its ids, its times, its
// name (the method and the route's uri pattern) and APISIX's attributes.
func (in *instance) Log(c plugins.Ctx) {
	if in.q == nil {
		return
	}
	hi, ok := c.Kept(&in.keys[0])
	if !ok {
		return
	}
	s := in.q.Reserve()
	if s == nil {
		if in.dropped != nil {
			in.dropped.Add(1)
		}
		return
	}
	lo, _ := c.Kept(&in.keys[1])
	pid, _ := c.Kept(&in.keys[2])
	sid, _ := c.Kept(&in.keys[3])
	putUint64(s.SC.TraceID[:8], hi)
	putUint64(s.SC.TraceID[8:], lo)
	putUint64(s.SC.SpanID[:], sid)
	putUint64(s.Parent[:], pid)
	s.SC.Flags = 1
	x := c.Exchange()
	s.End = c.Now()
	s.Start = s.End - int64(x.RequestTime)
	s.Status = uint16(c.Status())
	s.FromUpstream = x.Upstreamed
	method := c.Method()
	path := c.Var(varMatchedURI)
	if path != nil {
		s.SetName(method, space, path)
	} else {
		s.SetName(method)
	}
	attr := func(k string, v []byte) { s.AddAttr([]byte(k), v) }
	attr("net.host.name", c.Var(varHost))
	attr("http.method", method)
	attr("http.scheme", c.Var(varScheme))
	attr("http.target", c.Var(varRequestURI))
	attr("http.user_agent", c.Var(varUserAgent))
	attr("http.request.method", method)
	attr("url.scheme", c.Var(varScheme))
	attr("url.path", c.Var(varURI))
	attr("user_agent.original", c.Var(varUserAgent))
	if path != nil {
		attr("apisix.route_id", c.Var(varRouteID))
		attr("apisix.route_name", c.Var(varRouteName))
		attr("http.route", path)
	}
	if sid := c.Var(varServiceID); sid != nil {
		attr("apisix.service_id", sid)
		attr("apisix.service_name", c.Var(varServiceName))
	}
	for i := range in.attrs {
		if v := c.Var(in.attrs[i].v); v != nil {
			s.AddAttr(in.attrs[i].key, v)
		}
	}
	for i := range in.headers {
		if v := c.Var(in.headers[i].v); v != nil {
			s.AddAttr(in.headers[i].key, v)
		}
	}
	for _, p := range in.prefixes {
		in.prefixAttrs(c, s, p)
	}
	in.q.Commit(s)
}

// prefixAttrs adds the request headers whose names, lower-cased, begin
// with p, as APISIX matches the keys of core.request.headers: the name
// lower-cased, a repeated header's values joined with ", ", once.
func (in *instance) prefixAttrs(c plugins.Ctx, s *Span, p []byte) {
	for i := 0; ; i++ {
		name, v, ok := c.RequestHeaderAt(i)
		if !ok {
			return
		}
		in.name = appendLower(in.name[:0], name)
		if !bytes.HasPrefix(in.name, p) || seenBefore(c, i, name) {
			continue
		}
		in.value = append(in.value[:0], v...)
		for j := i + 1; ; j++ {
			n2, v2, ok := c.RequestHeaderAt(j)
			if !ok {
				break
			}
			if bytes.EqualFold(n2, name) {
				in.value = append(append(in.value, ", "...), v2...)
			}
		}
		s.AddAttr(in.name, in.value)
	}
}

// seenBefore reports whether a field before the i-th has name.
func seenBefore(c plugins.Ctx, i int, name []byte) bool {
	for j := range i {
		if n, _, _ := c.RequestHeaderAt(j); bytes.EqualFold(n, name) {
			return true
		}
	}
	return false
}

func appendLower(b, s []byte) []byte {
	for _, ch := range s {
		if 'A' <= ch && ch <= 'Z' {
			ch += 'a' - 'A'
		}
		b = append(b, ch)
	}
	return b
}
