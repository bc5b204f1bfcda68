package supervisor

import (
	"context"
	"encoding/json"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/worker/shm"
)

// statusLabels are the label values of fam (the prometheus plugin's,
// which the test binary links) with those named in set, "" elsewhere.
func statusLabels(t testing.TB, fam string, set map[string]string) []string {
	t.Helper()
	f, ok := plugins.LookupMetric(fam)
	if !ok {
		t.Fatalf("no metric family %s", fam)
	}
	out := make([]string, len(f.Labels))
	for i, l := range f.Labels {
		out[i] = set[l]
	}
	return out
}

// TestStatusSampler: two samples a second apart of two workers' regions
// make their rates, their selector shares of every connection accepted,
// the routes' status mix by class (summed over the regions), rates, and
// p99 of their request latencies (not the upstream's) since the window's
// first sample; a process's CPU comes from /proc, here this test's own.
func TestStatusSampler(t *testing.T) {
	seg, err := shm.CreateMetrics(2, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	r0, err := seg.Region(0)
	if err != nil {
		t.Fatal(err)
	}
	r1, err := seg.Region(1)
	if err != nil {
		t.Fatal(err)
	}
	s := &Supervisor{series: seg, selKind: "plain", epoch: time.Now()}
	beat := new(atomic.Int64)
	beat.Store(int64(time.Since(s.epoch)))
	s.metrics.setState(0, stateRunning)
	s.metrics.setProc(0, os.Getpid(), beat)
	s.metrics.setState(1, stateDown)
	s.metrics.restarted(1)
	s.metrics.restarted(1)

	seg.Node(0).Accepted.Add(10)
	seg.Node(0).Requests.Add(100)
	seg.Node(1).Accepted.Add(30)
	r0.Slot("apisix_http_status", statusLabels(t, "apisix_http_status", map[string]string{"code": "200", "route": "web", "node": "n"})...).Add(5)
	r0.Slot("apisix_http_latency_bucket", append(statusLabels(t, "apisix_http_latency", map[string]string{"type": "request", "route": "web"}), "10")...).Add(5)
	st := &statusSampler{s: s}
	st.step()
	first := st.latest.Load()
	if len(first.Workers) != 2 || first.IntervalS != 0 || first.Workers[0].RequestsPerS != 0 {
		t.Fatalf("first sample: %+v", first)
	}

	// A second of traffic, the first sample moved a second back.
	st.ring[0].at = st.ring[0].at.Add(-time.Second)
	// CPU time for /proc to count (in 10 ms ticks), at most 5 s of trying.
	ticks, _ := procCPU(os.Getpid())
	for start := time.Now(); time.Since(start) < 5*time.Second; {
		if now, _ := procCPU(os.Getpid()); now >= ticks+2 {
			break
		}
	}
	seg.Node(0).Accepted.Add(30)
	seg.Node(0).Requests.Add(200)
	seg.Node(1).Accepted.Add(10)
	seg.Node(1).Requests.Add(50)
	r0.Slot("apisix_http_status", statusLabels(t, "apisix_http_status", map[string]string{"code": "200", "route": "web", "node": "n"})...).Add(95)
	r1.Slot("apisix_http_status", statusLabels(t, "apisix_http_status", map[string]string{"code": "200", "route": "web", "node": "m"})...).Add(50)
	r1.Slot("apisix_http_status", statusLabels(t, "apisix_http_status", map[string]string{"code": "404", "route": "web", "node": "m"})...).Add(30)
	r1.Slot("apisix_http_status", statusLabels(t, "apisix_http_status", map[string]string{"code": "502", "route": "web", "node": "m"})...).Add(20)
	r0.Slot("apisix_http_status", statusLabels(t, "apisix_http_status", map[string]string{"code": "301", "route": "moved", "node": "n"})...).Add(7)
	r0.Slot("apisix_http_status", statusLabels(t, "apisix_http_status", map[string]string{"code": "999", "route": "moved", "node": "n"})...).Add(1) // counted, in no class
	r0.Slot("apisix_http_latency_bucket", append(statusLabels(t, "apisix_http_latency", map[string]string{"type": "request", "route": "web"}), "10")...).Add(98)
	r1.Slot("apisix_http_latency_bucket", append(statusLabels(t, "apisix_http_latency", map[string]string{"type": "request", "route": "web"}), "100")...).Add(2)
	r1.Slot("apisix_http_latency_bucket", append(statusLabels(t, "apisix_http_latency", map[string]string{"type": "upstream", "route": "web"}), "1000")...).Add(100) // not the request's
	st.step()
	got := st.latest.Load()

	// Rates are of the interval between the samples (a second and the
	// time the test took), shares exact.
	near := func(what string, got, want float64) {
		t.Helper()
		if math.Abs(got-want) > want*1e-9 {
			t.Errorf("%s: %v, want %v", what, got, want)
		}
	}
	per := func(n float64) float64 { return n / got.IntervalS }
	if got.Selector != "plain" || got.IntervalS < 1 || got.IntervalS > 1.5 {
		t.Errorf("selector %q, interval %v", got.Selector, got.IntervalS)
	}
	if len(got.Workers) != 2 {
		t.Fatalf("workers: %+v", got.Workers)
	}
	w0, w1 := got.Workers[0], got.Workers[1]
	if w0.ID != 0 || w0.PID != os.Getpid() || w0.State != "running" || w0.RequestsTotal != 300 || w0.AcceptedTotal != 40 || w0.Restarts != 0 {
		t.Errorf("worker 0: %+v", w0)
	}
	near("worker 0 req/s", w0.RequestsPerS, per(200))
	near("worker 0 accepted/s", w0.AcceptedPerS, per(30))
	near("worker 0 share", w0.SelectorShare, 0.5)
	if w0.CPUPercent <= 0 || w0.HeartbeatAgeMS < 0 || w0.HeartbeatAgeMS > 10000 {
		t.Errorf("worker 0: CPU %v %%, heartbeat %v ms", w0.CPUPercent, w0.HeartbeatAgeMS)
	}
	if w1.ID != 1 || w1.PID != 0 || w1.State != "down" || w1.Restarts != 2 || w1.CPUPercent != 0 || w1.HeartbeatAgeMS != 0 {
		t.Errorf("worker 1: %+v", w1)
	}
	near("worker 1 req/s", w1.RequestsPerS, per(50))
	near("worker 1 share", w1.SelectorShare, 0.5)

	if len(got.Routes) != 2 || got.Routes[0].Route != "moved" || got.Routes[1].Route != "web" {
		t.Fatalf("routes: %+v", got.Routes)
	}
	moved, web := got.Routes[0], got.Routes[1]
	if moved.Status != (StatusMix{S3xx: 7}) || moved.RequestsTotal != 8 || moved.P99MS != nil {
		t.Errorf("route moved: %+v", moved)
	}
	if web.Status != (StatusMix{S2xx: 150, S4xx: 30, S5xx: 20}) || web.RequestsTotal != 200 {
		t.Errorf("route web: %+v", web)
	}
	near("web req/s", web.RequestsPerS, per(195))
	near("web 2xx/s", web.StatusPerS.S2xx, per(145))
	near("web 4xx/s", web.StatusPerS.S4xx, per(30))
	near("web 5xx/s", web.StatusPerS.S5xx, per(20))
	// The window's 100 latencies: 98 up to 10 ms, 2 in (10, 100]; the
	// 99th falls halfway into the second bucket.
	if web.P99MS == nil {
		t.Fatal("web: no p99")
	}
	near("web p99", *web.P99MS, 55)
	if got.Upstreams == nil || len(got.Upstreams) != 0 {
		t.Errorf("upstreams: %#v, want none (and [] in JSON)", got.Upstreams)
	}
}

// TestQuantile: Prometheus's histogram_quantile on the buckets' counts
// since a base: linear inside the bucket, the largest finite bound for
// the +Inf bucket, nothing without observations.
func TestQuantile(t *testing.T) {
	inf := math.Inf(1)
	for _, x := range []struct {
		q             float64
		buckets, base map[float64]uint64
		want          float64
		ok            bool
	}{
		{0.99, map[float64]uint64{}, nil, 0, false},
		{0.99, map[float64]uint64{1: 5}, map[float64]uint64{1: 5}, 0, false},
		{0.5, map[float64]uint64{10: 100}, nil, 5, true},
		{0.99, map[float64]uint64{1: 50, 2: 50}, nil, 1.98, true},
		{0.99, map[float64]uint64{1: 90, 2: 0, 5: 10}, nil, 4.7, true},
		{0.99, map[float64]uint64{1: 90, inf: 10}, nil, 1, true},
		{0.99, map[float64]uint64{1: 190, 5: 10}, map[float64]uint64{1: 100}, 4.6, true},
	} {
		got, ok := quantile(x.q, x.buckets, x.base)
		if ok != x.ok || math.Abs(got-x.want) > 1e-9 {
			t.Errorf("quantile(%v, %v, %v) = %v, %v; want %v, %v", x.q, x.buckets, x.base, got, ok, x.want, x.ok)
		}
	}
}

// TestParseStatCPU: utime and stime are read after the command's closing
// parenthesis, whatever the command holds.
func TestParseStatCPU(t *testing.T) {
	type res struct {
		ticks uint64
		ok    bool
	}
	for line, want := range map[string]res{
		"42 (coregate) S 1 42 42 0 -1 4194560 100 0 0 0 250 17 0 0 20 0 9 0 100 0 0": {267, true},
		"42 (a) b (c)) R 1 42 42 0 -1 4194560 100 0 0 0 3 4 0 0 20 0 9 0 100 0 0":    {7, true},
		"42 (idle) S 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 9 0 100 0 0":        {0, true},
		"42 (short) S 1 42": {},
		"42 no parenthesis": {},
		"42 (x) S 1 42 42 0 -1 4194560 100 0 0 0 ten 17 0 0 20 0 9 0 100 0 0": {},
	} {
		if ticks, ok := parseStatCPU([]byte(line)); (res{ticks, ok}) != want {
			t.Errorf("parseStatCPU(%q) = %d, %v; want %v", line, ticks, ok, want)
		}
	}
	if _, ok := procCPU(os.Getpid()); !ok {
		t.Error("procCPU: this process's /proc/<pid>/stat not read")
	}
	if _, ok := procCPU(-1); ok {
		t.Error("procCPU(-1) read")
	}
}

// TestStatusAuth: off loopback the status pages take an admin key as the
// Admin API does (api_key, X-API-KEY, x_api_key), any role; with no key
// configured they refuse everyone there; on loopback they ask nothing.
func TestStatusAuth(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:9091": true, "127.0.0.2:9091": true, "[::1]:9091": true, "localhost:9091": true,
		"0.0.0.0:9091": false, "[::]:9091": false, ":9091": false, "192.0.2.1:9091": false, "example.com:9091": false,
	} {
		if got := loopbackAddr(addr); got != want {
			t.Errorf("loopbackAddr(%q) = %v", addr, got)
		}
	}
	s := &Supervisor{}
	s.SetStatusKeys([]string{"", "k1", "k2"})
	open := &statusAuth{check: false}
	guarded := &statusAuth{check: true, keys: s.statusKeys}
	none := &statusAuth{check: true}
	req := func(target string, hdr map[string]string) *http.Request {
		r := httptest.NewRequest("GET", target, nil)
		for k, v := range hdr {
			r.Header.Set(k, v)
		}
		return r
	}
	for _, x := range []struct {
		a      *statusAuth
		r      *http.Request
		ok     bool
		reason string
	}{
		{open, req("/status", nil), true, ""},
		{guarded, req("/status", nil), false, "missing apikey"},
		{guarded, req("/status", map[string]string{"X-API-KEY": "k2"}), true, ""},
		{guarded, req("/status?api_key=k1", nil), true, ""},
		{guarded, req("/status", map[string]string{"Cookie": "x_api_key=k1"}), true, ""},
		{guarded, req("/status", map[string]string{"X-API-KEY": "k3"}), false, "wrong apikey"},
		{guarded, req("/status?api_key=", map[string]string{"X-API-KEY": "k1"}), false, "wrong apikey"},
		{guarded, req("/status", map[string]string{"X-API-KEY": ""}), false, "wrong apikey"},
		{none, req("/status", map[string]string{"X-API-KEY": "k1"}), false, "no deployment.admin.admin_key to check the key against"},
	} {
		reason, ok := x.a.allow(x.r)
		if ok != x.ok || reason != x.reason {
			t.Errorf("%s %v: %v %q, want %v %q", x.r.URL, x.r.Header, ok, reason, x.ok, x.reason)
		}
	}
}

// TestStatusHandlers: /status.json is the sampler's Status as JSON,
// /status the same figures in the server's HTML tables (a route's name
// escaped), GET and HEAD only; off loopback with no key configured both
// answer 401 with APISIX's error body.
func TestStatusHandlers(t *testing.T) {
	seg, err := shm.CreateMetrics(1, 64)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	r0, err := seg.Region(0)
	if err != nil {
		t.Fatal(err)
	}
	const route = `<b>"r"</b>`
	r0.Slot("apisix_http_status", statusLabels(t, "apisix_http_status", map[string]string{"code": "503", "route": route})...).Add(4)
	seg.Node(0).Requests.Add(4)
	s := &Supervisor{series: seg, selKind: "plain", epoch: time.Now()}
	s.metrics.setState(0, stateRunning)
	s.metrics.setProc(0, os.Getpid(), new(atomic.Int64))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	serve := func(addr string) *httptest.Server {
		mux := http.NewServeMux()
		s.statusHandlers(ctx, mux, addr)
		srv := httptest.NewServer(mux)
		t.Cleanup(srv.Close)
		return srv
	}
	do := func(srv *httptest.Server, method, path string) (int, http.Header, string) {
		t.Helper()
		req, _ := http.NewRequest(method, srv.URL+path, nil)
		resp, err := srv.Client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, resp.Header, string(b)
	}

	local := serve("127.0.0.1:9091")
	code, hdr, body := do(local, "GET", "/status.json")
	var st Status
	if err := json.Unmarshal([]byte(body), &st); err != nil || code != 200 || hdr.Get("Content-Type") != "application/json" {
		t.Fatalf("/status.json: %d %v %s (%v)", code, hdr, body, err)
	}
	if len(st.Workers) != 1 || st.Workers[0].RequestsTotal != 4 || len(st.Routes) != 1 ||
		st.Routes[0].Route != route || st.Routes[0].Status != (StatusMix{S5xx: 4}) {
		t.Errorf("/status.json: %s", body)
	}
	for _, key := range []string{`"time":`, `"interval_s":`, `"selector":"plain"`, `"selector_mode":`, `"workers":[`,
		`"cpu_percent":`, `"requests_per_s":`, `"requests_total":4`, `"connections":0`, `"restarts":0`,
		`"heartbeat_age_ms":`, `"accepted_per_s":`, `"accepted_total":0`, `"selector_share":0`,
		`"status":{"1xx":0,"2xx":0,"3xx":0,"4xx":0,"5xx":4}`, `"status_per_s":{`, `"p99_ms":null`, `"upstreams":[]`} {
		if !strings.Contains(body, key) {
			t.Errorf("/status.json lacks %s: %s", key, body)
		}
	}
	code, hdr, body = do(local, "GET", "/status")
	if code != 200 || hdr.Get("Content-Type") != "text/html; charset=utf-8" || hdr.Get("Cache-Control") != "no-store" {
		t.Errorf("/status: %d %v", code, hdr)
	}
	for _, want := range []string{`<tr data-worker="0"><td>0</td><td>` + strconv.Itoa(os.Getpid()) + `</td><td class="state-running">running</td>`,
		`<tr data-route="&lt;b&gt;&#34;r&#34;&lt;/b&gt;"><td>&lt;b&gt;&#34;r&#34;&lt;/b&gt;</td>`, `<td>4</td><td>–</td></tr>`} {
		if !strings.Contains(body, want) {
			t.Errorf("/status lacks %s:\n%s", want, body)
		}
	}
	if strings.Contains(body, route) {
		t.Errorf("/status holds the route's name unescaped:\n%s", body)
	}
	if code, hdr, _ := do(local, "POST", "/status.json"); code != 405 || hdr.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /status.json: %d %v", code, hdr)
	}
	if code, _, body := do(local, "HEAD", "/status"); code != 200 || body != "" {
		t.Errorf("HEAD /status: %d %q", code, body)
	}

	public := serve("0.0.0.0:9091")
	for _, path := range []string{"/status", "/status.json"} {
		code, hdr, body := do(public, "GET", path)
		if code != 401 || hdr.Get("Content-Type") != "application/json" ||
			body != `{"description":"no deployment.admin.admin_key to check the key against","error_msg":"failed to check token"}`+"\n" {
			t.Errorf("GET %s off loopback with no key configured: %d %v %s", path, code, hdr, body)
		}
	}
}
