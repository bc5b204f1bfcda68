package limitconn

import (
	"encoding/json"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, env plugins.Env, conf string) *plugins.Phases {
	t.Helper()
	p, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, env)
	if err != nil {
		t.Fatalf("build %s: %v", conf, err)
	}
	return &p
}

const t0 = 1_700_000_000 * int64(time.Second)

// request is one request in flight: its Ctx, after the access phase.
type request struct{ c *plugintest.Ctx }

// enter runs the access phase of a new request from the client 127.0.0.1.
func enter(p *plugins.Phases, clock int64, headers ...string) request {
	c := plugintest.NewCtx("GET", "/")
	c.Clock = clock
	for i := 0; i+1 < len(headers); i += 2 {
		c.WithHeader(headers[i], headers[i+1])
	}
	for _, a := range p.Access {
		if c.Exited() {
			break
		}
		a.Access(c)
	}
	return request{c}
}

// leave runs its log phase.
func (r request) leave(p *plugins.Phases) {
	for _, l := range p.Log {
		l.Log(r.c)
	}
}

// outcome is 0 for a request that passed undelayed, its delay in ms for a
// delayed one, -status for one that was answered.
func (r request) outcome() int {
	if r.c.Exited() {
		return -r.c.ExitStatus()
	}
	return int(r.c.Delayed / time.Millisecond)
}

func outcomes(rs ...request) []int {
	var o []int
	for _, r := range rs {
		o = append(o, r.outcome())
	}
	return o
}

func want(t *testing.T, what string, got []int, w ...int) {
	t.Helper()
	if !slices.Equal(got, w) {
		t.Fatalf("%s: %v, want %v", what, got, w)
	}
}

// TestInFlight: conn requests in flight pass, burst more are delayed by
// default_conn_delay × (count-1)/conn, the rest are rejected; a request
// that leaves makes room, a rejected one leaves nothing behind.
func TestInFlight(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"conn":2,"burst":2,"default_conn_delay":0.5,"key":"remote_addr","rejected_code":429,"rejected_msg":"busy"}`)
	r := make([]request, 6)
	for i := range r {
		r[i] = enter(p, t0)
	}
	want(t, "six at once", outcomes(r...), 0, 0, 500, 500, -429, -429)
	// The rejection's answer.
	c := plugintest.NewCtx("GET", "/")
	c.Clock = t0
	plugintest.Run(p, c)
	if c.Status() != 429 || string(c.Body) != `{"error_msg":"busy"}`+"\n" {
		t.Fatalf("rejected: %d %q", c.Status(), c.Body)
	}
	r[4].leave(p) // rejected: leaves nothing
	r[5].leave(p)
	want(t, "a seventh", outcomes(enter(p, t0)), -429)
	r[0].leave(p)
	r[1].leave(p)
	want(t, "after two left", outcomes(enter(p, t0), enter(p, t0), enter(p, t0)), 500, 500, -429)
}

// TestSequential: requests that come and go one after another are never
// limited, however many.
func TestSequential(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"conn":1,"burst":0,"default_conn_delay":1,"key":"remote_addr"}`)
	c := plugintest.NewCtx("GET", "/")
	for i := range 1000 {
		c.Reset()
		plugintest.Run(p, c)
		if c.Status() != 200 {
			t.Fatalf("request %d: %d", i, c.Status())
		}
	}
}

// TestKeysAndLimits: keys count apart; conn and burst may come from
// variables, and a limit that does not resolve is a limiter failure.
func TestKeysAndLimits(t *testing.T) {
	env := plugins.NewLocalEnv()
	p := build(t, env, `{"conn":1,"burst":0,"default_conn_delay":1,"key":"http_x_user","rejected_msg":"busy"}`)
	a, b := enter(p, t0, "X-User", "ann"), enter(p, t0, "X-User", "bob")
	want(t, "ann and bob", outcomes(a, b, enter(p, t0, "X-User", "ann"), enter(p, t0)), 0, 0, -503, 0)

	q := build(t, env, `{"conn":"$http_x_conn","burst":"${http_x_burst ?? 0}","default_conn_delay":1,"key":"remote_addr","key_type":"var_combination"}`)
	want(t, "conn from a header", outcomes(enter(q, t0, "X-Conn", "2"), enter(q, t0, "X-Conn", "2"), enter(q, t0, "X-Conn", "2"),
		enter(q, t0, "X-Conn", "2", "X-Burst", "1")), 0, 0, -503, 1000)
	want(t, "no conn", outcomes(enter(q, t0), enter(q, t0, "X-Conn", "x"), enter(q, t0, "X-Conn", "0")), -500, -500, -500)
	d := build(t, env, `{"conn":"$http_x_conn","burst":0,"default_conn_delay":1,"key":"remote_addr","allow_degradation":true}`)
	want(t, "no conn, degraded", outcomes(enter(d, t0)), 0)

	full := plugins.NewLocalEnv()
	full.Counters = plugins.NewCounterTable(0)
	want(t, "a full table", outcomes(enter(build(t, full, `{"conn":1,"burst":0,"default_conn_delay":1,"key":"remote_addr"}`), t0)), -500)
}

// TestWindowEnds: when a counter's window ends the count starts over, and
// the requests in flight from before do not take themselves away from
// the new count.
func TestWindowEnds(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"conn":2,"burst":0,"default_conn_delay":1,"key":"remote_addr"}`)
	old := []request{enter(p, t0), enter(p, t0)}
	want(t, "full", outcomes(enter(p, t0)), -503)
	later := t0 + int64(connWindow) + int64(time.Millisecond)
	a := enter(p, later)
	for _, r := range old {
		r.c.Clock = later
		r.leave(p)
	}
	want(t, "the new window", outcomes(a, enter(p, later), enter(p, later)), 0, 0, -503)
}

// TestExactAcrossInstances: instances sharing a counter table (as the
// workers of a node share theirs), each on its own goroutine, admit
// exactly conn+burst requests in flight between them, and as many again
// once those have left.
func TestExactAcrossInstances(t *testing.T) {
	env := plugins.NewLocalEnv()
	const conf = `{"conn":50,"burst":10,"default_conn_delay":0.001,"key":"remote_addr"}`
	ps := make([]*plugins.Phases, 8)
	for i := range ps {
		ps[i] = build(t, env, conf)
	}
	for round := range 2 {
		var passed atomic.Int64
		var mu sync.Mutex
		var in []func()
		var wg sync.WaitGroup
		for _, p := range ps {
			wg.Go(func() {
				for range 20 {
					r := enter(p, t0)
					if r.c.Exited() {
						continue
					}
					passed.Add(1)
					mu.Lock()
					in = append(in, func() { r.leave(p) })
					mu.Unlock()
				}
			})
		}
		wg.Wait()
		if passed.Load() != 60 {
			t.Fatalf("round %d: %d in flight, want 60", round, passed.Load())
		}
		for _, leave := range in {
			leave()
		}
	}
}

// TestBuildRefuses: what the schema refuses and what Build does not run.
func TestBuildRefuses(t *testing.T) {
	for _, conf := range []string{`{"conn":1,"burst":0,"key":"remote_addr"}`, `{"conn":0,"burst":0,"default_conn_delay":1,"key":"remote_addr"}`,
		`{"conn":1,"burst":-1,"default_conn_delay":1,"key":"remote_addr"}`, `{"conn":1,"burst":0,"default_conn_delay":0,"key":"remote_addr"}`,
		`{"conn":1,"burst":0,"default_conn_delay":1,"key":"remote_addr","policy":"redis"}`,
		// both forms at once
		`{"conn":1,"burst":0,"default_conn_delay":1,"key":"remote_addr","rules":[{"conn":1,"burst":0,"key":"$remote_addr"}]}`,
		`{"default_conn_delay":1,"rules":[{"conn":1,"burst":0}]}`} {
		if err := plugins.Check(Name, json.RawMessage(conf)); err == nil {
			t.Errorf("%s passed the checks", conf)
		}
	}
}

// rulesConf limits the requests in flight per user (one) and per
// organisation (two), each counted apart.
const rulesConf = `{"default_conn_delay":0.5,"rejected_code":429,"rules":[` +
	`{"conn":1,"burst":0,"key":"$http_x_user"},{"conn":2,"burst":0,"key":"org:$http_x_org"}]}`

// TestRules: each rule whose key resolves counts the request in its own
// count; the first rule over its limit rejects it, and the counts the
// rules before it took are given back in its log phase; a request no
// rule applies to is a limiter failure (500); the delays of several rules
// add up.
func TestRules(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), rulesConf)
	r1 := enter(p, t0, "X-User", "ann", "X-Org", "o")
	r2 := enter(p, t0, "X-User", "bob", "X-Org", "o")
	r3 := enter(p, t0, "X-User", "cid", "X-Org", "o") // its org is full
	r4 := enter(p, t0, "X-User", "ann", "X-Org", "p") // ann is in flight
	r5 := enter(p, t0)                                // no rule applies
	r6 := enter(p, t0, "X-User", "dan")               // only the user rule applies
	want(t, "six", outcomes(r1, r2, r3, r4, r5, r6), 0, 0, -429, -429, -500, 0)
	r3.leave(p) // cid's count goes back
	want(t, "cid again", outcomes(enter(p, t0, "X-User", "cid", "X-Org", "q")), 0)
	r1.leave(p) // ann's and o's
	want(t, "after ann left", outcomes(enter(p, t0, "X-User", "ann", "X-Org", "o")), 0)

	delays := build(t, plugins.NewLocalEnv(), `{"default_conn_delay":0.5,"rules":[`+
		`{"conn":1,"burst":1,"key":"a:$remote_addr"},{"conn":1,"burst":1,"key":"b:$remote_addr"},`+
		`{"conn":"$http_x_conn","burst":0,"key":"c:$remote_addr"}]}`)
	want(t, "two rules' delays", outcomes(enter(delays, t0), enter(delays, t0)), 0, 1000)
}
