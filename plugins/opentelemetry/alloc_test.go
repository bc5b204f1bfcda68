//go:build !race

package opentelemetry

import (
	"testing"

	"coregate/plugins/plugintest"
)

// TestAllocLoopSide guards what the event loop does for a sampled
// request: a traceparent read and written, a sampling decision, a span
// recorded into the queue; and the consumer's reading of it.
func TestAllocLoopSide(t *testing.T) {
	q := NewQueue(16, 4)
	tp := []byte("00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01")
	out := make([]byte, 0, 64)
	pb := ParentBase(TraceIDRatio(0.5))
	method, route := []byte("GET"), []byte("/hello*")
	allocs := testing.AllocsPerRun(500, func() {
		parent, ok := ParseTraceparent(tp)
		id, _ := ParseTraceID(tp[3:35])
		if !pb.Sample(id, parent, ok) {
			t.Fatal("a sampled parent not followed")
		}
		out = AppendTraceparent(out[:0], parent)
		if s := q.Reserve(); s != nil {
			s.SC = parent
			s.SetName(method, []byte(" "), route)
			s.AddAttr([]byte("http.route"), route)
			q.Commit(s)
		}
		if s := q.Next(); s != nil {
			_ = s.Name()
			q.Done()
		}
	})
	if allocs != 0 {
		t.Errorf("the loop's side allocates %.1f times, want 0", allocs)
	}
}

// TestAllocPhases guards the plugin's rewrite and log phases for sampled
// requests with and without a client traceparent, and one not sampled,
// the $opentelemetry_* variables set (set_ngx_var);
// the exporter, its batch never full nor due, stays idle meanwhile.
func TestAllocPhases(t *testing.T) {
	col := newCollector(t)
	idle := `,"batch_span_processor":{"max_queue_size":4096,"max_export_batch_size":4096,"batch_timeout":3600,"inactive_timeout":3600}`
	for _, conf := range []string{
		`{"sampler":{"name":"always_on"},"additional_attributes":["route_id","http_x_user"],"additional_header_prefix_attributes":["x-user","x-*"]}`,
		`{"sampler":{"name":"parent_base","options":{"root":{"name":"trace_id_ratio","options":{"fraction":0.5}}}}}`,
		`{}`,
	} {
		in := build(t, conf, col, `,"trace_id_source":"x-request-id","set_ngx_var":true`+idle)
		for _, c := range []*plugintest.Ctx{
			plugintest.NewCtx("GET", "/hello").WithHeader("X-User", "u1").WithHeader("X-Tenant", "t").WithHeader("x-user", "u2"),
			plugintest.NewCtx("GET", "/hello").WithHeader("traceparent", "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"),
			plugintest.NewCtx("GET", "/hello").WithHeader("X-Request-Id", "aaaabbbbccccddddeeeeffff00001111"),
		} {
			c.WithVar("matched_uri", "/hello*").WithVar("route_name", "hello").WithRoute("r1")
			plugintest.AllocsPerRun(t, 200, func() {
				c.Reset()
				in.Rewrite(c)
				c.WithStatus(200)
				in.Log(c)
			})
		}
	}
}
