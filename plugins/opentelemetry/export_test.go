package opentelemetry

import (
	"context"
	"encoding/hex"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"
)

// collector is an OTLP/HTTP receiver on loopback: it decodes each upload
// of /v1/traces and keeps it, with the headers it came with.
type collector struct {
	*httptest.Server
	mu      sync.Mutex
	uploads []*collectorpb.ExportTraceServiceRequest
	headers []http.Header
	status  int // the answer; 200 when 0
}

func newCollector(t testing.TB) *collector {
	c := &collector{}
	c.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collectorpb.ExportTraceServiceRequest{}
		if r.URL.Path != "/v1/traces" || r.Header.Get("Content-Type") != "application/x-protobuf" || err != nil ||
			proto.Unmarshal(body, req) != nil {
			t.Errorf("upload %s %s (%s): %v", r.Method, r.URL.Path, r.Header.Get("Content-Type"), err)
			w.WriteHeader(400)
			return
		}
		c.mu.Lock()
		c.uploads = append(c.uploads, req)
		c.headers = append(c.headers, r.Header.Clone())
		status := c.status
		c.mu.Unlock()
		if status != 0 {
			w.WriteHeader(status)
			return
		}
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(c.Close)
	return c
}

// spans are the spans received, in order.
func (c *collector) spans() []*tracepb.Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []*tracepb.Span
	for _, u := range c.uploads {
		for _, rs := range u.ResourceSpans {
			for _, ss := range rs.ScopeSpans {
				out = append(out, ss.Spans...)
			}
		}
	}
	return out
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after 10 s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func testConfig(addr string) ExportConfig {
	return ExportConfig{Address: addr, RequestTimeout: 3 * time.Second, Hostname: "gw-1",
		MaxExportBatchSize: 4, BatchTimeout: 50 * time.Millisecond, InactiveTimeout: 10 * time.Millisecond}
}

func startExporter(t *testing.T, q *Queue, cfg ExportConfig) (*Exporter, func()) {
	e := NewExporter(q, cfg)
	if err := e.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { e.Run(ctx); close(done) }()
	stop := func() {
		cancel()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			t.Error("the exporter did not stop")
		}
	}
	t.Cleanup(stop)
	return e, stop
}

// record queues a span numbered i: parent given for odd i, status 200 or
// (i%5 == 0) 502 from the upstream.
func record(q *Queue, i int) bool {
	s := q.Reserve()
	if s == nil {
		return false
	}
	s.SC = SpanContext{Flags: 1}
	s.SC.TraceID[15], s.SC.SpanID[7] = byte(i+1), byte(i+1)
	if i%2 == 1 {
		s.Parent[0] = 0xaa
	}
	s.Start, s.End = int64(1e18+i), int64(1e18+i+1000)
	s.Status, s.FromUpstream = 200, true
	if i%5 == 0 {
		s.Status = 502
	}
	s.SetName([]byte("GET /r" + strconv.Itoa(i)))
	s.AddAttr([]byte("apisix.route_name"), []byte("r"+strconv.Itoa(i)))
	q.Commit(s)
	return true
}

// TestExport: spans queued reach a real OTLP/HTTP collector, in batches
// of at most max_export_batch_size, with the resource, the request
// headers, the ids, parent, times, name, attributes and status APISIX's
// log phase gives; a partial batch leaves after batch_timeout.
func TestExport(t *testing.T) {
	c := newCollector(t)
	q := NewQueue(64, 4)
	cfg := testConfig(strings.TrimPrefix(c.URL, "http://"))
	cfg.Headers = map[string]string{"X-Api-Key": "k1"}
	cfg.Resource = map[string]any{"deployment": "test", "weight": 1.5, "canary": true}
	e, _ := startExporter(t, q, cfg)
	for i := range 10 {
		if !record(q, i) {
			t.Fatal("queue full")
		}
	}
	waitFor(t, "10 spans exported", func() bool { return e.Exported() == 10 })
	spans := c.spans()
	if len(spans) != 10 {
		t.Fatalf("%d spans received", len(spans))
	}
	c.mu.Lock()
	for i, u := range c.uploads {
		n := len(u.ResourceSpans[0].ScopeSpans[0].Spans)
		if n > 4 {
			t.Errorf("upload %d: %d spans, max_export_batch_size 4", i, n)
		}
		if got := c.headers[i].Get("X-Api-Key"); got != "k1" {
			t.Errorf("upload %d: X-Api-Key %q", i, got)
		}
		rs := u.ResourceSpans[0]
		var res []string
		for _, kv := range rs.Resource.Attributes {
			res = append(res, kv.Key+"="+kv.Value.String())
		}
		if want := `hostname=string_value:"gw-1" service.name=string_value:"APISIX" canary=bool_value:true ` +
			`deployment=string_value:"test" weight=double_value:1.5`; strings.Join(res, " ") != want {
			t.Errorf("resource %q, want %q", strings.Join(res, " "), want)
		}
		if rs.ScopeSpans[0].Scope.GetName() != "opentelemetry-lua" {
			t.Errorf("scope %v", rs.ScopeSpans[0].Scope)
		}
	}
	c.mu.Unlock()
	for i, s := range spans {
		if s.Name != "GET /r"+strconv.Itoa(i) || s.Kind != tracepb.Span_SPAN_KIND_SERVER ||
			s.TraceId[15] != byte(i+1) || s.SpanId[7] != byte(i+1) ||
			s.StartTimeUnixNano != uint64(1e18+i) || s.EndTimeUnixNano != uint64(1e18+i+1000) {
			t.Errorf("span %d: %v", i, s)
		}
		if wantParent := i%2 == 1; (hex.EncodeToString(s.ParentSpanId) == "aa00000000000000") != wantParent ||
			!wantParent && len(s.ParentSpanId) != 0 {
			t.Errorf("span %d: parent %x", i, s.ParentSpanId)
		}
		attrs := map[string]string{}
		for _, kv := range s.Attributes {
			attrs[kv.Key] = kv.Value.String()
		}
		status := 200
		if i%5 == 0 {
			status = 502
		}
		if attrs["apisix.route_name"] != `string_value:"r`+strconv.Itoa(i)+`"` ||
			attrs["apisix.response_source"] != `string_value:"upstream"` ||
			attrs["http.status_code"] != "int_value:"+strconv.Itoa(status) ||
			attrs["http.response.status_code"] != "int_value:"+strconv.Itoa(status) {
			t.Errorf("span %d: attributes %v", i, attrs)
		}
		if isErr := s.Status.GetCode() == tracepb.Status_STATUS_CODE_ERROR; isErr != (status >= 500) ||
			isErr && s.Status.GetMessage() != "upstream error: 502" {
			t.Errorf("span %d: status %v", i, s.Status)
		}
	}
}

// TestExportFailure: a collector that refuses leaves the spans counted
// failed (in FailedCounter too), not retried, the queue drained so that the loop keeps
// recording; the spans queued when the exporter stops are sent then.
func TestExportFailure(t *testing.T) {
	c := newCollector(t)
	c.status = 500
	q := NewQueue(8, 4)
	cfg := testConfig(c.URL)
	cfg.FailedCounter = new(atomic.Uint64)
	e, stop := startExporter(t, q, cfg)
	for i := range 8 {
		record(q, i)
	}
	waitFor(t, "8 spans failed", func() bool { return e.Failed() == 8 && cfg.FailedCounter.Load() == 8 })
	if q.Len() != 0 || e.Exported() != 0 {
		t.Fatalf("queue %d, exported %d", q.Len(), e.Exported())
	}
	c.mu.Lock()
	c.status = 0
	c.mu.Unlock()

	// A long batch_timeout: only the stop sends these.
	e2, stop2 := startExporter(t, NewQueue(8, 100), ExportConfig{Address: c.URL, RequestTimeout: 3 * time.Second,
		MaxExportBatchSize: 100, BatchTimeout: time.Hour, InactiveTimeout: time.Hour})
	stop()
	for i := range 3 {
		record(e2.q, i)
	}
	time.Sleep(50 * time.Millisecond)
	if e2.Exported() != 0 {
		t.Fatalf("exported %d before the stop", e2.Exported())
	}
	stop2()
	if e2.Exported() != 3 {
		t.Errorf("exported %d at the stop, want 3", e2.Exported())
	}
}
