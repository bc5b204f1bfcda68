package main

import (
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// The prometheus plugin's bounds on cardinality, end to end: the labels
// its plugin metadata disables (from apisix.yaml, and through the Admin
// API on etcd), and plugin_attr.prometheus's metric_prefix and
// default_buckets.

// scrapeText fetches the export server's text at url.
func scrapeText(t *testing.T, url string) (string, []series) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("scrape: %d %s", resp.StatusCode, b)
	}
	return string(b), parseText(t, string(b))
}

// labelValues are the values label takes in the samples of name.
func labelValues(all []series, name, label string) []string {
	var out []string
	for _, s := range find(all, name, nil) {
		if v := s.labels[label]; !slices.Contains(out, v) {
			out = append(out, v)
		}
	}
	slices.Sort(out)
	return out
}

// TestPrometheusDisabledLabelsStandalone: with route, consumer and node
// disabled in apisix.yaml's plugin metadata, forty routes make one
// apisix_http_status series and one latency histogram per type; the
// families are served under metric_prefix, with default_buckets and the
// extra labels of plugin_attr.prometheus.metrics, and promtool still
// accepts the text.
func TestPrometheusDisabledLabelsStandalone(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a gateway with several workers")
	}
	promtool := requirePromtool(t)
	up := textUpstream(t, "ok")
	mport := freePort(t)
	const workers, routes, per = 2, 40, 5
	var rs []obj
	for i := range routes {
		rs = append(rs, obj{"id": fmt.Sprintf("r%d", i), "uri": fmt.Sprintf("/r%d", i),
			"upstream": upstreamOf(nodes(up.Addr()), nil), "plugins": obj{"prometheus": obj{}}})
	}
	yaml := standaloneYAML(map[string][]obj{
		"routes": rs,
		"plugin_metadata": {{"id": "prometheus", "disabled_labels": obj{
			"http_status":  []string{"route", "matched_uri", "consumer", "node"},
			"http_latency": []string{"route", "consumer", "node"},
			"bandwidth":    []string{"route", "consumer", "node"},
		}}},
	})
	config := func(port int) string {
		return exportConfig(workers, mport)(port) + "    metric_prefix: gw_\n    default_buckets: [5, 50, 500.5]\n" +
			"    metrics:\n      http_status:\n        extra_labels:\n          - upstream_addr: $upstream_addr\n" +
			"      http_latency:\n        extra_labels:\n          - method: $request_method\n"
	}
	g := startSupervisor(t, yaml, config, workers)
	conns := dialSpread(t, g, workers, 2)
	for i := range routes {
		hammerStatus(t, conns, fmt.Sprintf("/r%d", i), per, 200)
	}

	text, all := scrapeText(t, fmt.Sprintf("http://127.0.0.1:%d/m", mport))
	promCheckPrefixed(t, promtool, text, "gw_")
	for _, s := range all {
		if strings.HasPrefix(s.name, "apisix_") {
			t.Fatalf("%s served under apisix_ with metric_prefix gw_", s.name)
		}
	}
	for _, name := range []string{"gw_node_info", "gw_http_requests_total", "gw_nginx_http_current_connections", "coregate_workers"} {
		if len(find(all, name, nil)) == 0 {
			t.Errorf("no %s", name)
		}
	}
	status := find(all, "gw_http_status", nil)
	if len(status) != 1 {
		t.Fatalf("gw_http_status: %d series, want 1:\n%v", len(status), status)
	}
	want := map[string]string{"code": "200", "route": "", "matched_uri": "", "matched_host": "", "service": "",
		"consumer": "", "node": "", "request_type": "traditional_http", "request_llm_model": "", "llm_model": "",
		"response_source": "upstream", "upstream_addr": up.Addr()}
	if got := one(t, all, "gw_http_status", want); got != routes*per {
		t.Errorf("gw_http_status %v = %v, want %d", want, got, routes*per)
	}
	for _, typ := range []string{"request", "upstream", "apisix"} {
		lbl := map[string]string{"type": typ, "route": "", "node": "", "method": "GET"}
		if got := one(t, all, "gw_http_latency_count", lbl); got != routes*per {
			t.Errorf("gw_http_latency_count %v = %v, want %d", lbl, got, routes*per)
		}
	}
	if got := labelValues(all, "gw_http_latency_bucket", "le"); !slices.Equal(got, []string{"+Inf", "5", "50", "500.5"}) {
		t.Errorf("gw_http_latency buckets %v, want 5 50 500.5 +Inf", got)
	}
	if n := len(find(all, "gw_http_latency_count", nil)); n != 3 {
		t.Errorf("gw_http_latency: %d histograms, want one per type", n)
	}
	if n := len(find(all, "gw_bandwidth", nil)); n != 2 {
		t.Errorf("gw_bandwidth: %d series, want ingress and egress", n)
	}
}

// exportEtcdConfig is etcdConfig with the legacy admin key and the export
// server on 127.0.0.1:mport at /m.
func exportEtcdConfig(adminPort, mport int) func(port int) string {
	return withExport(etcdConfig(adminPort, adminapi.LegacyAdminKey), mport)
}

// withExport is config with the export server, which it disables, on
// 127.0.0.1:mport at /m.
func withExport(config func(port int) string, mport int) func(port int) string {
	return func(port int) string {
		return strings.Replace(config(port), "    enable_export_server: false\n",
			fmt.Sprintf("    export_uri: /m\n    export_addr:\n      ip: 127.0.0.1\n      port: %d\n", mport), 1)
	}
}

// TestPrometheusMetadataAdminAPI: plugin metadata PUT through the Admin
// API (stored in etcd) disables labels on the node's workers; invalid
// metadata is refused with 400 naming the field; a DELETE brings the
// labels back.
func TestPrometheusMetadataAdminAPI(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	adminPort, mport := freePort(t), freePort(t)
	g := startSupervisor(t, "", exportEtcdConfig(adminPort, mport), 1)
	c := newClient(t)
	admin := func(method, path, body string) result {
		return legacyAdmin(adminPort).do(t, c, method, path, body)
	}
	const md = "plugin_metadata/prometheus"
	if r := admin("PUT", md, `{"disabled_labels":{"http_status":["code"]}}`); r.status != 400 ||
		!strings.Contains(r.body, `"field":"disabled_labels.http_status[0]"`) || !strings.Contains(r.body, "invalid configuration: ") {
		t.Fatalf("PUT a structural label: %d %s", r.status, r.body)
	}
	if r := admin("PUT", md, `{"disabled_labels":{"unknown_metric":["node"]}}`); r.status != 400 ||
		!strings.Contains(r.body, "additional properties forbidden") {
		t.Fatalf("PUT an unknown metric: %d %s", r.status, r.body)
	}
	if r := admin("PUT", "plugin_metadata/no-such-plugin", `{}`); r.status != 400 || !strings.Contains(r.body, `"invalid plugin name"`) {
		t.Fatalf("PUT for no plugin: %d %s", r.status, r.body)
	}
	if r := admin("PUT", md, `{"disabled_labels":{"http_status":["route","node"]}}`); r.status != 201 ||
		!strings.Contains(r.body, `"key":"/apisix/plugin_metadata/prometheus"`) {
		t.Fatalf("PUT the metadata: %d %s", r.status, r.body)
	}
	if r := admin("GET", md, ""); r.status != 200 || !strings.Contains(r.body, `"id":"prometheus"`) {
		t.Fatalf("GET the metadata: %d %s", r.status, r.body)
	}
	for i := range 3 {
		body := fmt.Sprintf(`{"uri":"/r%d","plugins":{"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{%q:1}}}`, i, up.Addr())
		if r := admin("PUT", fmt.Sprintf("routes/%d", i), body); r.status != 201 {
			t.Fatalf("PUT route %d: %d %s", i, r.status, r.body)
		}
	}
	url := fmt.Sprintf("http://127.0.0.1:%d/m", mport)
	get := func(path string) error {
		if r := do(t, c, "GET", g.url(path), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET %s = %d", path, r.status)
		}
		return nil
	}
	eventually(t, 10*time.Second, func() error { return get("/r2") })
	for _, p := range []string{"/r0", "/r1", "/r2", "/r0"} {
		if err := get(p); err != nil {
			t.Fatal(err)
		}
	}
	_, all := scrapeText(t, url)
	if got := labelValues(all, "apisix_http_status", "route"); !slices.Equal(got, []string{""}) {
		t.Fatalf("apisix_http_status routes %q, want only \"\"", got)
	}
	if got := len(find(all, "apisix_http_status", nil)); got != 3 {
		t.Errorf("apisix_http_status: %d series, want one per matched_uri", got)
	}
	// Not disabled there: the latency keeps its routes.
	if got := labelValues(all, "apisix_http_latency_count", "route"); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("apisix_http_latency routes %q, want 0 1 2", got)
	}

	if r := admin("DELETE", md, ""); r.status != 200 {
		t.Fatalf("DELETE the metadata: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if err := get("/r1"); err != nil {
			return err
		}
		_, all := scrapeText(t, url)
		if got := one(t, all, "apisix_http_status", map[string]string{"route": "1"}); got == 0 {
			return fmt.Errorf("no apisix_http_status{route=\"1\"} after the DELETE")
		}
		return nil
	})
}

// promCheckPrefixed is promCheckAPISIX for a text served with
// metric_prefix prefix.
func promCheckPrefixed(t *testing.T, promtool, text, prefix string) {
	t.Helper()
	promCheckAPISIX(t, promtool, strings.ReplaceAll(text, prefix, "apisix_"))
}
