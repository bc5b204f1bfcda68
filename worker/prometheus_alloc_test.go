//go:build !race

package worker

import (
	"bytes"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	_ "coregate/plugins/prometheus" // registers prometheus in plugins.Default
	"coregate/worker/router"
	"coregate/worker/shm"
)

// TestAllocPrometheusLog: a request through a route with the prometheus
// plugin, counting in a region of the metrics segment, allocates nothing
// once its series exist: the log phase's variables and figures included.
func TestAllocPrometheusLog(t *testing.T) {
	h, seg := prometheusHarness(t,
		`{"id":"r1","uri":"/a","plugins":{"prometheus":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"prometheus":{"prefer_name":true}},"name":"bee","upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
	for _, path := range []string{"/a", "/b"} {
		req := []byte("GET " + path + " HTTP/1.1\r\nHost: example.com\r\n\r\n")
		for range 10 {
			if _, got := h.roundTrip(req, []byte(upOK)); !bytes.HasSuffix(got, []byte("\r\n\r\nok")) {
				t.Fatalf("%s: answer\n%s", path, got)
			}
		}
		if allocs := testing.AllocsPerRun(200, func() { h.roundTrip(req, []byte(upOK)) }); allocs != 0 {
			t.Errorf("%s: %.1f allocations per request, want 0", path, allocs)
		}
	}
	if n, dropped := seg.Usage(0); n == 0 || dropped != 0 {
		t.Fatalf("region: %d series, %d dropped", n, dropped)
	}
	if got := h.w.cfg.Node.Requests.Load(); got != 2*(10+201) {
		t.Fatalf("requests counted in the region: %d, want %d", got, 2*(10+201))
	}
}

// prometheusHarness is a worker driven in memory (newHarnessSnap) whose
// plugins count in a region of a new metrics segment, with routes given
// as APISIX JSON objects. It skips where no segment can be made.
func prometheusHarness(tb testing.TB, routes ...string) (*harness, *shm.MetricsSegment) {
	tb.Helper()
	seg, err := shm.CreateMetrics(1, 256)
	if err != nil {
		tb.Skip("no metrics segment:", err)
	}
	tb.Cleanup(func() { _ = seg.Close() })
	region, err := seg.Region(0)
	if err != nil {
		tb.Fatal(err)
	}
	w := New(Config{Listen: []string{"127.0.0.1:0"}, Plugins: plugins.Env{Metrics: region}, Node: region.Node()})
	s := &spec.Spec{}
	for _, r := range routes {
		x, err := spec.DecodeRoute([]byte(r))
		if err != nil {
			tb.Fatal(err)
		}
		s.Routes = append(s.Routes, x)
	}
	if err := s.Check(); err != nil {
		tb.Fatal(err)
	}
	snap, err := compile(s, router.HostURI, upstreamEnv{}, pluginSet{reg: plugins.Default, env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		tb.Fatal(err)
	}
	return newHarnessSnap(tb, w, snap), seg
}
