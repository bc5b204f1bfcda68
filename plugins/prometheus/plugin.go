package prometheus

import (
	_ "embed"
	"encoding/json"
	"strconv"
	"sync/atomic"
	"time"

	"coregate/plugins"
)

// Name is the plugin's APISIX name.
const Name = "prometheus"

//go:embed schema.json
var schema []byte

// The metric families and their labels, as exporter.lua declares them.
const (
	StatusMetric    = "apisix_http_status"
	LatencyMetric   = "apisix_http_latency"
	BandwidthMetric = "apisix_bandwidth"
)

var (
	statusLabels = []string{"code", "route", "matched_uri", "matched_host", "service", "consumer", "node",
		"request_type", "request_llm_model", "llm_model", "response_source"}
	latencyLabels = []string{"type", "route", "service", "consumer", "node",
		"request_type", "request_llm_model", "llm_model"}
)

// Buckets are APISIX's latency buckets, in milliseconds.
var Buckets = []float64{1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 30000, 60000}

func init() {
	plugins.Register(Name, Plugin{})
	plugins.RegisterMetric(plugins.MetricFamily{Name: StatusMetric, Kind: plugins.Counter,
		Help: "HTTP status codes per service in APISIX", Labels: statusLabels})
	plugins.RegisterMetric(plugins.MetricFamily{Name: LatencyMetric, Kind: plugins.Histogram,
		Help: "HTTP request latency in milliseconds per service in APISIX", Labels: latencyLabels, SumScale: 1000})
	plugins.RegisterMetric(plugins.MetricFamily{Name: BandwidthMetric, Kind: plugins.Counter,
		Help: "Total bandwidth in bytes consumed per service in APISIX", Labels: latencyLabels})
}

// Plugin is prometheus's implementation.
type Plugin struct{}

var _ plugins.Plugin = Plugin{}

// Schema implements plugins.Plugin: APISIX's schema.
func (Plugin) Schema() []byte { return schema }

type conf struct {
	PreferName bool `json:"prefer_name"`
}

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(raw json.RawMessage) error {
	var c conf
	return json.Unmarshal(raw, &c)
}

// Build implements plugins.Plugin. With no Metrics in env (a check of the
// configuration), the instance counts in a table of its own.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	var c conf
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	m := env.Metrics
	if m == nil {
		m = plugins.NewMetricTable(plugins.LocalSeries)
	}
	in := &Instance{metrics: m, preferName: c.PreferName,
		status: map[string]*atomic.Uint64{}, lat: map[string]*latSeries{}}
	in.le = make([]string, len(Buckets)+1)
	for i, b := range Buckets {
		in.le[i] = strconv.FormatFloat(b, 'f', -1, 64)
	}
	in.le[len(Buckets)] = "+Inf"
	return in, nil
}

// maxCached bounds each of an instance's caches of label sets.
const maxCached = 4096

// Latency types and bandwidth directions, in the order of latSeries.
var (
	latencyTypes   = [3]string{"request", "upstream", "apisix"}
	bandwidthTypes = [2]string{"ingress", "egress"}
)

const requestType = "traditional_http"

// Instance is one configuration of the plugin: its log phase, and the
// slots of the label sets it has seen.
type Instance struct {
	metrics    plugins.Metrics
	preferName bool
	le         []string // the buckets' upper bounds as label values

	// buf holds the label values of the request being logged, and the
	// caches map them to their slots; both are the event loop's. buf is
	// valid during one Log call.
	buf    []byte
	status map[string]*atomic.Uint64
	lat    map[string]*latSeries
}

var _ plugins.LogPhase = (*Instance)(nil)

// latSeries are the slots of one label set (route, service, consumer,
// node) of apisix_http_latency (each type's buckets and sum) and
// apisix_bandwidth (each direction). A nil slot is a series Metrics
// refused.
type latSeries struct {
	hist [3]histSlots
	bw   [2]*atomic.Uint64
}

type histSlots struct {
	buckets []*atomic.Uint64 // len(Buckets)+1, the last +Inf; nil until taken
	sum     *atomic.Uint64   // microseconds
}

// labels are one request's label values, aliasing the request (valid
// during Log).
type labels struct {
	route, uri, host, service, consumer, node, source []byte
}

// Log implements plugins.LogPhase.
func (in *Instance) Log(c plugins.Ctx) {
	e := c.Exchange()
	var l labels
	l.route = c.Var("route_id")
	l.service = c.Var("service_id")
	if in.preferName {
		if n := c.Var("route_name"); len(n) > 0 {
			l.route = n
		}
		if n := c.Var("service_name"); len(l.service) > 0 && len(n) > 0 {
			l.service = n
		}
	}
	l.uri = c.Var("matched_uri")
	l.host = c.Var("matched_host")
	l.consumer = c.Var("consumer_name")
	l.node = c.Var("balancer_ip")
	switch {
	case e.Upstreamed:
		l.source = srcUpstream
	case e.Proxied:
		l.source = srcNginx
	default:
		l.source = srcAPISIX
	}

	// apisix_http_status
	b := strconv.AppendInt(in.buf[:0], int64(c.Status()), 10)
	for _, v := range [...][]byte{l.route, l.uri, l.host, l.service, l.consumer, l.node, l.source} {
		b = append(append(b, 0), v...)
	}
	in.buf = b
	st, ok := in.status[string(b)]
	if !ok {
		st = in.metrics.Slot(StatusMetric, strconv.Itoa(c.Status()), string(l.route), string(l.uri),
			string(l.host), string(l.service), string(l.consumer), string(l.node), requestType, "", "", string(l.source))
		if len(in.status) < maxCached {
			in.status[string(b)] = st
		}
	}
	if st != nil {
		st.Add(1)
	}

	// apisix_http_latency and apisix_bandwidth
	b = append(in.buf[:0], l.route...)
	for _, v := range [...][]byte{l.service, l.consumer, l.node} {
		b = append(append(b, 0), v...)
	}
	in.buf = b
	ls, ok := in.lat[string(b)]
	if !ok {
		ls = in.latSlots(&l)
		if len(in.lat) < maxCached {
			in.lat[string(b)] = ls
		}
	}
	total := e.RequestTime
	in.observe(&ls.hist[0], 0, &l, total)
	own := total
	if e.Proxied {
		in.observe(&ls.hist[1], 1, &l, e.UpstreamTime)
		own = max(total-e.UpstreamTime, 0)
	}
	in.observe(&ls.hist[2], 2, &l, own)
	if s := ls.bw[0]; s != nil {
		s.Add(uint64(max(e.RequestLength, 0)))
	}
	if s := ls.bw[1]; s != nil {
		s.Add(uint64(max(e.BytesSent, 0)))
	}
}

var (
	srcUpstream = []byte("upstream")
	srcNginx    = []byte("nginx")
	srcAPISIX   = []byte("apisix")
)

// observe counts d in h, the histogram of latency type t for labels l:
// its bucket (the first whose bound, in ms, is at least d) and its sum.
// The slots are taken on the first observation, so that a route that
// never reaches an upstream has no upstream latency series.
func (in *Instance) observe(h *histSlots, t int, l *labels, d time.Duration) {
	if h.buckets == nil {
		in.histSlots(h, t, l)
	}
	ms := float64(d) / float64(time.Millisecond)
	i := 0
	for i < len(Buckets) && ms > Buckets[i] {
		i++
	}
	if s := h.buckets[i]; s != nil {
		s.Add(1)
	}
	if h.sum != nil {
		h.sum.Add(uint64(max(d/time.Microsecond, 0)))
	}
}

// latSlots takes the slots of a new label set (allocates).
func (in *Instance) latSlots(l *labels) *latSeries {
	route, service, consumer, node := string(l.route), string(l.service), string(l.consumer), string(l.node)
	ls := &latSeries{}
	for d, typ := range bandwidthTypes {
		ls.bw[d] = in.metrics.Slot(BandwidthMetric, typ, route, service, consumer, node, requestType, "", "")
	}
	return ls
}

// histSlots takes the slots of latency type t's histogram for labels l
// (allocates).
func (in *Instance) histSlots(h *histSlots, t int, l *labels) {
	typ, route, service, consumer, node := latencyTypes[t], string(l.route), string(l.service), string(l.consumer), string(l.node)
	h.buckets = make([]*atomic.Uint64, len(in.le))
	for i, le := range in.le {
		h.buckets[i] = in.metrics.Slot(LatencyMetric+"_bucket", typ, route, service, consumer, node, requestType, "", "", le)
	}
	h.sum = in.metrics.Slot(LatencyMetric+"_sum", typ, route, service, consumer, node, requestType, "", "")
}
