package worker

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"coregate/worker/accesslog"
	"coregate/worker/router"
)

// TestSetVar: a variable a plugin sets (opentelemetry's set_ngx_var) is
// read by the plugins after it and written by the access log; a variable
// that is not settable ($route_id) is left as it is; the next exchange
// starts with none set.
func TestSetVar(t *testing.T) {
	path := filepath.Join(t.TempDir(), "access.log")
	f, err := accesslog.Compile("$route_id|$opentelemetry_trace_id|$opentelemetry_span_id|$opentelemetry_context_traceparent", accesslog.EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	l, err := accesslog.Open(accesslog.Options{Path: path, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recorder{events: make([]string, 0, 256), seen: make([]byte, 0, 4096)}
	w := New(Config{Listen: []string{"127.0.0.1:0"}, AccessLog: l, AccessLogFormat: f})
	logged := `"log_vars":["opentelemetry_trace_id","opentelemetry_span_id","route_id"]`
	snap, err := compile(pluginSpec(t, []string{
		`{"id":"r1","uri":"/a","plugins":{"p-hi":{"set_vars":{"opentelemetry_trace_id":"4bf9","opentelemetry_span_id":"00f0","route_id":"x"}},` +
			`"p-lo":{` + logged + `}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
		`{"id":"r2","uri":"/b","plugins":{"p-hi":{"exit_at":"access","exit":200,"body":"b"},"p-lo":{` + logged + `}}}`,
	}, nil, nil, nil), router.HostURI, upstreamEnv{}, pluginSet{reg: probeRegistry(rec), env: w.cfg.Plugins}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	h := newHarnessSnap(t, w, snap)
	for _, tc := range []struct{ target, seen string }{
		{"/a", "4bf9;00f0;r1;"},
		{"/b", ";;r2;"},
	} {
		rec.reset()
		h.roundTrip([]byte("GET "+tc.target+" HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(upOK))
		if string(rec.seen) != tc.seen {
			t.Errorf("%s: log phase saw %q, want %q", tc.target, rec.seen, tc.seen)
		}
	}
	l.Close()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := "r1|4bf9|00f0|-\nr2|-|-|-\n"; string(b) != want {
		t.Errorf("access log\n%s\nwant\n%s", b, want)
	}
}
