package supervisor

import (
	"cmp"
	"slices"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// apisixPrefix is the head of APISIX's metric names, which
// plugin_attr.prometheus.metric_prefix replaces.
const apisixPrefix = "apisix_"

// SetMetricPrefix sets what replaces apisix_ at the head of the APISIX
// metric names the export server serves (plugin_attr.prometheus's
// metric_prefix: apisix_http_status is served as <prefix>http_status);
// coregate's own (coregate_…) keep their names. It may be called at any
// time, from any goroutine: the next scrape uses it.
func (s *Supervisor) SetMetricPrefix(prefix string) {
	s.metricPrefix.Store(&prefix)
}

// SetExtraLabels sets the labels the export server serves after a
// plugin family's registered ones, by family name
// (plugin_attr.prometheus.metrics.<metric>.extra_labels: the workers
// write their values last in the series' labels). A series whose labels
// do not fit is left out. Like SetMetricPrefix it may be called at any
// time; m is not modified afterwards.
func (s *Supervisor) SetExtraLabels(m map[string][]string) {
	s.extra.Store(&m)
}

// extraLabels is what SetExtraLabels set last; nil when nothing.
func (s *Supervisor) extraLabels() map[string][]string {
	if m := s.extra.Load(); m != nil {
		return *m
	}
	return nil
}

// prefixed is g with the APISIX families renamed by the metric prefix.
func (s *Supervisor) prefixed(g prometheus.Gatherer) prometheus.Gatherer {
	return prometheus.GathererFunc(func() ([]*dto.MetricFamily, error) {
		mfs, err := g.Gather()
		p := s.metricPrefix.Load()
		if p == nil || *p == apisixPrefix {
			return mfs, err
		}
		for _, mf := range mfs {
			if rest, ok := strings.CutPrefix(mf.GetName(), apisixPrefix); ok {
				name := *p + rest
				mf.Name = &name
			}
		}
		slices.SortFunc(mfs, func(a, b *dto.MetricFamily) int { return cmp.Compare(a.GetName(), b.GetName()) })
		return mfs, err
	})
}
