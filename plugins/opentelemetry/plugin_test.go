package opentelemetry

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// TestSchemas: APISIX's schema and metadata schema compile, take their
// examples and refuse what APISIX refuses, with its messages.
func TestSchemas(t *testing.T) {
	s, err := spec.CompileSchema(Name, schema)
	if err != nil {
		t.Fatal(err)
	}
	m, err := spec.CompileSchema(Name+".metadata", metadataSchema)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		s          *spec.Schema
		conf, want string
	}{
		{s, `{}`, ""},
		{s, `{"sampler":{"name":"always_on"}}`, ""},
		{s, `{"sampler":{"name":"parent_base","options":{"root":{"name":"trace_id_ratio","options":{"fraction":0.5}}}}}`, ""},
		{s, `{"additional_attributes":["http_x_user"],"additional_header_prefix_attributes":["x-my-*"]}`, ""},
		{s, `{"sampler":{"name":"foo"}}`, `property "sampler" validation failed: property "name" validation failed: matches none of the enum values`},
		{s, `{"sampler":{"name":"parent_base","options":{"root":{"name":"parent_base"}}}}`,
			`property "sampler" validation failed: property "options" validation failed: property "root" validation failed: property "name" validation failed: matches none of the enum values`},
		{s, `{"additional_attributes":[""]}`, `property "additional_attributes" validation failed: failed to validate item 1: string too short, expected at least 1, got 0`},
		{m, `{"collector":{"address":"127.0.0.1:4318","request_timeout":3,"request_headers":{"foo":"bar","n":1,"b":true}},"trace_id_source":"x-request-id","resource":{"service.name":"gw"}}`, ""},
		{m, `{"trace_id_source":"header"}`, `property "trace_id_source" validation failed: matches none of the enum values`},
		{m, `{"collector":{"request_timeout":1.5}}`, `property "collector" validation failed: property "request_timeout" validation failed: wrong type: expected integer, got number`},
		{m, `{"resource":{"a":[1]}}`, `property "resource" validation failed: failed to validate additional property a: value should match only one schema, but matches none`},
	} {
		err := tc.s.Validate(json.RawMessage(tc.conf))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: err = %v, want …%s", tc.conf, err, tc.want)
		}
	}
}

// build builds a configuration with metadata exporting to c.
func build(t testing.TB, conf string, c *collector, extra string) *instance {
	t.Helper()
	md := fmt.Sprintf(`{"collector":{"address":%q},"batch_span_processor":{"batch_timeout":0.05,"inactive_timeout":0.01,"max_export_batch_size":8}%s}`,
		strings.TrimPrefix(c.URL, "http://"), extra)
	env := plugins.NewLocalEnv()
	env.Metadata = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(md)})
	in, err := Plugin{}.Build(json.RawMessage(conf), env)
	if err != nil {
		t.Fatal(err)
	}
	return in.(*instance)
}

// request runs a request through the instance's phases: rewrite, an
// upstream's 200, log.
func request(in *instance, c *plugintest.Ctx) {
	c.WithVar("matched_uri", "/hello*").WithVar("route_name", "hello")
	in.Rewrite(c)
	c.WithStatus(200)
	in.Log(c)
}

// TestPropagation: the upstream gets a traceparent of this span (the
// client's trace, a new span id, the sampling decision as its flag); a
// sampled span reaches the collector with the client's span as its
// parent, the route's name, APISIX's attributes and the status.
func TestPropagation(t *testing.T) {
	col := newCollector(t)
	in := build(t, `{"sampler":{"name":"always_on"},"additional_attributes":["route_id"]}`, col, "")
	const parent = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
	c := plugintest.NewCtx("GET", "/hello/x?a=1").WithHeader("traceparent", parent).WithRoute("r1").WithHeader("User-Agent", "ua")
	request(in, c)
	up := string(c.UpstreamHeader("traceparent"))
	sc, ok := ParseTraceparent([]byte(up))
	if !ok || !strings.HasPrefix(up, "00-4bf92f3577b34da6a3ce929d0e0e4736-") || strings.Contains(up, "00f067aa0ba902b7") || !sc.Sampled() {
		t.Fatalf("upstream traceparent %q", up)
	}
	waitFor(t, "the span", func() bool { return len(col.spans()) == 1 })
	s := col.spans()[0]
	if hex.EncodeToString(s.TraceId) != "4bf92f3577b34da6a3ce929d0e0e4736" || hex.EncodeToString(s.ParentSpanId) != "00f067aa0ba902b7" ||
		hex.EncodeToString(s.SpanId) != up[36:52] || s.Name != "GET /hello*" {
		t.Errorf("span %v, upstream saw %s", s, up)
	}
	attrs := map[string]string{}
	for _, kv := range s.Attributes {
		attrs[kv.Key] = kv.Value.GetStringValue() + fmt.Sprint(kv.Value.GetIntValue())
	}
	for k, v := range map[string]string{"http.method": "GET0", "url.path": "/hello/x0", "http.target": "/hello/x?a=10",
		"user_agent.original": "ua0", "apisix.route_name": "hello0", "http.route": "/hello*0", "route_id": "r10",
		"http.status_code": "200", "apisix.route_id": "r10"} {
		if attrs[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, attrs[k], v, attrs)
		}
	}

	// always_off: the flag unset upstream, no span.
	off := build(t, `{}`, col, "")
	c = plugintest.NewCtx("GET", "/hello")
	request(off, c)
	if sc, ok := ParseTraceparent(c.UpstreamHeader("traceparent")); !ok || sc.Sampled() {
		t.Errorf("always_off: upstream traceparent %q", c.UpstreamHeader("traceparent"))
	}
}

// TestSampling: trace_id_ratio samples its share of new traces;
// parent_base follows the client's flag and its root otherwise;
// trace_id_source x-request-id takes a valid X-Request-Id as the trace.
func TestSampling(t *testing.T) {
	col := newCollector(t)
	ratio := build(t, `{"sampler":{"name":"trace_id_ratio","options":{"fraction":0.3}}}`, col, "")
	sampled := 0
	for range 1000 {
		c := plugintest.NewCtx("GET", "/hello")
		request(ratio, c)
		if sc, _ := ParseTraceparent(c.UpstreamHeader("traceparent")); sc.Sampled() {
			sampled++
		}
	}
	if sampled < 240 || sampled > 360 {
		t.Errorf("trace_id_ratio 0.3: %d of 1000 sampled", sampled)
	}
	waitFor(t, "the sampled spans", func() bool { return len(col.spans()) == sampled })

	pb := build(t, `{"sampler":{"name":"parent_base","options":{"root":{"name":"always_off"}}}}`, col, "")
	for _, tc := range []struct {
		parent string
		want   bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", false},
		{"", false},
		{"garbage", false},
	} {
		c := plugintest.NewCtx("GET", "/hello")
		if tc.parent != "" {
			c.WithHeader("traceparent", tc.parent)
		}
		request(pb, c)
		if sc, ok := ParseTraceparent(c.UpstreamHeader("traceparent")); !ok || sc.Sampled() != tc.want {
			t.Errorf("parent_base, parent %q: upstream %q", tc.parent, c.UpstreamHeader("traceparent"))
		}
	}

	rid := build(t, `{"sampler":{"name":"always_on"}}`, col, `,"trace_id_source":"x-request-id"`)
	c := plugintest.NewCtx("GET", "/hello").WithHeader("X-Request-Id", "AAAABBBBCCCCDDDDEEEEFFFF00001111")
	request(rid, c)
	if up := string(c.UpstreamHeader("traceparent")); !strings.HasPrefix(up, "00-aaaabbbbccccddddeeeeffff00001111-") {
		t.Errorf("x-request-id: upstream %q", up)
	}
	c = plugintest.NewCtx("GET", "/hello").WithHeader("X-Request-Id", "not-a-trace-id")
	request(rid, c)
	if _, ok := ParseTraceparent(c.UpstreamHeader("traceparent")); !ok {
		t.Errorf("an X-Request-Id not a trace id: upstream %q", c.UpstreamHeader("traceparent"))
	}
}

// TestNoMetadata: without the plugin's metadata the instance does
// nothing, as APISIX's.
func TestNoMetadata(t *testing.T) {
	in, err := Plugin{}.Build(json.RawMessage(`{"sampler":{"name":"always_on"}}`), plugins.NewLocalEnv())
	if err != nil {
		t.Fatal(err)
	}
	c := plugintest.NewCtx("GET", "/hello")
	request(in.(*instance), c)
	if v := c.UpstreamHeader("traceparent"); v != nil {
		t.Errorf("upstream traceparent %q", v)
	}
}

// TestHeaderPrefixAttributes: a prefix ending in '*' adds every header
// whose lower-cased name begins with it, named lower-case, a repeated
// one's values joined with ", "; a name adds that header.
func TestHeaderPrefixAttributes(t *testing.T) {
	col := newCollector(t)
	in := build(t, `{"sampler":{"name":"always_on"},"additional_header_prefix_attributes":["x-my-*","x-tenant","X-My-*"]}`, col, "")
	c := plugintest.NewCtx("GET", "/hello").WithHeader("X-My-A", "1").WithHeader("X-Other", "o").
		WithHeader("x-my-a", "2").WithHeader("X-MY-B", "b").WithHeader("X-Tenant", "t1")
	request(in, c)
	waitFor(t, "the span", func() bool { return len(col.spans()) == 1 })
	got := map[string]string{}
	for _, kv := range col.spans()[0].Attributes {
		got[kv.Key] = kv.Value.GetStringValue()
	}
	for k, v := range map[string]string{"x-my-a": "1, 2", "x-my-b": "b", "x-tenant": "t1"} {
		if got[k] != v {
			t.Errorf("attribute %s = %q, want %q (all: %v)", k, got[k], v, got)
		}
	}
	for _, k := range []string{"x-other", "X-My-A", "X-MY-B"} {
		if _, ok := got[k]; ok {
			t.Errorf("attribute %s added", k)
		}
	}
}

// TestDropOnQueueFull: with a collector that holds its first upload, the
// spans past the queue are dropped and counted in DroppedMetric's
// queue_full series, this worker's slot: past max_queue_size with
// drop_on_queue_full (the default), past overflow times it without.
func TestDropOnQueueFull(t *testing.T) {
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
	const requests = 40
	for _, tc := range []struct {
		drop     string
		capacity int
	}{{"", 4}, {`"drop_on_queue_full":true,`, 4}, {`"drop_on_queue_full":false,`, overflow * 4}} {
		md := fmt.Sprintf(`{"collector":{"address":%q,"request_timeout":10},"batch_span_processor":{%s"max_queue_size":4,`+
			`"batch_timeout":0.05,"inactive_timeout":0.01,"max_export_batch_size":1}}`, strings.TrimPrefix(hold.URL, "http://"), tc.drop)
		env := plugins.NewLocalEnv()
		env.Metadata = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(md)})
		i, err := Plugin{}.Build(json.RawMessage(`{"sampler":{"name":"always_on"}}`), env)
		if err != nil {
			t.Fatal(err)
		}
		in := i.(*instance)
		// The first span goes to the collector, which holds it.
		request(in, plugintest.NewCtx("GET", "/hello"))
		waitFor(t, "the upload to begin", func() bool { return in.q.Len() == 0 })
		for range requests - 1 {
			request(in, plugintest.NewCtx("GET", "/hello"))
		}
		want := uint64(requests - 1 - tc.capacity)
		if got := env.Metrics.Slot(DroppedMetric, "queue_full").Load(); got != want {
			t.Errorf("%s: %d spans dropped for a full queue, want %d", tc.drop, got, want)
		}
	}
}

// TestSetNgxVar: with set_ngx_var the rewrite phase sets
// $opentelemetry_context_traceparent (the traceparent the upstream gets),
// $opentelemetry_trace_id and $opentelemetry_span_id for the plugins
// after it and the access log, sampled or not; without it they stay
// unset.
func TestSetNgxVar(t *testing.T) {
	col := newCollector(t)
	vars := [3]httpvar.Var{httpvar.Parse("opentelemetry_context_traceparent"), httpvar.Parse("opentelemetry_trace_id"),
		httpvar.Parse("opentelemetry_span_id")}
	for _, sampler := range []string{"always_on", "always_off"} {
		in := build(t, `{"sampler":{"name":"`+sampler+`"}}`, col, `,"set_ngx_var":true`)
		c := plugintest.NewCtx("GET", "/hello")
		request(in, c)
		tp := string(c.UpstreamHeader("traceparent"))
		got := [3]string{string(c.Var(vars[0])), string(c.Var(vars[1])), string(c.Var(vars[2]))}
		if len(tp) != 55 || got != [3]string{tp, tp[3:35], tp[36:52]} {
			t.Errorf("%s: variables %q, upstream traceparent %q", sampler, got, tp)
		}
	}
	in := build(t, `{"sampler":{"name":"always_on"}}`, col, "")
	c := plugintest.NewCtx("GET", "/hello")
	request(in, c)
	for _, v := range vars {
		if got := c.Var(v); got != nil {
			t.Errorf("without set_ngx_var: %v = %q", v, got)
		}
	}
}

// TestExporterReleased: once no instance holds the exporter of the
// metadata (its routes dropped by a configuration change), it sends the
// spans it holds and stops; N such changes leave no exporter running.
func TestExporterReleased(t *testing.T) {
	col := newCollector(t)
	base := running.Load()
	const changes = 5
	for i := range changes {
		// A batch that only the stop sends.
		in := build(t, `{"sampler":{"name":"always_on"}}`, col,
			fmt.Sprintf(`,"resource":{"change":%d},"batch_span_processor":{"batch_timeout":3600,"inactive_timeout":3600,"max_export_batch_size":100}`, i))
		request(in, plugintest.NewCtx("GET", "/hello"))
	}
	deadline := time.Now().Add(10 * time.Second)
	for running.Load() > base || exporters.ref.Value() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("%d exporters running (%d before) after %d changes", running.Load(), base, changes)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	waitFor(t, "the spans held", func() bool { return len(col.spans()) == changes })
}
