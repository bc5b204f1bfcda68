package supervisor

import (
	"io"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"coregate/plugins"
	"coregate/worker/shm"
)

func init() {
	plugins.RegisterMetric(plugins.MetricFamily{Name: "test_requests", Help: "Requests.", Kind: plugins.Counter, Labels: []string{"code"}})
	plugins.RegisterMetric(plugins.MetricFamily{Name: "test_latency", Help: "Latency.", Kind: plugins.Histogram, Labels: []string{"type"}, SumScale: 1000})
}

// TestSeriesCollector: a scrape sums each series over the workers'
// regions (two entries of one series in one region, as a worker and its
// replacement may register, included), adds a histogram's buckets up into
// cumulative ones and its count, scales its sum, and leaves out series of
// unknown families or of the wrong number of labels.
func TestSeriesCollector(t *testing.T) {
	seg, err := shm.CreateMetrics(3, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	region := func(i int) *shm.Region {
		r, err := seg.Region(i)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	r0, r1, r2a, r2b := region(0), region(1), region(2), region(2)
	r0.Slot("test_requests", "200").Add(3)
	r1.Slot("test_requests", "200").Add(4)
	r1.Slot("test_requests", "404").Add(1)
	r2a.Slot("test_requests", "200").Add(5)
	r2b.Slot("test_requests", "200").Add(6)
	r0.Slot("test_latency_bucket", "request", "1").Add(2)
	r0.Slot("test_latency_bucket", "request", "+Inf").Add(1)
	r0.Slot("test_latency_sum", "request").Add(2500)
	r1.Slot("test_latency_bucket", "request", "5").Add(1)
	r1.Slot("test_latency_sum", "request").Add(4000)
	r1.Slot("nobody_knows", "x").Add(1)
	r1.Slot("test_requests", "200", "extra").Add(100)
	r2a.Slot("test_latency_bucket", "request").Add(100) // no le

	reg := prometheus.NewRegistry()
	reg.MustRegister(&seriesCollector{seg: seg.MetricsMap})
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	want := []string{
		`# TYPE test_requests counter`,
		`test_requests{code="200"} 18`,
		`test_requests{code="404"} 1`,
		`# TYPE test_latency histogram`,
		`test_latency_bucket{type="request",le="1"} 2`,
		`test_latency_bucket{type="request",le="5"} 3`,
		`test_latency_bucket{type="request",le="+Inf"} 4`,
		`test_latency_sum{type="request"} 6.5`,
		`test_latency_count{type="request"} 4`,
		`coregate_metrics_series{worker="0"} 4`,
		`coregate_metrics_series{worker="1"} 6`,
		`coregate_metrics_series{worker="2"} 3`,
		`coregate_metrics_series_dropped_total 0`,
	}
	for range 2 { // a second scrape reads the same
		resp, err := srv.Client().Get(srv.URL)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		var got []string
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "test_") || strings.HasPrefix(line, "coregate_") || strings.HasPrefix(line, "nobody") ||
				strings.HasPrefix(line, "# TYPE test_") {
				got = append(got, line)
			}
		}
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
			t.Fatalf("scrape (-want +got):\n%s\n%s", diff, b)
		}
	}
}
