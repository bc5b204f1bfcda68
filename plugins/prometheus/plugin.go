package prometheus

import (
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"coregate/httpvar"
	"coregate/plugins"
)

// Name is the plugin's APISIX name.
const Name = "prometheus"

//go:embed schema.json
var schema []byte

//go:embed metadata_schema.json
var metadataSchema []byte

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

// Buckets are APISIX's latency buckets, in milliseconds: those of
// apisix_http_latency unless plugin_attr.prometheus.default_buckets says
// otherwise.
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

var (
	_ plugins.Plugin               = Plugin{}
	_ plugins.MetadataSchemaPlugin = Plugin{}
)

// Schema implements plugins.Plugin: APISIX's schema.
func (Plugin) Schema() []byte { return schema }

// MetadataSchema implements plugins.MetadataSchemaPlugin: APISIX's
// metadata_schema, {"disabled_labels": {<metric>: [<label>, …]}}.
func (Plugin) MetadataSchema() []byte { return metadataSchema }

type conf struct {
	PreferName bool `json:"prefer_name"`
}

// Check implements plugins.Plugin: the schema says it all.
func (Plugin) Check(raw json.RawMessage) error {
	var c conf
	return json.Unmarshal(raw, &c)
}

// Build implements plugins.Plugin. With no Metrics in env (a check of the
// configuration), the instance counts in a table of its own. The labels
// the plugin's metadata disables (env.Metadata) and the latency buckets
// of plugin_attr (env.Attr) are read here.
func (Plugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	var c conf
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	m := env.Metrics
	if m == nil {
		m = plugins.NewMetricTable(plugins.LocalSeries)
	}
	in := &Instance{metrics: m, preferName: c.PreferName, buckets: Buckets,
		status: map[string]*atomic.Uint64{}, lat: map[string]*latSeries{}}
	if md := env.Metadata.Of(Name); md != nil {
		var mc metadata
		if err := json.Unmarshal(md, &mc); err != nil {
			return nil, fmt.Errorf("plugin metadata: %w", err)
		}
		in.offStatus = disabled(mc.DisabledLabels["http_status"])
		in.offLatency = disabled(mc.DisabledLabels["http_latency"])
		in.offBandwidth = disabled(mc.DisabledLabels["bandwidth"])
	}
	if a := env.Attr.Of(Name); a != nil {
		var ac attr
		if err := json.Unmarshal(a, &ac); err != nil {
			return nil, fmt.Errorf("plugin_attr.prometheus: %w", err)
		}
		if len(ac.DefaultBuckets) > 0 {
			if err := CheckBuckets(ac.DefaultBuckets); err != nil {
				return nil, fmt.Errorf("plugin_attr.prometheus.default_buckets: %w", err)
			}
			in.buckets = ac.DefaultBuckets
		}
		for f, metric := range extraMetrics {
			for i, kv := range ac.Metrics[metric].ExtraLabels {
				if len(kv) != 1 {
					return nil, fmt.Errorf("plugin_attr.prometheus.metrics.%s.extra_labels[%d]: want {name: $variable}", metric, i)
				}
				for _, v := range kv {
					in.extra[f] = append(in.extra[f], httpvar.Parse(strings.TrimPrefix(v, "$")))
				}
			}
		}
		in.xv = make([][]byte, 0, len(in.extra[0])+len(in.extra[1])+len(in.extra[2]))
	}
	in.le = make([]string, len(in.buckets)+1)
	for i, b := range in.buckets {
		in.le[i] = strconv.FormatFloat(b, 'f', -1, 64)
	}
	in.le[len(in.buckets)] = "+Inf"
	return in, nil
}

// metadata is the plugin's metadata.
type metadata struct {
	DisabledLabels map[string][]string `json:"disabled_labels"`
}

// attr is what the plugin reads of plugin_attr.prometheus.
type attr struct {
	DefaultBuckets []float64 `json:"default_buckets"`
	Metrics        map[string]struct {
		ExtraLabels []map[string]string `json:"extra_labels"`
	} `json:"metrics"`
}

// The families that take extra labels (metrics.<metric>.extra_labels),
// in the order of Instance.extra.
const (
	fStatus = iota
	fLatency
	fBandwidth
)

var extraMetrics = [...]string{fStatus: "http_status", fLatency: "http_latency", fBandwidth: "bandwidth"}

// CheckBuckets checks histogram buckets: at least one, finite, strictly
// increasing (as the Prometheus client requires).
func CheckBuckets(b []float64) error {
	if len(b) == 0 {
		return errors.New("want at least one bucket")
	}
	for i, v := range b {
		if math.IsInf(v, 0) || math.IsNaN(v) {
			return fmt.Errorf("bucket %v is not a finite number", v)
		}
		if i > 0 && v <= b[i-1] {
			return fmt.Errorf("buckets must be in increasing order, got %v after %v", v, b[i-1])
		}
	}
	return nil
}

// The labels that vary per request, as bits of a mask: one request's
// values are an array indexed by them.
const (
	lRoute = iota
	lURI
	lHost
	lService
	lConsumer
	lNode
	lRequestType
	lRequestModel
	lModel
	lSource
	numLabels
)

// labelBits are the labels that disabled_labels may name and their bits
// (the structural code and type are not among them).
var labelBits = map[string]uint16{
	"route": 1 << lRoute, "matched_uri": 1 << lURI, "matched_host": 1 << lHost, "service": 1 << lService,
	"consumer": 1 << lConsumer, "node": 1 << lNode, "request_type": 1 << lRequestType,
	"request_llm_model": 1 << lRequestModel, "llm_model": 1 << lModel, "response_source": 1 << lSource,
}

// disabled is the mask of the labels named.
func disabled(names []string) uint16 {
	var m uint16
	for _, n := range names {
		m |= labelBits[n]
	}
	return m
}

// maxCached bounds each of an instance's caches of label sets.
const maxCached = 4096

// Latency types and bandwidth directions, in the order of latSeries.
var (
	latencyTypes   = [3]string{"request", "upstream", "apisix"}
	bandwidthTypes = [2]string{"ingress", "egress"}
)

// Instance is one configuration of the plugin: its log phase, and the
// slots of the label sets it has seen.
type Instance struct {
	metrics    plugins.Metrics
	preferName bool
	buckets    []float64 // apisix_http_latency's upper bounds, in ms
	le         []string  // buckets as label values, then "+Inf"
	// The labels disabled_labels collapses to "" in each family (bits of
	// lRoute…).
	offStatus, offLatency, offBandwidth uint16
	// extra are the variables of each family's extra labels (fStatus…),
	// and xv their values for the request being logged, the families' in
	// turn: the event loop's, valid during one Log call.
	extra [3][]httpvar.Var
	xv    [][]byte

	// buf holds the label values of the request being logged, and the
	// caches map them to their slots; both are the event loop's. buf is
	// valid during one Log call.
	buf    []byte
	status map[string]*atomic.Uint64
	lat    map[string]*latSeries
}

var _ plugins.LogPhase = (*Instance)(nil)

// latSeries are the slots of one label set (route, service, consumer,
// node, request_type, those that either family keeps) of apisix_http_latency (each type's buckets and sum) and
// apisix_bandwidth (each direction). A nil slot is a series Metrics
// refused.
type latSeries struct {
	hist [3]histSlots
	bw   [2]*atomic.Uint64
}

type histSlots struct {
	buckets []*atomic.Uint64 // len(Instance.le), the last +Inf; nil until taken
	sum     *atomic.Uint64   // microseconds
}

// labels are one request's label values, indexed by lRoute…, aliasing
// the request (valid during Log).
type labels [numLabels][]byte

// masked is l with the labels of off emptied.
func (l *labels) masked(off uint16) labels {
	m := *l
	if off != 0 {
		for i := range m {
			if off&(1<<i) != 0 {
				m[i] = nil
			}
		}
	}
	return m
}

// Label orders of the cache keys.
var (
	statusOrder = [...]uint8{lRoute, lURI, lHost, lService, lConsumer, lNode, lRequestType, lRequestModel, lModel, lSource}
	latOrder    = [...]uint8{lRoute, lService, lConsumer, lNode, lRequestType, lRequestModel, lModel}
)

// Log implements plugins.LogPhase.
func (in *Instance) Log(c plugins.Ctx) {
	e := c.Exchange()
	var l labels
	l[lRoute] = c.Var(httpvar.Var{Kind: httpvar.RouteID})
	l[lService] = c.Var(httpvar.Var{Kind: httpvar.ServiceID})
	if in.preferName {
		if n := c.Var(httpvar.Var{Kind: httpvar.RouteName}); len(n) > 0 {
			l[lRoute] = n
		}
		if n := c.Var(httpvar.Var{Kind: httpvar.ServiceName}); len(l[lService]) > 0 && len(n) > 0 {
			l[lService] = n
		}
	}
	l[lURI] = c.Var(httpvar.Var{Kind: httpvar.MatchedURI})
	l[lHost] = c.Var(httpvar.Var{Kind: httpvar.MatchedHost})
	l[lConsumer] = c.Var(httpvar.Var{Kind: httpvar.ConsumerName})
	l[lNode] = c.Var(httpvar.Var{Kind: httpvar.BalancerIP})
	l[lRequestType] = requestType
	switch {
	case e.Upstreamed:
		l[lSource] = srcUpstream
	case e.Proxied:
		l[lSource] = srcNginx
	default:
		l[lSource] = srcAPISIX
	}

	xv := in.xv[:0]
	for _, vars := range in.extra {
		for _, v := range vars {
			xv = append(xv, c.Var(v))
		}
	}
	in.xv = xv
	ns, nl := len(in.extra[fStatus]), len(in.extra[fLatency])
	xs, xl, xb := xv[:ns], xv[ns:ns+nl], xv[ns+nl:]

	// apisix_http_status
	sl := l.masked(in.offStatus)
	b := strconv.AppendInt(in.buf[:0], int64(c.Status()), 10)
	for _, i := range statusOrder {
		b = append(append(b, 0), sl[i]...)
	}
	for _, v := range xs {
		b = append(append(b, 0), v...)
	}
	in.buf = b
	st, ok := in.status[string(b)]
	if !ok {
		vals := []string{strconv.Itoa(c.Status()), string(sl[lRoute]), string(sl[lURI]),
			string(sl[lHost]), string(sl[lService]), string(sl[lConsumer]), string(sl[lNode]),
			string(sl[lRequestType]), string(sl[lRequestModel]), string(sl[lModel]), string(sl[lSource])}
		st = in.metrics.Slot(StatusMetric, appendStrings(vals, xs)...)
		if len(in.status) < maxCached {
			in.status[string(b)] = st
		}
	}
	if st != nil {
		st.Add(1)
	}

	// apisix_http_latency and apisix_bandwidth: one cache entry for the
	// labels either keeps.
	kl := l.masked(in.offLatency & in.offBandwidth)
	b = in.buf[:0]
	for j, i := range latOrder {
		if j > 0 {
			b = append(b, 0)
		}
		b = append(b, kl[i]...)
	}
	for _, v := range xv[ns:] {
		b = append(append(b, 0), v...)
	}
	in.buf = b
	ls, ok := in.lat[string(b)]
	if !ok {
		ls = in.latSlots(&kl, xb)
		if len(in.lat) < maxCached {
			in.lat[string(b)] = ls
		}
	}
	total := e.RequestTime
	in.observe(&ls.hist[0], 0, &kl, xl, total)
	own := total
	if e.Proxied {
		in.observe(&ls.hist[1], 1, &kl, xl, e.UpstreamTime)
		own = max(total-e.UpstreamTime, 0)
	}
	in.observe(&ls.hist[2], 2, &kl, xl, own)
	if s := ls.bw[0]; s != nil {
		s.Add(uint64(max(e.RequestLength, 0)))
	}
	if s := ls.bw[1]; s != nil {
		s.Add(uint64(max(e.BytesSent, 0)))
	}
}

var requestType = []byte("traditional_http")

var (
	srcUpstream = []byte("upstream")
	srcNginx    = []byte("nginx")
	srcAPISIX   = []byte("apisix")
)

// observe counts d in h, the histogram of latency type t for labels l:
// its bucket (the first whose bound, in ms, is at least d) and its sum;
// extra are the values of its extra labels.
// The slots are taken on the first observation, so that a route that
// never reaches an upstream has no upstream latency series.
func (in *Instance) observe(h *histSlots, t int, l *labels, extra [][]byte, d time.Duration) {
	if h.buckets == nil {
		in.histSlots(h, t, l, extra)
	}
	ms := float64(d) / float64(time.Millisecond)
	i := 0
	for i < len(in.buckets) && ms > in.buckets[i] {
		i++
	}
	if s := h.buckets[i]; s != nil {
		s.Add(1)
	}
	if h.sum != nil {
		h.sum.Add(uint64(max(d/time.Microsecond, 0)))
	}
}

// latSlots takes the bandwidth slots of a new label set, extra the values
// of bandwidth's extra labels (allocates).
func (in *Instance) latSlots(l *labels, extra [][]byte) *latSeries {
	v := l.masked(in.offBandwidth)
	ls := &latSeries{}
	for d, typ := range bandwidthTypes {
		vals := []string{typ, string(v[lRoute]), string(v[lService]), string(v[lConsumer]),
			string(v[lNode]), string(v[lRequestType]), string(v[lRequestModel]), string(v[lModel])}
		ls.bw[d] = in.metrics.Slot(BandwidthMetric, appendStrings(vals, extra)...)
	}
	return ls
}

// appendStrings appends the values of bs to vals, as strings.
func appendStrings(vals []string, bs [][]byte) []string {
	for _, b := range bs {
		vals = append(vals, string(b))
	}
	return vals
}

// histSlots takes the slots of latency type t's histogram for labels l
// and extra labels extra (allocates).
func (in *Instance) histSlots(h *histSlots, t int, l *labels, extra [][]byte) {
	v := l.masked(in.offLatency)
	vals := appendStrings([]string{latencyTypes[t], string(v[lRoute]), string(v[lService]), string(v[lConsumer]),
		string(v[lNode]), string(v[lRequestType]), string(v[lRequestModel]), string(v[lModel])}, extra)
	h.buckets = make([]*atomic.Uint64, len(in.le))
	for i, le := range in.le {
		h.buckets[i] = in.metrics.Slot(LatencyMetric+"_bucket", append(vals[:len(vals):len(vals)], le)...)
	}
	h.sum = in.metrics.Slot(LatencyMetric+"_sum", vals...)
}
