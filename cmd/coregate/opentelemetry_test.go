package main

import (
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/protobuf/proto"

	"coregate/admin/adminapi"
)

// otlpReceiver is an OTLP/HTTP collector on loopback: it decodes every
// upload of /v1/traces and keeps the spans with their resource's
// service.name.
type otlpReceiver struct {
	*httptest.Server
	mu      sync.Mutex
	spans   []*tracepb.Span
	service []string
}

func newOTLPReceiver(t *testing.T) *otlpReceiver {
	rc := &otlpReceiver{}
	rc.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := io.ReadAll(r.Body)
		req := &collectorpb.ExportTraceServiceRequest{}
		if err != nil || r.URL.Path != "/v1/traces" || proto.Unmarshal(body, req) != nil {
			t.Errorf("collector: %s %s: %v", r.Method, r.URL.Path, err)
			w.WriteHeader(400)
			return
		}
		rc.mu.Lock()
		for _, rs := range req.ResourceSpans {
			svc := ""
			for _, kv := range rs.Resource.GetAttributes() {
				if kv.Key == "service.name" {
					svc = kv.Value.GetStringValue()
				}
			}
			for _, ss := range rs.ScopeSpans {
				for _, s := range ss.Spans {
					rc.spans = append(rc.spans, s)
					rc.service = append(rc.service, svc)
				}
			}
		}
		rc.mu.Unlock()
		w.Header().Set("Content-Type", "application/x-protobuf")
		b, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
		_, _ = w.Write(b)
	}))
	t.Cleanup(rc.Close)
	return rc
}

// bySpanID is the spans received, by span id (hex), with their service.
func (rc *otlpReceiver) bySpanID() (map[string]*tracepb.Span, map[string]string) {
	rc.mu.Lock()
	defer rc.mu.Unlock()
	spans, svc := map[string]*tracepb.Span{}, map[string]string{}
	for i, s := range rc.spans {
		id := hex.EncodeToString(s.SpanId)
		spans[id], svc[id] = s, rc.service[i]
	}
	return spans, svc
}

func spanAttr(s *tracepb.Span, key string) string {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			if kv.Value.GetStringValue() != "" {
				return kv.Value.GetStringValue()
			}
			return fmt.Sprint(kv.Value.GetIntValue())
		}
	}
	return ""
}

// TestAdminAPIOpenTelemetry configures opentelemetry through the Admin
// API (its metadata naming a collector on loopback, routes with samplers)
// and follows real requests through the binary to the collector: the
// upstream gets a traceparent naming the request's span, in the client's
// trace when the client sent one; the span arrives with that id, the
// client's span as its parent, the route's name, the status (an error
// from 500 on) and the metadata's resource; trace_id_ratio 0.5 samples
// about half the traces, and exactly those the upstream saw flagged are
// exported. The plugin is listed, its schema served, a bad sampler
// refused with APISIX's message.
func TestAdminAPIOpenTelemetry(t *testing.T) {
	t.Parallel()
	rc := newOTLPReceiver(t)
	var mu sync.Mutex
	seen := map[string]string{} // request tag → the traceparent the upstream got
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen[r.URL.Query().Get("n")] = r.Header.Get("traceparent")
		mu.Unlock()
		if strings.HasPrefix(r.URL.Path, "/err") {
			w.WriteHeader(503)
		}
		_, _ = w.Write([]byte("ok"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"opentelemetry"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/opentelemetry", ""); r.status != 200 || !strings.Contains(r.body, `"sampler"`) {
		t.Fatalf("schema/plugins/opentelemetry: %d %s", r.status, r.body)
	}
	route := func(uri, name, conf string) string {
		return fmt.Sprintf(`{"uri":%q,"name":%q,"plugins":{"opentelemetry":%s},"upstream":{"nodes":{%q:1}}}`, uri, name, conf, up.Addr())
	}
	if r := admin.do(t, c, "PUT", "routes/bad", route("/bad", "bad", `{"sampler":{"name":"foo"}}`)); r.status != 400 ||
		!strings.Contains(r.body, `failed to check the configuration of plugin opentelemetry err: property \"sampler\" validation failed: property \"name\" validation failed: matches none of the enum values`) {
		t.Fatalf("a bad sampler: %d %s", r.status, r.body)
	}
	md := fmt.Sprintf(`{"collector":{"address":%q},"resource":{"service.name":"gw-test"},`+
		`"batch_span_processor":{"batch_timeout":0.1,"inactive_timeout":0.05,"max_export_batch_size":16}}`, strings.TrimPrefix(rc.URL, "http://"))
	if r := admin.do(t, c, "PUT", "plugin_metadata/opentelemetry", md); r.status != 201 && r.status != 200 {
		t.Fatalf("PUT plugin_metadata/opentelemetry: %d %s", r.status, r.body)
	}
	for id, body := range map[string]string{
		"1": route("/hello", "traced", `{"sampler":{"name":"always_on"}}`),
		"2": route("/ratio", "ratio", `{"sampler":{"name":"trace_id_ratio","options":{"fraction":0.5}}}`),
		"3": route("/err", "failing", `{"sampler":{"name":"always_on"}}`),
	} {
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	// The three routes may reach the workers in more than one reload:
	// wait for the one that holds them all, or /err may still be a 404.
	eventually(t, 10*time.Second, func() error {
		if !strings.Contains(g.out.String(), `msg="config reloaded" proc=supervisor routes=3 `) {
			return fmt.Errorf("no reload of the 3 routes logged")
		}
		r := do(t, c, "GET", g.url("/hello?n=warm"), "", nil, nil)
		mu.Lock()
		tp := seen["warm"]
		mu.Unlock()
		if r.status != 200 || tp == "" {
			return fmt.Errorf("GET /hello: %d, traceparent %q", r.status, tp)
		}
		return nil
	})

	// Twenty traced requests, every other one in a client's trace.
	type sent struct{ tag, parentTrace, parentSpan string }
	var reqs []sent
	for i := range 20 {
		s := sent{tag: fmt.Sprint("h", i)}
		hdr := map[string]string{}
		if i%2 == 1 {
			s.parentTrace, s.parentSpan = fmt.Sprintf("%032x", 0xabc000+i), fmt.Sprintf("%016x", 0xdef000+i)
			hdr["traceparent"] = "00-" + s.parentTrace + "-" + s.parentSpan + "-01"
		}
		if r := do(t, c, "GET", g.url("/hello?n="+s.tag), "", hdr, nil); r.status != 200 {
			t.Fatalf("GET /hello: %d", r.status)
		}
		reqs = append(reqs, s)
	}
	if r := do(t, c, "GET", g.url("/err?n=e"), "", nil, nil); r.status != 503 {
		t.Fatalf("GET /err: %d", r.status)
	}
	// trace_id_ratio 0.5 over 200 new traces.
	for i := range 200 {
		if r := do(t, c, "GET", g.url(fmt.Sprint("/ratio?n=r", i)), "", nil, nil); r.status != 200 {
			t.Fatalf("GET /ratio: %d", r.status)
		}
	}
	mu.Lock()
	sampledRatio := map[string]bool{} // span ids the upstream saw flagged
	for i := range 200 {
		tp := seen[fmt.Sprint("r", i)]
		if len(tp) != 55 {
			t.Fatalf("ratio request %d: upstream traceparent %q", i, tp)
		}
		if strings.HasSuffix(tp, "-01") {
			sampledRatio[tp[36:52]] = true
		}
	}
	mu.Unlock()
	if n := len(sampledRatio); n < 60 || n > 140 {
		t.Errorf("trace_id_ratio 0.5: %d of 200 traces sampled", n)
	}

	mu.Lock()
	upstreamSaw := map[string]string{}
	for _, s := range reqs {
		upstreamSaw[s.tag] = seen[s.tag]
	}
	errTP := seen["e"]
	mu.Unlock()
	want := 21 + len(sampledRatio)
	// Wait for each span the upstream saw flagged, not for a count: the
	// warm-up's span counts too, and a late one was left out.
	eventually(t, 10*time.Second, func() error {
		spans, _ := rc.bySpanID()
		missing := 0
		for id := range sampledRatio {
			if spans[id] == nil {
				missing++
			}
		}
		for _, s := range reqs {
			if tp := upstreamSaw[s.tag]; len(tp) == 55 && spans[tp[36:52]] == nil {
				missing++
			}
		}
		if len(errTP) == 55 && spans[errTP[36:52]] == nil {
			missing++
		}
		if len(spans) < want || missing > 0 {
			return fmt.Errorf("%d spans received, want at least %d; %d flagged upstream not received", len(spans), want, missing)
		}
		return nil
	})
	spans, svc := rc.bySpanID()
	for _, s := range reqs {
		tp := upstreamSaw[s.tag]
		if len(tp) != 55 || !strings.HasSuffix(tp, "-01") {
			t.Fatalf("%s: upstream traceparent %q", s.tag, tp)
		}
		if s.parentTrace != "" && tp[3:35] != s.parentTrace {
			t.Errorf("%s: upstream trace %s, the client's is %s", s.tag, tp[3:35], s.parentTrace)
		}
		sp := spans[tp[36:52]]
		if sp == nil {
			t.Errorf("%s: no span %s received", s.tag, tp[36:52])
			continue
		}
		if hex.EncodeToString(sp.TraceId) != tp[3:35] || hex.EncodeToString(sp.ParentSpanId) != s.parentSpan && !(s.parentSpan == "" && len(sp.ParentSpanId) == 0) {
			t.Errorf("%s: span trace %x parent %x; upstream saw %s, client's parent %q", s.tag, sp.TraceId, sp.ParentSpanId, tp, s.parentSpan)
		}
		if sp.Name != "GET /hello" || spanAttr(sp, "apisix.route_name") != "traced" || spanAttr(sp, "http.status_code") != "200" ||
			sp.Kind != tracepb.Span_SPAN_KIND_SERVER || svc[tp[36:52]] != "gw-test" || sp.EndTimeUnixNano < sp.StartTimeUnixNano {
			t.Errorf("%s: span %v (service %q)", s.tag, sp, svc[tp[36:52]])
		}
	}
	if sp := spans[errTP[36:min(52, len(errTP))]]; sp == nil || sp.Status.GetCode() != tracepb.Status_STATUS_CODE_ERROR ||
		sp.Status.GetMessage() != "upstream error: 503" || spanAttr(sp, "http.status_code") != "503" {
		t.Errorf("the 503's span: %v", sp)
	}
	ratioSpans := 0
	for id, sp := range spans {
		if spanAttr(sp, "apisix.route_name") == "ratio" {
			ratioSpans++
			if !sampledRatio[id] {
				t.Errorf("span %s exported, its traceparent was not flagged sampled", id)
			}
		}
	}
	if ratioSpans != len(sampledRatio) {
		t.Errorf("ratio route: %d spans exported, %d flagged sampled upstream", ratioSpans, len(sampledRatio))
	}

	// New metadata: the spans go to the new collector, with its resource.
	rc2 := newOTLPReceiver(t)
	md2 := fmt.Sprintf(`{"collector":{"address":%q},"resource":{"service.name":"gw-two"},`+
		`"batch_span_processor":{"batch_timeout":0.1,"inactive_timeout":0.05}}`, strings.TrimPrefix(rc2.URL, "http://"))
	if r := admin.do(t, c, "PUT", "plugin_metadata/opentelemetry", md2); r.status != 200 && r.status != 201 {
		t.Fatalf("PUT plugin_metadata/opentelemetry again: %d %s", r.status, r.body)
	}
	var moved []string // the span ids of the requests since
	eventually(t, 15*time.Second, func() error {
		tag := fmt.Sprint("moved", len(moved))
		if r := do(t, c, "GET", g.url("/hello?n="+tag), "", nil, nil); r.status != 200 {
			return fmt.Errorf("GET /hello: %d", r.status)
		}
		mu.Lock()
		if tp := seen[tag]; len(tp) == 55 {
			moved = append(moved, tp[36:52])
		}
		mu.Unlock()
		spans, svc := rc2.bySpanID()
		for _, id := range moved {
			if spans[id] != nil && svc[id] == "gw-two" {
				return nil
			}
		}
		return fmt.Errorf("the new collector has %d spans, none of the %d requests since", len(spans), len(moved))
	})
	before, _ := rc.bySpanID()
	time.Sleep(300 * time.Millisecond) // the old exporter's batch_timeout, and more
	if after, _ := rc.bySpanID(); len(after) != len(before) {
		t.Errorf("the old collector still receives: %d spans, then %d", len(before), len(after))
	}
}
