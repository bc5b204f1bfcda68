package prometheus

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t *testing.T, m plugins.Metrics, conf string) *plugins.Phases {
	t.Helper()
	env := plugins.Env{Metrics: m}
	p, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, env)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Names(plugins.Log); len(got) != 1 || got[0] != Name {
		t.Fatalf("log phase %v", got)
	}
	return &p
}

// proxied is a request of route r1 answered by its upstream.
func proxied() *plugintest.Ctx {
	c := plugintest.NewCtx("GET", "/hello").WithRoute("r1").
		WithVar("route_id", "r1").WithVar("route_name", "hello-route").
		WithVar("service_id", "s1").WithVar("service_name", "hello-svc").
		WithVar("matched_uri", "/hello").WithVar("matched_host", "example.com").
		WithVar("balancer_ip", "127.0.0.1").WithVar("consumer_name", "jack")
	c.Figures = plugins.Exchange{RequestTime: 30 * time.Millisecond, UpstreamTime: 25 * time.Millisecond,
		Proxied: true, Upstreamed: true, RequestLength: 100, BytesSent: 1200}
	return c
}

func latency(typ, route, le string) []string {
	return []string{typ, route, "s1", "jack", "127.0.0.1", "traditional_http", "", "", le}
}

// TestLog: each request counts once in apisix_http_status with exporter.lua's
// labels, its three latencies in their buckets and sums, and its bytes.
func TestLog(t *testing.T) {
	m := plugins.NewMetricTable(1000)
	p := build(t, m, `{}`)
	c := proxied()
	for range 3 {
		c.Reset()
		plugintest.Run(p, c)
	}
	c.UpstreamStatus = 503
	c.Reset()
	plugintest.Run(p, c)

	got := map[string]uint64{}
	read := func(name string, labels ...string) {
		got[name+" "+cmp.Diff(nil, labels)] = m.Value(name, labels...)
	}
	status := func(code string) []string {
		return []string{code, "r1", "/hello", "example.com", "s1", "jack", "127.0.0.1", "traditional_http", "", "", "upstream"}
	}
	want := map[string]uint64{}
	check := func(v uint64, name string, labels ...string) {
		want[name+" "+cmp.Diff(nil, labels)] = v
		read(name, labels...)
	}
	check(3, StatusMetric, status("200")...)
	check(1, StatusMetric, status("503")...)
	check(4, LatencyMetric+"_bucket", latency("request", "r1", "50")...)
	check(0, LatencyMetric+"_bucket", latency("request", "r1", "20")...)
	check(4*30000, LatencyMetric+"_sum", latency("request", "r1", "")[:8]...)
	check(4, LatencyMetric+"_bucket", latency("upstream", "r1", "50")...)
	check(4*25000, LatencyMetric+"_sum", latency("upstream", "r1", "")[:8]...)
	check(4, LatencyMetric+"_bucket", latency("apisix", "r1", "5")...)
	check(4*5000, LatencyMetric+"_sum", latency("apisix", "r1", "")[:8]...)
	check(400, BandwidthMetric, latency("ingress", "r1", "")[:8]...)
	check(4800, BandwidthMetric, latency("egress", "r1", "")[:8]...)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("series (-want +got):\n%s", diff)
	}
}

// TestNotProxied: a request answered without an upstream has no upstream
// latency, its apisix latency is the whole, and its source is apisix; one
// answered by the gateway after trying the upstream is nginx's.
func TestNotProxied(t *testing.T) {
	m := plugins.NewMetricTable(1000)
	p := build(t, m, `{}`)
	c := plugintest.NewCtx("GET", "/nowhere").WithRoute("") // no route matched
	c.UpstreamStatus = 404
	c.Figures = plugins.Exchange{RequestTime: 3 * time.Millisecond, RequestLength: 50, BytesSent: 200}
	plugintest.Run(p, c)
	none := []string{"", "", "", "", "traditional_http", "", ""}
	if v := m.Value(StatusMetric, "404", "", "", "", "", "", "", "traditional_http", "", "", "apisix"); v != 1 {
		t.Errorf("status 404: %d", v)
	}
	if v := m.Value(LatencyMetric+"_bucket", append(append([]string{"apisix"}, none...), "5")...); v != 1 {
		t.Errorf("apisix latency bucket 5: %d", v)
	}
	for _, le := range []string{"1", "5", "50", "1000", "60000", "+Inf"} {
		if v := m.Value(LatencyMetric+"_bucket", append(append([]string{"upstream"}, none...), le)...); v != 0 {
			t.Errorf("upstream latency bucket %s: %d", le, v)
		}
	}
	c = plugintest.NewCtx("GET", "/x").WithVar("route_id", "r2")
	c.UpstreamStatus = 502
	c.Figures = plugins.Exchange{Proxied: true}
	plugintest.Run(p, c)
	if v := m.Value(StatusMetric, "502", "r2", "", "", "", "", "", "traditional_http", "", "", "nginx"); v != 1 {
		t.Errorf("status 502 from nginx: %d", v)
	}
}

// TestPreferName: the route and service are labelled by their names; a
// route without a name keeps its id.
func TestPreferName(t *testing.T) {
	m := plugins.NewMetricTable(1000)
	p := build(t, m, `{"prefer_name":true}`)
	c := proxied()
	plugintest.Run(p, c)
	if v := m.Value(StatusMetric, "200", "hello-route", "/hello", "example.com", "hello-svc", "jack", "127.0.0.1", "traditional_http", "", "", "upstream"); v != 1 {
		t.Errorf("by name: %d", v)
	}
	c = plugintest.NewCtx("GET", "/hello").WithVar("route_id", "r9")
	plugintest.Run(p, c)
	if v := m.Value(StatusMetric, "200", "r9", "", "", "", "", "", "traditional_http", "", "", "apisix"); v != 1 {
		t.Errorf("no name: %d", v)
	}
}

// TestBuckets: a latency on a bucket's bound is in that bucket; past the
// last, in +Inf.
func TestBuckets(t *testing.T) {
	m := plugins.NewMetricTable(1000)
	p := build(t, m, `{}`)
	for _, x := range []struct {
		d  time.Duration
		le string
	}{
		{0, "1"}, {time.Millisecond, "1"}, {time.Millisecond + time.Microsecond, "2"},
		{60 * time.Second, "60000"}, {61 * time.Second, "+Inf"},
	} {
		c := plugintest.NewCtx("GET", "/b").WithVar("route_id", x.d.String())
		c.Figures = plugins.Exchange{RequestTime: x.d}
		plugintest.Run(p, c)
		if v := m.Value(LatencyMetric+"_bucket", "request", x.d.String(), "", "", "", "traditional_http", "", "", x.le); v != 1 {
			t.Errorf("%v: not in bucket %s", x.d, x.le)
		}
	}
}

// TestFull: with Metrics full, requests are still served and what has a
// series is still counted.
func TestFull(t *testing.T) {
	m := plugins.NewMetricTable(1)
	p := build(t, m, `{}`)
	c := proxied()
	for range 5 {
		c.Reset()
		plugintest.Run(p, c)
	}
	if v := m.Value(StatusMetric, "200", "r1", "/hello", "example.com", "s1", "jack", "127.0.0.1", "traditional_http", "", "", "upstream"); v != 5 {
		t.Fatalf("status with the one series: %d", v)
	}
}
