package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
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

// TestOpenTelemetrySetNgxVar: with the metadata's set_ngx_var, the access
// log's format writes $opentelemetry_trace_id, $opentelemetry_span_id and
// $opentelemetry_context_traceparent of each request, the span the
// upstream's traceparent names; a route without opentelemetry writes
// them as unset ("-").
func TestOpenTelemetrySetNgxVar(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	var seen atomic.Value
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		seen.Store(r.Header.Get("traceparent"))
		_, _ = w.Write([]byte("ok"))
	})
	yaml := standaloneYAML(map[string][]obj{
		"routes": {
			{"id": "traced", "uri": "/traced", "upstream": upstreamOf(nodes(up.Addr()), nil),
				"plugins": obj{"opentelemetry": obj{"sampler": obj{"name": "always_on"}}}},
			{"id": "plain", "uri": "/plain", "upstream": upstreamOf(nodes(up.Addr()), nil)},
		},
		"plugin_metadata": {{"id": "opentelemetry", "set_ngx_var": true,
			"collector": obj{"address": strings.TrimPrefix(rc.URL, "http://")}}},
	})
	g := startSupervisor(t, yaml, accessLogConfig(1,
		"    access_log_format: '$request_uri $opentelemetry_trace_id $opentelemetry_span_id $opentelemetry_context_traceparent'\n"), 1)
	path := filepath.Join(g.dir, "logs", "access.log")
	c := newClient(t)
	if r := do(t, c, "GET", g.url("/traced"), "", nil, nil); r.status != 200 {
		t.Fatalf("GET /traced: %d %q", r.status, r.body)
	}
	tp, _ := seen.Load().(string)
	if r := do(t, c, "GET", g.url("/plain"), "", nil, nil); r.status != 200 {
		t.Fatalf("GET /plain: %d %q", r.status, r.body)
	}
	lines := waitFile(t, path, 2)
	if len(tp) != 55 {
		t.Fatalf("the upstream's traceparent %q", tp)
	}
	want := []string{"/traced " + tp[3:35] + " " + tp[36:52] + " " + tp, "/plain - - -"}
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("access log\n%s\nwant\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}
