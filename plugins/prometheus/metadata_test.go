package prometheus

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// buildEnv builds the plugin's phases with the metadata md and
// plugin_attr.prometheus attr ("" for none).
func buildEnv(t *testing.T, m plugins.Metrics, md, attr string) *plugins.Phases {
	t.Helper()
	env := plugins.Env{Metrics: m}
	if md != "" {
		s, err := plugins.Default.IndexMetadata([]json.RawMessage{json.RawMessage(md)})
		if err != nil {
			t.Fatal(err)
		}
		env.Metadata = s
	}
	if attr != "" {
		env.Attr = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(attr)})
	}
	p, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(`{}`)}, env)
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

// TestDisabledLabels: the labels the metadata disables are written "" in
// their family only (t/plugin/prometheus-label-filter.t): with route,
// consumer and node disabled, a thousand routes make one series of each.
func TestDisabledLabels(t *testing.T) {
	m := plugins.NewMetricTable(plugins.LocalSeries)
	p := buildEnv(t, m, `{"id":"prometheus","disabled_labels":{
		"http_status":["route","node","consumer","matched_uri"],
		"http_latency":["route","node","consumer"],
		"bandwidth":["node"]}}`, "")
	const routes = 1000
	for i := range routes {
		c := plugintest.NewCtx("GET", "/hello").WithVar("route_id", "r"+itoa(i)).
			WithVar("matched_uri", "/u"+itoa(i)).WithVar("balancer_ip", "10.0.0."+itoa(i%250)).
			WithVar("consumer_name", "c"+itoa(i)).WithVar("service_id", "s1")
		c.Figures = plugins.Exchange{RequestTime: 3 * time.Millisecond, Proxied: true, Upstreamed: true,
			UpstreamTime: time.Millisecond, RequestLength: 10, BytesSent: 20}
		plugintest.Run(p, c)
	}
	st := []string{"200", "", "", "", "s1", "", "", "traditional_http", "", "", "upstream"}
	if got := m.Value(StatusMetric, st...); got != routes {
		t.Fatalf("apisix_http_status{route=\"\",...} = %d, want %d", got, routes)
	}
	lat := []string{"request", "", "s1", "", "", "traditional_http", "", "", "5"}
	if got := m.Value(LatencyMetric+"_bucket", lat...); got != routes {
		t.Fatalf("apisix_http_latency_bucket{route=\"\",le=5} = %d, want %d", got, routes)
	}
	// bandwidth keeps route and consumer: one series per route.
	if got := m.Value(BandwidthMetric, "ingress", "r7", "s1", "c7", "", "traditional_http", "", ""); got != 10 {
		t.Fatalf("apisix_bandwidth of r7 = %d, want 10", got)
	}
	// Series: 1 status, 3 latency types × (16 buckets + sum), 2 × routes bandwidth.
	series := 0
	for _, name := range []string{StatusMetric, LatencyMetric + "_bucket", LatencyMetric + "_sum", BandwidthMetric} {
		series += m.Count(name)
	}
	if want := 1 + 3*(len(Buckets)+2) + 2*routes; series != want {
		t.Fatalf("%d series, want %d", series, want)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestMetadataSchema: APISIX's metadata_schema and its messages
// (t/plugin/prometheus-label-filter.t TEST 6, 7).
func TestMetadataSchema(t *testing.T) {
	for _, tc := range []struct{ md, want string }{
		{`{"disabled_labels":{"http_status":["node","route"],"llm_latency":["llm_model"]}}`, ""},
		{`{}`, ""},
		{`{"disabled_labels":{"http_status":["code"]}}`, "failed to validate item 1"},
		{`{"disabled_labels":{"http_latency":["type"]}}`, "failed to validate item 1"},
		{`{"disabled_labels":{"unknown_metric":["node"]}}`, "additional properties forbidden"},
		{`{"disabled_labels":{"http_status":"node"}}`, "wrong type"},
	} {
		err := plugins.Default.CheckMetadata(Name, json.RawMessage(tc.md))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.md, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want %q", tc.md, err, tc.want)
		}
	}
}

// TestDefaultBuckets: plugin_attr.prometheus.default_buckets are
// apisix_http_latency's buckets.
func TestDefaultBuckets(t *testing.T) {
	m := plugins.NewMetricTable(1000)
	p := buildEnv(t, m, "", `{"default_buckets":[10,50.5,100],"export_uri":"/m"}`)
	c := proxied()
	plugintest.Run(p, c) // request 30 ms, upstream 25 ms, apisix 5 ms
	for _, x := range []struct {
		typ, le string
		want    uint64
	}{{"request", "50.5", 1}, {"upstream", "50.5", 1}, {"apisix", "10", 1}, {"request", "10", 0}, {"request", "+Inf", 0}} {
		if got := m.Value(LatencyMetric+"_bucket", latency(x.typ, "r1", x.le)...); got != x.want {
			t.Errorf("%s le=%s: %d, want %d", x.typ, x.le, got, x.want)
		}
	}
	if n := m.Count(LatencyMetric + "_bucket"); n != 3*4 {
		t.Errorf("%d bucket series, want 12", n)
	}
	for _, bad := range []string{`{"default_buckets":[10,5]}`, `{"default_buckets":"x"}`} {
		_, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(`{}`)},
			plugins.Env{Attr: plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(bad)})})
		if err == nil {
			t.Errorf("%s: built", bad)
		}
	}
}

// TestExtraLabels: plugin_attr.prometheus.metrics.<metric>.extra_labels
// add labels after APISIX's, each a variable's value ("" when unset).
func TestExtraLabels(t *testing.T) {
	m := plugins.NewMetricTable(1000)
	p := buildEnv(t, m, `{"id":"prometheus","disabled_labels":{"http_status":["node"]}}`, `{"metrics":{
		"http_status":{"extra_labels":[{"upstream_addr":"$upstream_addr"},{"method":"$request_method"}]},
		"http_latency":{"extra_labels":[{"who":"$consumer_name"}]},
		"bandwidth":{"extra_labels":[{"unset":"$arg_nothing"}]}}}`)
	c := proxied().WithVar("upstream_addr", "127.0.0.1:1980").WithVar("request_method", "GET")
	for range 2 {
		c.Reset()
		plugintest.Run(p, c)
	}
	status := []string{"200", "r1", "/hello", "example.com", "s1", "jack", "", "traditional_http", "", "", "upstream",
		"127.0.0.1:1980", "GET"}
	if got := m.Value(StatusMetric, status...); got != 2 {
		t.Errorf("apisix_http_status %v = %d, want 2", status, got)
	}
	lat := append(latency("request", "r1", "")[:8], "jack", "50")
	if got := m.Value(LatencyMetric+"_bucket", lat...); got != 2 {
		t.Errorf("apisix_http_latency_bucket %v = %d, want 2", lat, got)
	}
	bw := append(latency("ingress", "r1", "")[:8], "")
	if got := m.Value(BandwidthMetric, bw...); got != 200 {
		t.Errorf("apisix_bandwidth %v = %d, want 200", bw, got)
	}
	if n := m.Count(StatusMetric); n != 1 {
		t.Errorf("%d status series, want 1", n)
	}
}
