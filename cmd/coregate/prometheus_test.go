package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os/exec"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The prometheus plugin end to end: two workers count a route's requests
// in their regions of the node's shared memory, and the export server sums
// them at scrape time; a worker killed with SIGKILL loses nothing it
// counted, the node's request counter included, and the worker respawned
// in its slot continues from its region.

// series is one sample of a scrape: its metric name, labels and value.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// parseText reads Prometheus's text format (the samples, not the
// comments).
func parseText(t *testing.T, text string) []series {
	t.Helper()
	var out []series
	for _, line := range strings.Split(text, "\n") {
		if line == "" || line[0] == '#' {
			continue
		}
		sp := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[sp+1:], 64)
		if err != nil {
			t.Fatalf("sample %q: %v", line, err)
		}
		s := series{name: line[:sp], labels: map[string]string{}, value: v}
		if i := strings.IndexByte(line[:sp], '{'); i >= 0 {
			s.name = line[:i]
			for _, m := range labelRE.FindAllStringSubmatch(line[i:sp], -1) {
				s.labels[m[1]] = m[2]
			}
		}
		out = append(out, s)
	}
	return out
}

// find returns the samples of name whose labels include want.
func find(all []series, name string, want map[string]string) []series {
	var out []series
next:
	for _, s := range all {
		if s.name != name {
			continue
		}
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		out = append(out, s)
	}
	return out
}

// one is the value of the one sample of name with labels want (0 when
// none); more than one fails t.
func one(t *testing.T, all []series, name string, want map[string]string) float64 {
	t.Helper()
	got := find(all, name, want)
	if len(got) > 1 {
		t.Fatalf("%d samples of %s %v: %v", len(got), name, want, got)
	}
	if len(got) == 0 {
		return 0
	}
	return got[0].value
}

func TestPrometheusPlugin(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts a gateway with several workers")
	}
	promtool := requirePromtool(t)
	up := textUpstream(t, "ok")
	mport := freePort(t)
	const workers = 2
	g := startSupervisor(t, routesYAML(
		obj{"id": "r1", "uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"prometheus": obj{}}},
		obj{"id": "teapot", "uri": "/teapot", "plugins": obj{"prometheus": obj{},
			"mocking": obj{"response_example": "tea", "response_status": 418}}},
		obj{"id": "plain", "uri": "/plain", "upstream": upstreamOf(nodes(up.Addr()), nil)},
	), exportConfig(workers, mport), workers)
	url := fmt.Sprintf("http://127.0.0.1:%d/m", mport)
	scrape := func() (string, []series) {
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
	conns := dialSpread(t, g, workers, 3)
	_, before := scrape()
	base := one(t, before, "apisix_http_requests_total", nil)

	const hellos, teapots, plains = 300, 60, 40
	hammerStatus(t, conns, "/hello", hellos, 200)
	hammerStatus(t, conns, "/teapot", teapots, 418)
	hammerStatus(t, conns, "/plain", plains, 200)

	// At once, before any report could reach the supervisor: a worker
	// killed loses nothing it counted.
	ws := waitWorkers(t, g.cmd.Process.Pid, workers, 5*time.Second)
	if err := syscall.Kill(ws[0].pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker respawned"`, 1, 10*time.Second)
	waitWorkers(t, g.cmd.Process.Pid, workers, 10*time.Second)

	text, all := scrape()
	promCheckAPISIX(t, promtool, text)
	if got := one(t, all, "apisix_http_requests_total", nil) - base; got != hellos+teapots+plains {
		t.Errorf("apisix_http_requests_total grew by %v, want exactly %d", got, hellos+teapots+plains)
	}
	if strings.Contains(text, `route="teapot",service="",type="upstream"`) {
		t.Error("a route that never reaches an upstream has upstream latency series")
	}
	hello := map[string]string{"code": "200", "route": "r1", "matched_uri": "/hello", "matched_host": "",
		"service": "", "consumer": "", "node": "127.0.0.1", "request_type": "traditional_http",
		"request_llm_model": "", "llm_model": "", "response_source": "upstream"}
	if got := one(t, all, "apisix_http_status", hello); got != hellos {
		t.Errorf("apisix_http_status %v: %v, want exactly %d", hello, got, hellos)
	}
	teapot := map[string]string{"code": "418", "route": "teapot", "node": "", "response_source": "apisix"}
	if got := one(t, all, "apisix_http_status", teapot); got != teapots {
		t.Errorf("apisix_http_status %v: %v, want exactly %d", teapot, got, teapots)
	}
	if got := find(all, "apisix_http_status", nil); len(got) != 2 {
		t.Errorf("apisix_http_status series: %v, want the two routes with the plugin", got)
	}
	for _, x := range []struct {
		route, typ string
		n          int
	}{
		{"r1", "request", hellos}, {"r1", "upstream", hellos}, {"r1", "apisix", hellos},
		{"teapot", "request", teapots}, {"teapot", "upstream", 0}, {"teapot", "apisix", teapots},
	} {
		checkHistogram(t, all, map[string]string{"type": x.typ, "route": x.route, "service": "", "consumer": "",
			"request_type": "traditional_http", "request_llm_model": "", "llm_model": ""}, x.n)
	}
	for _, x := range []struct {
		route, typ string
		least      int // bytes per request at least
	}{
		{"r1", "ingress", len("GET /hello HTTP/1.1\r\n\r\n")}, {"r1", "egress", len("HTTP/1.1 200 OK\r\n\r\nok")},
		{"teapot", "ingress", len("GET /teapot HTTP/1.1\r\n\r\n")}, {"teapot", "egress", len("HTTP/1.1 418 \r\n\r\ntea")},
	} {
		n := map[string]int{"r1": hellos, "teapot": teapots}[x.route]
		got := one(t, all, "apisix_bandwidth", map[string]string{"type": x.typ, "route": x.route})
		if got < float64(n*x.least) || got > float64(n*1024) {
			t.Errorf("apisix_bandwidth %s %s: %v bytes for %d requests", x.route, x.typ, got, n)
		}
	}

	// The respawned worker continues from its slot's region.
	conns = dialSpread(t, g, workers, 2)
	const more = 50
	hammerStatus(t, conns, "/hello", more, 200)
	eventually(t, 5*time.Second, func() error {
		_, all := scrape()
		if got := one(t, all, "apisix_http_status", hello); got != hellos+more {
			return fmt.Errorf("apisix_http_status after the respawn: %v, want %d", got, hellos+more)
		}
		if got := one(t, all, "apisix_http_requests_total", nil) - base; got != hellos+teapots+plains+more {
			return fmt.Errorf("apisix_http_requests_total grew by %v, want %d", got, hellos+teapots+plains+more)
		}
		return nil
	})
}

// checkHistogram checks the apisix_http_latency series of labels: its
// buckets are cumulative, end with +Inf, which equals its count, n.
func checkHistogram(t *testing.T, all []series, labels map[string]string, n int) {
	t.Helper()
	buckets := find(all, "apisix_http_latency_bucket", labels)
	count := one(t, all, "apisix_http_latency_count", labels)
	if n == 0 {
		if len(buckets) != 0 || count != 0 {
			t.Errorf("latency %v: %d buckets, count %v; want none", labels, len(buckets), count)
		}
		return
	}
	if count != float64(n) {
		t.Errorf("latency %v: count %v, want %d", labels, count, n)
	}
	if len(buckets) != 16 {
		t.Fatalf("latency %v: %d buckets, want APISIX's 15 and +Inf", labels, len(buckets))
	}
	sort.Slice(buckets, func(i, j int) bool { return le(buckets[i]) < le(buckets[j]) })
	for i := 1; i < len(buckets); i++ {
		if buckets[i].value < buckets[i-1].value {
			t.Errorf("latency %v: bucket %s (%v) below bucket %s (%v)", labels,
				buckets[i].labels["le"], buckets[i].value, buckets[i-1].labels["le"], buckets[i-1].value)
		}
	}
	if last := buckets[len(buckets)-1]; last.labels["le"] != "+Inf" || last.value != float64(n) {
		t.Errorf("latency %v: last bucket %v, want +Inf with %d", labels, last, n)
	}
	if first := buckets[0].labels["le"]; first != "1" {
		t.Errorf("latency %v: first bucket %s, want 1", labels, first)
	}
	if sum := one(t, all, "apisix_http_latency_sum", labels); sum < 0 || math.IsNaN(sum) {
		t.Errorf("latency %v: sum %v", labels, sum)
	}
}

func le(s series) float64 {
	v, _ := strconv.ParseFloat(s.labels["le"], 64)
	return v
}

// hammerStatus sends total requests to path over conns at once; every
// answer must have status.
func hammerStatus(t *testing.T, conns []*limitConn, path string, total, status int) {
	t.Helper()
	errs := make(chan error, len(conns))
	per := (total + len(conns) - 1) / len(conns)
	left := total
	for _, lc := range conns {
		n := min(per, left)
		left -= n
		go func() {
			for range n {
				a, err := lc.get(path)
				if err == nil && a.status != status {
					err = fmt.Errorf("%s: %d, want %d", path, a.status, status)
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for range conns {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

// promCheckAPISIX is promCheck for a text with APISIX's plugin metrics:
// APISIX names its counters apisix_http_status and apisix_bandwidth,
// without the "_total" suffix promtool's lint wants. Those two lint
// problems, and promCheck's, are the only ones allowed; any other, and
// any error in the text, fails t.
func promCheckAPISIX(t *testing.T, promtool, text string) {
	t.Helper()
	check := exec.Command(promtool, "check", "metrics")
	check.Stdin = strings.NewReader(text)
	var out bytes.Buffer
	check.Stdout, check.Stderr = &out, &out
	err := check.Run()
	if err == nil {
		return
	}
	allowed := map[string]bool{
		`apisix_http_requests_total non-counter metrics should not have "_total" suffix`: true,
		`apisix_http_status counter metrics should have "_total" suffix`:                 true,
		`apisix_bandwidth counter metrics should have "_total" suffix`:                   true,
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 3 {
		t.Fatalf("promtool check metrics: %v\n%s\n%s", err, out.String(), text)
	}
	for _, line := range strings.Split(strings.TrimSpace(out.String()), "\n") {
		if !allowed[strings.TrimSpace(line)] {
			t.Fatalf("promtool check metrics: %q\n%s", line, text)
		}
	}
}
