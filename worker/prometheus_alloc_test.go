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
	seg, err := shm.CreateMetrics(1, 256)
	if err != nil {
		t.Skip("no metrics segment:", err)
	}
	defer seg.Close()
	region, err := seg.Region(0)
	if err != nil {
		t.Fatal(err)
	}
	w := New(Config{Listen: []string{"127.0.0.1:0"}, Plugins: plugins.Env{Metrics: region}, Node: region.Node()})
	s := &spec.Spec{}
	for _, r := range []string{
		`{"id":"r1","uri":"/a","plugins":{"prometheus":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"prometheus":{"prefer_name":true}},"name":"bee","upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	} {
		x, err := spec.DecodeRoute([]byte(r))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, x)
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	snap, err := compile(s, router.HostURI, Keepalive{}, pluginSet{reg: plugins.Default, env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessSnap(t, w, snap)
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
	if got := region.Node().Requests.Load(); got != 2*(10+201) {
		t.Fatalf("requests counted in the region: %d, want %d", got, 2*(10+201))
	}
}
