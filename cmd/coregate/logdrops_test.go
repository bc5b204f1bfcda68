package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// TestAdminAPILoggerDropMetrics runs opentelemetry and http-logger
// through the binary against a collector and a log server that hold
// every upload: the spans and entries past their queues are dropped, the
// requests never wait, and the export server shows the counts
// (coregate_opentelemetry_dropped_spans_total{reason="queue_full"},
// coregate_http_logger_dropped_entries_total{reason="queue_full"}) in a
// text promtool checks.
func TestAdminAPILoggerDropMetrics(t *testing.T) {
	t.Parallel()
	promtool := requirePromtool(t)
	release := make(chan struct{})
	hold := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-r.Context().Done():
		}
		w.WriteHeader(503)
	}))
	defer hold.Close()
	defer close(release)
	up := textUpstream(t, "ok")
	adminPort, mport := freePort(t), freePort(t)
	g := startSupervisor(t, "", exportEtcdConfig(adminPort, mport), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string) {
		t.Helper()
		if r := admin.do(t, c, "PUT", path, body); r.status != 201 && r.status != 200 {
			t.Fatalf("PUT %s: %d %s", path, r.status, r.body)
		}
	}
	put("plugin_metadata/opentelemetry", fmt.Sprintf(`{"collector":{"address":%q,"request_timeout":30},`+
		`"batch_span_processor":{"max_queue_size":4,"max_export_batch_size":1,"batch_timeout":0.05,"inactive_timeout":0.01}}`,
		strings.TrimPrefix(hold.URL, "http://")))
	put("plugin_metadata/http-logger", `{"max_pending_entries":2}`)
	put("routes/1", fmt.Sprintf(`{"uri":"/hello","plugins":{"opentelemetry":{"sampler":{"name":"always_on"}},`+
		`"http-logger":{"uri":"%s/log","batch_max_size":1,"timeout":30}},"upstream":{"nodes":{%q:1}}}`, hold.URL, up.Addr()))
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /hello = %d %q", r.status, r.body)
		}
		return nil
	})
	const requests = 30
	t0 := time.Now()
	for range requests {
		if r := do(t, c, "GET", g.url("/hello"), "", nil, nil); r.status != 200 || r.body != "ok" {
			t.Fatalf("GET /hello: %d %q", r.status, r.body)
		}
	}
	if d := time.Since(t0); d > 5*time.Second {
		t.Errorf("%d requests took %v with the collector and the log server holding", requests, d)
	}
	var text string
	eventually(t, 10*time.Second, func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/m", mport))
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		text = string(b)
		// Of the 31 spans and entries, one is held by the upload, the
		// queue holds 4 spans and 2 entries less the one uploading.
		for _, want := range []string{
			`coregate_opentelemetry_dropped_spans_total{reason="queue_full"} 26`,
			`coregate_http_logger_dropped_entries_total{reason="queue_full"} 29`,
		} {
			if !strings.Contains(text, want+"\n") {
				return fmt.Errorf("no %s in\n%s", want, text)
			}
		}
		return nil
	})
	promCheck(t, promtool, text)
}
