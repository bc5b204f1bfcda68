package supervisor

import (
	"cmp"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"coregate/plugins"
	"coregate/worker/shm"
)

// seriesCollector serves the plugins' metrics (prometheus's
// apisix_http_status, apisix_http_latency, apisix_bandwidth): at each
// scrape it reads every worker slot's region of the metrics segment and
// sums each series over the regions, so that the node's figures are the
// sum of its workers', those that died included. It reads the shared
// memory without a lock: a scrape never holds up a worker. Series of
// families no plugin registered (plugins.RegisterMetric), or whose label
// values do not fit their family, are left out.
//
// It is an unchecked collector (Describe sends nothing): its families
// are known only once workers have registered series.
type seriesCollector struct {
	seg *shm.MetricsMap
	// extra gives the extra labels of each family (by name), served after
	// its registered ones (SetExtraLabels); nil for none.
	extra func() map[string][]string

	mu    sync.Mutex // one scrape at a time uses buf and descs
	buf   []byte
	descs map[string]*prometheus.Desc
}

var (
	seriesDesc = prometheus.NewDesc("coregate_metrics_series",
		"Metric series registered in each worker's region of shared memory.", []string{"worker"}, nil)
	droppedDesc = prometheus.NewDesc("coregate_metrics_series_dropped_total",
		"Metric series not counted because their worker's region was full (shm.DefaultSeries per worker).", nil, nil)
)

func (c *seriesCollector) Describe(chan<- *prometheus.Desc) {}

// histSeries is one histogram series being summed: its buckets' counts
// by upper bound (not cumulative) and its sum.
type histSeries struct {
	fam     plugins.MetricFamily
	labels  []string
	buckets map[float64]uint64
	sum     uint64
}

func (c *seriesCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.descs == nil {
		c.descs = map[string]*prometheus.Desc{}
	}
	sums := map[string]uint64{}
	var dropped uint64
	for i := range c.seg.Regions() {
		n, d := c.seg.Usage(i)
		dropped += d
		if n == 0 {
			continue
		}
		ch <- prometheus.MustNewConstMetric(seriesDesc, prometheus.GaugeValue, float64(n), strconv.Itoa(i))
		c.buf = c.seg.Each(i, c.buf, func(key []byte, v uint64) { sums[string(key)] += v })
	}
	ch <- prometheus.MustNewConstMetric(droppedDesc, prometheus.CounterValue, float64(dropped))

	var extra map[string][]string
	if c.extra != nil {
		extra = c.extra()
	}
	hists := map[string]*histSeries{}
	for key, v := range sums {
		name, labels, ok := shm.SplitKey([]byte(key))
		if !ok {
			continue
		}
		if fam, ok := plugins.LookupMetric(name); ok && fam.Kind != plugins.Histogram {
			if len(labels) != len(fam.Labels)+len(extra[fam.Name]) {
				continue
			}
			vt := prometheus.CounterValue
			if fam.Kind == plugins.Gauge {
				vt = prometheus.GaugeValue
			}
			if m, err := prometheus.NewConstMetric(c.desc(fam, extra[fam.Name]), vt, float64(v), labels...); err == nil {
				ch <- m
			}
			continue
		}
		base, part, ok := cutHistogram(name)
		if !ok {
			continue
		}
		fam, ok := plugins.LookupMetric(base)
		if !ok || fam.Kind != plugins.Histogram {
			continue
		}
		var le float64
		n := len(fam.Labels) + len(extra[fam.Name])
		if part == "bucket" {
			if len(labels) != n+1 {
				continue
			}
			var err error
			if le, err = strconv.ParseFloat(labels[len(labels)-1], 64); err != nil {
				continue
			}
			labels = labels[:len(labels)-1]
		} else if len(labels) != n {
			continue
		}
		hk := base + "\x00" + strings.Join(labels, "\x00")
		h := hists[hk]
		if h == nil {
			h = &histSeries{fam: fam, labels: labels, buckets: map[float64]uint64{}}
			hists[hk] = h
		}
		if part == "bucket" {
			h.buckets[le] += v
		} else {
			h.sum += v
		}
	}
	for _, h := range hists {
		bounds := make([]float64, 0, len(h.buckets))
		for le := range h.buckets {
			bounds = append(bounds, le)
		}
		slices.SortFunc(bounds, cmp.Compare)
		var count uint64
		cum := make(map[float64]uint64, len(bounds))
		for _, le := range bounds {
			count += h.buckets[le]
			if !math.IsInf(le, 1) {
				cum[le] = count
			}
		}
		m, err := prometheus.NewConstHistogram(c.desc(h.fam, extra[h.fam.Name]), count, float64(h.sum)/h.fam.SumScale, cum, h.labels...)
		if err == nil {
			ch <- m
		}
	}
}

// desc is fam's Desc with the extra labels extra, made once.
func (c *seriesCollector) desc(fam plugins.MetricFamily, extra []string) *prometheus.Desc {
	key := fam.Name
	if len(extra) > 0 {
		key += "\x00" + strings.Join(extra, "\x00")
	}
	d := c.descs[key]
	if d == nil {
		d = prometheus.NewDesc(fam.Name, fam.Help, append(slices.Clip(fam.Labels), extra...), nil)
		c.descs[key] = d
	}
	return d
}

// cutHistogram splits a histogram's series name into its family's and
// the part ("bucket" or "sum").
func cutHistogram(name string) (base, part string, ok bool) {
	if b, ok := strings.CutSuffix(name, "_bucket"); ok {
		return b, "bucket", true
	}
	if b, ok := strings.CutSuffix(name, "_sum"); ok {
		return b, "sum", true
	}
	return "", "", false
}
