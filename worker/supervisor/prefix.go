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
