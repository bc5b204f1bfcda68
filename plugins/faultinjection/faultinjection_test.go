package faultinjection

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t *testing.T, conf string) *plugins.Phases {
	t.Helper()
	if err := plugins.Check(Name, json.RawMessage(conf)); err != nil {
		t.Fatalf("%s: %v", conf, err)
	}
	ph, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, plugins.NewLocalEnv())
	if err != nil {
		t.Fatal(err)
	}
	return &ph
}

// TestCheck: APISIX's refusals (t/plugin/fault-injection.t tests 1 to 9
// and 27) and what passes (test 26).
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin fault-injection err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"abort":{"http_status":200,"body":"Fault Injection!\n"}}`, ""},
		{`{"delay":{"duration":0.1}}`, ""},
		{`{"abort":{"http_status":403,"body":"Fault Injection!\n","vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]},` +
			`"delay":{"duration":2,"vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]}}`, ""},
		{`{"abort":{"http_status":200,"headers":{"X-A":"$remote_addr","X-N":1}}}`, ""},
		{`{"abort":{"http_status":100,"body":"x"}}`, prefix + `property "abort" validation failed`},
		{`{"abort":{"body":"x"}}`, prefix + `property "abort" validation failed`},
		{`{}`, prefix + `expect object to have at least 1 properties`},
		{`{"delay":{}}`, prefix + `property "delay" validation failed`},
		{`{"delay":{"duration":"test"}}`, prefix + `property "delay" validation failed: property "duration" validation failed: wrong type: expected number, got string`},
		{`{"delay":{"duration":-1}}`, prefix + `property "delay" validation failed`},
		{`{"delay":{"duration":1,"percentage":101}}`, prefix + `property "delay" validation failed`},
		{`{"abort":{"http_status":200,"vars":["a","b"]}}`, prefix + `property "abort" validation failed`},
		{`{"abort":{"http_status":200,"headers":{}}}`, prefix + `property "abort" validation failed`},
		{`{"abort":{"http_status":200,"headers":{"X-A":true}}}`, prefix + `property "abort" validation failed`},
		{`{"abort":{"http_status":403,"vars":[["arg_name","!=","jack"]]},"delay":{"duration":2}}`, prefix + `rule should be wrapped inside brackets`},
		{`{"delay":{"duration":2,"vars":[[["arg_name","=","jack"]]]}}`, prefix + `invalid operator '='`},
		{`{"abort":{"http_status":200,"headers":{"a:b":"x"}}}`, prefix + `property "abort" validation failed: property "headers" validation failed: header name "a:b" contains ':'`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q…", tc.conf, err, tc.err)
		}
	}
}

// TestAbort: the status and body (variables resolved, an empty body
// empty), the headers (templates and numbers), in the rewrite phase at
// APISIX's priority; the upstream is not reached.
func TestAbort(t *testing.T) {
	p := build(t, `{"abort":{"http_status":405,"body":"client addr: $remote_addr, ${arg_x ?? none}\n",`+
		`"headers":{"X-Route":"$route_id","X-N":2,"X-F":1.5}}}`)
	if got := p.Names(plugins.Rewrite); len(got) != 1 || got[0] != Name {
		t.Fatalf("rewrite phase: %v", got)
	}
	if e, _, _ := plugins.Lookup(Name); e.Priority != 11000 {
		t.Fatalf("priority %d", e.Priority)
	}
	c := plugintest.NewCtx("GET", "/hello").WithVar("route_id", "r1")
	plugintest.Run(p, c)
	if c.Upstream || c.ExitStatus() != 405 || string(c.Body) != "client addr: 127.0.0.1, none\n" || c.Delayed != 0 {
		t.Fatalf("upstream %v, %d %q, delayed %v", c.Upstream, c.ExitStatus(), c.Body, c.Delayed)
	}
	for name, want := range map[string]string{"X-Route": "r1", "X-N": "2", "X-F": "1.5"} {
		if got := string(c.ResponseHeader(name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}

	c = plugintest.NewCtx("GET", "/hello")
	plugintest.Run(build(t, `{"abort":{"http_status":200,"body":""}}`), c)
	if c.Upstream || c.ExitStatus() != 200 || len(c.Body) != 0 {
		t.Fatalf("empty body: upstream %v, %d %q", c.Upstream, c.ExitStatus(), c.Body)
	}
}

// TestDelay: a delay holds the request back by duration (fractions of a
// second kept), then it goes upstream; with an abort, the abort's answer
// waits for it (APISIX sleeps, then exits).
func TestDelay(t *testing.T) {
	c := plugintest.NewCtx("GET", "/hello")
	plugintest.Run(build(t, `{"delay":{"duration":0.25}}`), c)
	if !c.Upstream || c.Delayed != 250*time.Millisecond {
		t.Fatalf("upstream %v, delayed %v", c.Upstream, c.Delayed)
	}
	c = plugintest.NewCtx("GET", "/hello")
	plugintest.Run(build(t, `{"delay":{"duration":1},"abort":{"http_status":503,"body":"down"}}`), c)
	if c.Upstream || c.ExitStatus() != 503 || c.Delayed != time.Second {
		t.Fatalf("upstream %v, %d, delayed %v", c.Upstream, c.ExitStatus(), c.Delayed)
	}
}

// TestVars: APISIX's tests 29 to 33 and 38, 39: an abort or a delay
// happens when one of its expressions holds, each judged on its own.
func TestVars(t *testing.T) {
	abort := build(t, `{"abort":{"http_status":403,"body":"Fault Injection!\n","vars":[[["arg_name","==","jack"],["arg_age","!","<",18]],[["http_apikey","==","api-key"]]]}}`)
	both := build(t, `{"abort":{"http_status":403,"body":"Fault Injection!\n","vars":[[["arg_name","==","jack"],["arg_age","!","<",18]]]},`+
		`"delay":{"duration":2,"vars":[[["http_apikey","==","api-key"]]]}}`)
	for _, tc := range []struct {
		p       *plugins.Phases
		target  string
		apikey  string
		status  int
		delayed time.Duration
	}{
		{abort, "/hello?name=jack&age=18", "api-key", 403, 0},
		{abort, "/hello?name=jack&age=20", "", 403, 0},
		{abort, "/hello", "api-key", 403, 0},
		{abort, "/hello?name=allen", "", 0, 0},
		{abort, "/hello", "", 0, 0},
		{both, "/hello?name=jack&age=18", "api-key", 403, 2 * time.Second},
		{both, "/hello?name=jack&age=16", "api-key", 0, 2 * time.Second},
		{both, "/hello?name=jack&age=18", "", 403, 0},
		{both, "/hello", "", 0, 0},
	} {
		c := plugintest.NewCtx("GET", tc.target)
		if tc.apikey != "" {
			c.WithHeader("apikey", tc.apikey)
		}
		plugintest.Run(tc.p, c)
		if c.ExitStatus() != tc.status || c.Upstream != (tc.status == 0) || c.Delayed != tc.delayed {
			t.Errorf("%s apikey %q: status %d, upstream %v, delayed %v; want %d, %v", tc.target, tc.apikey,
				c.ExitStatus(), c.Upstream, c.Delayed, tc.status, tc.delayed)
		}
		if tc.status != 0 && string(c.Body) != "Fault Injection!\n" {
			t.Errorf("%s: body %q", tc.target, c.Body)
		}
	}
}

// TestPercentage: 0 never, 100 always, 30 about that share of 2000
// requests (the bounds are 10 standard deviations wide).
func TestPercentage(t *testing.T) {
	for _, tc := range []struct {
		pct    int
		lo, hi int
	}{{0, 0, 0}, {100, 2000, 2000}, {30, 400, 800}} {
		abort := build(t, `{"abort":{"http_status":500,"percentage":`+strconv.Itoa(tc.pct)+`}}`)
		delay := build(t, `{"delay":{"duration":1,"percentage":`+strconv.Itoa(tc.pct)+`}}`)
		aborted, delayed := 0, 0
		for range 2000 {
			c := plugintest.NewCtx("GET", "/")
			plugintest.Run(abort, c)
			if c.ExitStatus() == 500 {
				aborted++
			}
			c = plugintest.NewCtx("GET", "/")
			plugintest.Run(delay, c)
			if c.Delayed != 0 {
				delayed++
			}
		}
		if aborted < tc.lo || aborted > tc.hi || delayed < tc.lo || delayed > tc.hi {
			t.Errorf("percentage %d: %d aborted, %d delayed of 2000; want %d to %d", tc.pct, aborted, delayed, tc.lo, tc.hi)
		}
	}
}
