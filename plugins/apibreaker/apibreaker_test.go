package apibreaker

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t *testing.T, conf string) *plugins.Phases { return plugintest.Build(t, Name, conf) }

// send takes c through p with the upstream answering status (when the
// breaker lets the request through), at the clock's time: the status the
// client got.
func send(p *plugins.Phases, c *plugintest.Ctx, status int) int {
	c.Reset()
	c.UpstreamStatus = status
	c.Figures.Upstreamed = true
	plugintest.Run(p, c)
	return c.Status()
}

// TestCheck: APISIX's refusals (t/plugin/api-breaker.t) and defaults.
func TestCheck(t *testing.T) {
	const pre = "failed to check the configuration of plugin api-breaker err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"break_response_code":502}`, ""},
		{`{"break_response_code":502,"break_response_body":"x","break_response_headers":[{"key":"a","value":"$remote_addr"}]}`, ""},
		{`{"break_response_code":502,"unhealthy":{"http_statuses":[500,503],"failures":1},"healthy":{"http_statuses":[200,404],"successes":1},"max_breaker_sec":3}`, ""},
		{`{}`, pre + `property "break_response_code" is required`},
		{`{"break_response_code":199}`, pre + `property "break_response_code" validation failed: expected 199 to be at least 200`},
		{`{"break_response_code":600}`, pre + `property "break_response_code" validation failed: expected 600 to be at most 599`},
		{`{"break_response_code":502,"max_breaker_sec":2}`, pre + `property "max_breaker_sec" validation failed: expected 2 to be at least 3`},
		{`{"break_response_code":502,"healthy":{"http_statuses":[206,206]}}`, pre + `property "healthy" validation failed: property "http_statuses" validation failed: expected unique items but items 1 and 2 are equal`},
		{`{"break_response_code":502,"unhealthy":{"http_statuses":[499]}}`, pre + `property "unhealthy" validation failed: property "http_statuses" validation failed: failed to validate item 1: expected 499 to be at least 500`},
		{`{"break_response_code":502,"unhealthy":{"failures":0}}`, pre + `property "unhealthy" validation failed: property "failures" validation failed: expected 0 to be at least 1`},
		{`{"break_response_code":502,"break_response_headers":[{"key":"a"}]}`, pre + `property "break_response_headers" validation failed: failed to validate item 1: property "value" is required`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || err.Error() != tc.err):
			t.Errorf("%s: err = %v, want %q", tc.conf, err, tc.err)
		}
	}
	if got := build(t, `{"break_response_code":502}`); !cmp.Equal(got.Names(plugins.Access), []string{Name}) || !cmp.Equal(got.Names(plugins.Log), []string{Name}) {
		t.Errorf("phases: access %v, log %v", got.Names(plugins.Access), got.Names(plugins.Log))
	}
}

// TestBreaker: APISIX's TEST 10-12 sequence: 500 and 503 unhealthy, 3
// failures; the third opens the breaker for 2 s (599, the upstream not
// contacted), then the next request reaches the upstream again.
func TestBreaker(t *testing.T) {
	p := build(t, `{"break_response_code":599,"unhealthy":{"http_statuses":[500,503],"failures":3}}`)
	c := plugintest.NewCtx("GET", "/api_breaker").WithHeader("Host", "a.com")
	now := time.Unix(1_700_000_000, 0).UnixNano()
	c.Clock = now
	var got []int
	for _, st := range []int{200, 500, 503, 500, 500, 500} {
		got = append(got, send(p, c, st))
	}
	if want := []int{200, 500, 503, 500, 599, 599}; !cmp.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	if c.Upstream || c.ExitStatus() != 599 {
		t.Fatalf("an open breaker reached the upstream (%v) or exited %d", c.Upstream, c.ExitStatus())
	}
	// Another host, another uri: their own breakers, closed.
	other := plugintest.NewCtx("GET", "/api_breaker").WithHeader("Host", "b.com")
	other.Clock = now
	if st := send(p, other, 200); st != 200 {
		t.Errorf("another host: %d", st)
	}
	// Open for 2^1 s: still at +2 s, closed at +3 s.
	c.Clock = now + 2e9
	if st := send(p, c, 200); st != 599 {
		t.Errorf("at +2s: %d, want 599", st)
	}
	c.Clock = now + 3e9
	if st := send(p, c, 200); st != 200 {
		t.Errorf("at +3s: %d, want 200", st)
	}
}

// TestBreakTime: 2^(failures' multiples) seconds, capped by
// max_breaker_sec, as APISIX's breaker_time; the healthy answers close
// it after successes of them.
func TestBreakTime(t *testing.T) {
	for _, tc := range []struct{ n, max, want int64 }{
		{0, 300, 2}, {1, 300, 2}, {2, 300, 4}, {3, 300, 8}, {8, 300, 256}, {9, 300, 300}, {70, 300, 300}, {2, 3, 3},
	} {
		if got := breakTime(tc.n, tc.max); got != tc.want {
			t.Errorf("breakTime(%d, %d) = %d, want %d", tc.n, tc.max, got, tc.want)
		}
	}
	p := build(t, `{"break_response_code":502,"max_breaker_sec":5,"unhealthy":{"failures":1},"healthy":{"successes":2}}`)
	c := plugintest.NewCtx("GET", "/x").WithHeader("Host", "a.com")
	now := time.Unix(1_700_000_000, 0).UnixNano()
	step := func(at int64, upstream, want int) {
		t.Helper()
		c.Clock = now + at*1e9
		if st := send(p, c, upstream); st != want {
			t.Fatalf("at +%ds, upstream %d: got %d, want %d", at, upstream, st, want)
		}
	}
	step(0, 500, 500)  // 1 failure: open 2 s
	step(2, 200, 502)  // open
	step(3, 500, 500)  // 2 failures: open 4 s from 3
	step(7, 200, 502)  // open
	step(8, 500, 500)  // 3: 8 s, capped at 5
	step(13, 200, 502) // open
	step(14, 200, 200) // closed: 1 healthy
	step(14, 404, 404) // neither
	step(14, 200, 200) // 2 healthy: counts forgotten
	step(14, 500, 500) // 1 failure again: 2 s
	step(16, 200, 502)
}

// TestBreakResponse: the body and the headers, variables resolved, when
// break_response_body is set; the headers alone are not sent (as APISIX);
// the last of two headers of one name wins (APISIX's TEST 13-15).
func TestBreakResponse(t *testing.T) {
	p := build(t, `{"break_response_code":502,"break_response_body":"{\"message\":\"breaker opened.\"}",
		"break_response_headers":[{"key":"Content-Type","value":"application/json"},{"key":"Content-Type","value":"application/json+v1"},{"key":"X-Client","value":"$remote_addr"}],
		"unhealthy":{"failures":3}}`)
	c := plugintest.NewCtx("GET", "/api_breaker")
	var got []int
	for _, st := range []int{200, 500, 503, 500, 500, 500} {
		got = append(got, send(p, c, st))
	}
	if want := []int{200, 500, 503, 500, 500, 502}; !cmp.Equal(got, want) {
		t.Fatalf("statuses %v, want %v", got, want)
	}
	if string(c.Body) != `{"message":"breaker opened."}` || string(c.ResponseHeader("Content-Type")) != "application/json+v1" || string(c.ResponseHeader("X-Client")) != "127.0.0.1" {
		t.Errorf("body %q, content-type %q, x-client %q", c.Body, c.ResponseHeader("Content-Type"), c.ResponseHeader("X-Client"))
	}

	p = build(t, `{"break_response_code":503,"break_response_headers":[{"key":"X-A","value":"b"}],"unhealthy":{"failures":1}}`)
	c = plugintest.NewCtx("GET", "/")
	send(p, c, 500)
	if st := send(p, c, 200); st != 503 || len(c.Body) != 0 || c.ResponseHeader("X-A") != nil {
		t.Errorf("no body: %d %q, X-A %q", st, c.Body, c.ResponseHeader("X-A"))
	}
}

// TestNotUpstream: an answer that did not come from the upstream counts
// neither way.
func TestNotUpstream(t *testing.T) {
	p := build(t, `{"break_response_code":502,"unhealthy":{"failures":1}}`)
	c := plugintest.NewCtx("GET", "/")
	for range 3 {
		c.Reset()
		c.UpstreamStatus = 500
		c.Figures.Upstreamed = false // the worker's own 500, say
		plugintest.Run(p, c)
	}
	if st := send(p, c, 200); st != 200 {
		t.Errorf("after gateway-made 500s: %d, want 200", st)
	}
}

// TestMaxStates: past MaxStates pairs, those in no breaker state make
// room, and a new pair is not tracked while none does.
func TestMaxStates(t *testing.T) {
	p := build(t, `{"break_response_code":502,"unhealthy":{"failures":2}}`)
	in := p.Plugins[0].Instance.(*instance)
	now := time.Unix(1_700_000_000, 0).UnixNano()
	for i := range MaxStates {
		c := plugintest.NewCtx("GET", "/p"+strings.Repeat("x", i%7)+string(rune('a'+i%26))+itoa(i))
		c.Clock = now
		send(p, c, 500)
		send(p, c, 500) // open for 2 s
	}
	if len(in.states) != MaxStates {
		t.Fatalf("%d states", len(in.states))
	}
	c := plugintest.NewCtx("GET", "/new")
	c.Clock = now
	send(p, c, 500)
	send(p, c, 500)
	if st := send(p, c, 200); st != 200 || len(in.states) != MaxStates {
		t.Fatalf("a new pair with the table full of open breakers: %d, %d states", st, len(in.states))
	}
	c.Clock = now + 400e9 // all past max_breaker_sec
	send(p, c, 500)
	send(p, c, 500)
	if st := send(p, c, 200); st != 502 || len(in.states) != 1 {
		t.Fatalf("after the others expired: %d, %d states", st, len(in.states))
	}
}

func itoa(i int) string {
	b := []byte{}
	for {
		b = append([]byte{byte('0' + i%10)}, b...)
		if i /= 10; i == 0 {
			return string(b)
		}
	}
}
