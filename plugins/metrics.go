package plugins

import (
	"fmt"
	"sync"
)

// MetricKind is what a metric family is to Prometheus.
type MetricKind uint8

// The kinds of metric family.
const (
	Counter MetricKind = iota
	Gauge
	Histogram
)

// MetricFamily describes the series a plugin takes from Metrics under one
// name, so that the exporter, which reads every worker's slots, can serve
// them: a plugin registers its families in its init function, and the
// exporter serves the series of registered families only.
//
// A counter's or gauge's series is Slot(Name, values...), with one value
// per label of Labels. A histogram's series are its buckets' counts, not
// cumulative, Slot(Name+"_bucket", values..., le) with le the bucket's
// upper bound as text ("+Inf" for the last), and the sum of its
// observations, Slot(Name+"_sum", values...), counted in units of
// 1/SumScale (an observation of 1.5 ms in a histogram of SumScale 1000
// adds 1500): the exporter adds the buckets up into Prometheus's
// cumulative ones and the count.
type MetricFamily struct {
	Name, Help string
	Kind       MetricKind
	Labels     []string
	// SumScale is a histogram's unit of sum; 0 means 1.
	SumScale float64
}

var metricFamilies struct {
	sync.RWMutex
	m map[string]MetricFamily
}

// RegisterMetric registers a metric family; it panics when the name is
// taken.
func RegisterMetric(f MetricFamily) {
	metricFamilies.Lock()
	defer metricFamilies.Unlock()
	if metricFamilies.m == nil {
		metricFamilies.m = map[string]MetricFamily{}
	}
	if _, ok := metricFamilies.m[f.Name]; ok {
		panic(fmt.Sprintf("plugins: metric %s registered twice", f.Name))
	}
	if f.SumScale == 0 {
		f.SumScale = 1
	}
	metricFamilies.m[f.Name] = f
}

// LookupMetric returns the registered family of name.
func LookupMetric(name string) (MetricFamily, bool) {
	metricFamilies.RLock()
	defer metricFamilies.RUnlock()
	f, ok := metricFamilies.m[name]
	return f, ok
}
