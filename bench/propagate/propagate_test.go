package propagate

import (
	"path/filepath"
	"slices"
	"testing"
	"time"

	"coregate/admin/nodeconf"

	"github.com/google/go-cmp/cmp"
)

func TestParseReloads(t *testing.T) {
	log := []byte(`time=2026-12-02T18:00:00.100Z level=INFO msg="worker started" proc=supervisor id=0
time=2026-12-02T18:00:01.250Z level=INFO msg="config reloaded" proc=supervisor routes=101 workers=1 took=2.5ms build=1.2ms bytes=300
time=2026-12-02T18:00:01.300Z level=ERROR msg="config reload refused by workers" proc=supervisor routes=102 workers=1 refused=1 took=1ms
time=2026-12-02T18:00:02.000Z level=INFO msg="config reloaded" proc=supervisor routes=5100 workers=2 took=40ms build=30ms bytes=900
`)
	at := func(s string) time.Time {
		t.Helper()
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	want := []Window{
		{From: at("2026-12-02T18:00:01.2475Z"), To: at("2026-12-02T18:00:01.250Z")},
		{From: at("2026-12-02T18:00:01.960Z"), To: at("2026-12-02T18:00:02.000Z")},
	}
	if diff := cmp.Diff(want, parseReloads(log)); diff != "" {
		t.Errorf("reloads (-want +got):\n%s", diff)
	}
}

// TestSlowTimeline: slow requests sorted by the bulk load's phases, and
// those that waited across a reload counted against the share of time
// reloads took.
func TestSlowTimeline(t *testing.T) {
	t0 := time.Date(2026, 12, 2, 18, 0, 0, 0, time.UTC)
	ms := func(n int) time.Time { return t0.Add(time.Duration(n) * time.Millisecond) }
	b := &Bulk{
		Start: t0, Put: 5 * time.Second, Live: 6 * time.Second,
		// 300 ms of reloads in the 6 s from the first PUT to the last
		// route; the first began before the load and counts from it.
		Reloads: []Window{{ms(-50), ms(100)}, {ms(2000), ms(2100)}, {ms(5500), ms(5600)}},
		Traffic: Traffic{SlowDue: []time.Time{
			ms(-500), // before
			ms(95),   // in the first reload
			ms(1000), // during the PUTs, no reload
			ms(1995), // waited into the second reload
			ms(5590), // until the last route, in the third
			ms(5700), // until the last route, no reload
			ms(7000), // after
		}},
	}
	before, puts, building, after, inReload, covered := b.SlowTimeline(10 * time.Millisecond)
	got := []int{before, puts, building, after, inReload}
	if diff := cmp.Diff([]int{1, 3, 2, 1, 3}, got); diff != "" {
		t.Errorf("before, during the PUTs, until the last route, after, across a reload (-want +got):\n%s", diff)
	}
	if want := 0.3 / 6; covered < want-1e-9 || covered > want+1e-9 {
		t.Errorf("covered %v, want %v", covered, want)
	}
}

// TestConfig: the gateway's config.yaml parses, with the access log and
// its format only when asked for.
func TestConfig(t *testing.T) {
	for _, access := range []bool{false, true} {
		e := &env{o: defaults(Options{Dir: t.TempDir(), AccessLog: access})}
		c, warn, err := nodeconf.Parse([]byte(e.config(9080, 9180)), filepath.Join(e.o.Dir, "config.yaml"))
		if err != nil {
			t.Fatalf("access log %v: %v", access, err)
		}
		if len(warn) > 0 {
			t.Errorf("access log %v: warnings %v", access, warn)
		}
		h := c.NginxConfig.HTTP
		if h.EnableAccessLog != access {
			t.Errorf("enable_access_log %v, want %v", h.EnableAccessLog, access)
		}
		if access && (h.AccessLogFormat != AccessLogFormat || h.AccessLog != filepath.Join(e.o.Dir, "access.log")) {
			t.Errorf("access log %q format %q, want %q in the working directory", h.AccessLog, h.AccessLogFormat, AccessLogFormat)
		}
		if p := c.Ports(); !slices.Equal(p, []int{9080, 9180}) {
			t.Errorf("listens on %v, want [9080 9180]: no TLS listener", p)
		}
		if c.NginxConfig.WorkerProcesses != 1 {
			t.Errorf("worker_processes %d, want 1", c.NginxConfig.WorkerProcesses)
		}
	}
}
