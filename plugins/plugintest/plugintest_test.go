package plugintest

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"

	"coregate/httpvar"
	"coregate/plugins"
)

// Two tiny plugins, registered here only: test-auth (rewrite) answers 401
// without an apikey header; test-limit (access, header_filter, log)
// admits count requests per key and window through the Env's counters,
// and counts answers by status in a metric slot.

type testAuth struct{}

func (testAuth) Schema() []byte                  { return []byte(`{"type":"object"}`) }
func (testAuth) Check(raw json.RawMessage) error { return nil }
func (testAuth) Build(json.RawMessage, plugins.Env) (plugins.Instance, error) {
	return authInstance{}, nil
}

type authInstance struct{}

var missing = []byte(`{"message":"Missing API key in request"}`)

func (authInstance) Rewrite(c plugins.Ctx) {
	if c.Header("apikey") == nil {
		c.Exit(401, missing)
	}
}

type testLimit struct{}

type limitConf struct {
	Count int64 `json:"count"`
}

func (testLimit) Schema() []byte {
	return []byte(`{"type":"object","properties":{"count":{"type":"integer","exclusiveMinimum":0}},"required":["count"]}`)
}

func (testLimit) Check(raw json.RawMessage) error { return nil }

func (testLimit) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	var lc limitConf
	if err := json.Unmarshal(raw, &lc); err != nil {
		return nil, err
	}
	return &limitInstance{count: lc.Count, counters: env.Counters,
		ok: env.Metrics.Slot("test_status", "200"), rejected: env.Metrics.Slot("test_status", "503")}, nil
}

// limitInstance's key and digits are scratch buffers: an instance runs
// on one event loop, one phase at a time.
type limitInstance struct {
	count        int64
	counters     plugins.Counters
	ok, rejected *atomic.Uint64
	key, digits  []byte
	remaining    int64
}

func (l *limitInstance) Access(c plugins.Ctx) {
	l.key = append(append(append(l.key[:0], c.RouteID()...), ':'), c.Var(httpvar.Parse("remote_addr"))...)
	n, _ := l.counters.Counter(l.key, c.Now(), c.Now()+60e9)
	if n == nil {
		c.Exit(500, nil)
		return
	}
	l.remaining = l.count - n.Add(1)
	if l.remaining < 0 {
		l.remaining = 0
		c.Exit(503, nil)
	}
}

func (l *limitInstance) HeaderFilter(c plugins.Ctx) {
	l.digits = strconv.AppendInt(l.digits[:0], l.remaining, 10)
	c.SetResponseHeader("X-RateLimit-Remaining", l.digits)
}

func (l *limitInstance) Log(c plugins.Ctx) {
	switch c.Status() {
	case 200:
		l.ok.Add(1)
	case 503:
		l.rejected.Add(1)
	}
}

var reg = func() *plugins.Registry {
	r := plugins.NewRegistry([]plugins.Entry{{Name: "test-auth", Priority: 2500}, {Name: "test-limit", Priority: 1002}})
	r.Register("test-auth", testAuth{})
	r.Register("test-limit", testLimit{})
	return r
}()

func TestRunPhases(t *testing.T) {
	env := plugins.NewLocalEnv()
	p, err := reg.BuildPhases(map[string]json.RawMessage{
		"test-limit": json.RawMessage(`{"count":2}`), "test-auth": json.RawMessage(`{}`),
	}, env)
	if err != nil {
		t.Fatal(err)
	}
	c := NewCtx("GET", "/hello?x=1")
	Run(&p, c)
	if c.Status() != 401 || string(c.Body) != string(missing) || c.Upstream || c.ResponseHeader("X-RateLimit-Remaining") == nil {
		t.Fatalf("no key: status %d body %s upstream %v", c.Status(), c.Body, c.Upstream)
	}
	c = NewCtx("GET", "/hello").WithHeader("ApiKey", "k")
	c.UpstreamBody = []byte("1234567890")
	for i, want := range []struct {
		status    int
		remaining string
		upstream  bool
	}{{200, "1", true}, {200, "0", true}, {503, "0", false}} {
		c.Reset()
		Run(&p, c)
		if c.Status() != want.status || string(c.ResponseHeader("x-ratelimit-remaining")) != want.remaining || c.Upstream != want.upstream {
			t.Fatalf("request %d: status %d remaining %q upstream %v", i, c.Status(), c.ResponseHeader("X-RateLimit-Remaining"), c.Upstream)
		}
	}
	m := env.Metrics.(*plugins.MetricTable)
	if m.Value("test_status", "200") != 2 || m.Value("test_status", "503") != 1 {
		t.Fatalf("metrics: %d %d", m.Value("test_status", "200"), m.Value("test_status", "503"))
	}
	// The plugins' request path allocates nothing, admitted or not.
	AllocsPerRun(t, 200, func() { c.Reset(); Run(&p, c) })
	c.Clock += 61e9 // the next window
	AllocsPerRun(t, 200, func() { c.Reset(); Run(&p, c) })
	if _, err := reg.BuildPhases(map[string]json.RawMessage{"test-limit": json.RawMessage(`{"count":0}`)}, env); err == nil ||
		err.Error() != `failed to check the configuration of plugin test-limit err: property "count" validation failed: expected 0 to be greater than 0` {
		t.Fatalf("bad count: %v", err)
	}
}

func TestCtxVars(t *testing.T) {
	c := NewCtx("POST", "/a/b?x=1&flag&y=2").WithHeader("X-Api-Key", "k").WithVar("remote_addr", "10.0.0.1")
	for name, want := range map[string]string{
		"uri": "/a/b", "request_method": "POST", "arg_x": "1", "arg_y": "2",
		"http_x_api_key": "k", "remote_addr": "10.0.0.1",
	} {
		if got := c.Var(httpvar.Parse(name)); got == nil || string(got) != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	// As nginx's ngx_http_arg: "flag" without '=' is no argument.
	if c.Var(httpvar.Parse("arg_flag")) != nil || c.Var(httpvar.Parse("arg_z")) != nil || c.Var(httpvar.Parse("http_host")) != nil || c.Header("x-api-key") == nil {
		t.Error("absent vars must be nil, headers case-insensitive")
	}
}

// TestCtxRouteAndArgs: route_id answers the route of NewCtx or WithRoute;
// args, query_string and arg_<name> follow the query of the target a
// plugin set with SetUpstreamURI, as the worker's.
func TestCtxRouteAndArgs(t *testing.T) {
	c := NewCtx("GET", "/a?x=1&k=2")
	if got := string(c.Var(httpvar.Parse("route_id"))); got != "1" {
		t.Fatalf("route_id %q, want 1", got)
	}
	c.WithRoute("r7")
	if got := string(c.Var(httpvar.Parse("route_id"))); got != "r7" || c.RouteID() != "r7" {
		t.Fatalf("route_id %q, RouteID %q, want r7", got, c.RouteID())
	}
	if got := string(c.Var(httpvar.Parse("args"))); got != "x=1&k=2" || string(c.Var(httpvar.Parse("query_string"))) != got {
		t.Fatalf("args %q", got)
	}
	c.SetUpstreamURI([]byte("/a?x=1"))
	if got := string(c.Var(httpvar.Parse("args"))); got != "x=1" || c.Var(httpvar.Parse("arg_k")) != nil || string(c.Var(httpvar.Parse("query_string"))) != got {
		t.Fatalf("after SetUpstreamURI: args %q, arg_k %q", got, c.Var(httpvar.Parse("arg_k")))
	}
	if string(c.Query()) != "x=1&k=2" {
		t.Fatalf("Query %q: the request's, unchanged", c.Query())
	}
	c.SetUpstreamURI([]byte("/a"))
	if c.Var(httpvar.Parse("args")) != nil {
		t.Fatalf("args %q after a target without a query", c.Var(httpvar.Parse("args")))
	}
	c.Reset()
	if string(c.Var(httpvar.Parse("args"))) != "x=1&k=2" {
		t.Fatalf("args %q after Reset", c.Var(httpvar.Parse("args")))
	}
}

// TestAllocsPerRunCatches: the helper fails a function that allocates.
func TestAllocsPerRunCatches(t *testing.T) {
	if raceEnabled {
		t.Skip("race detector on")
	}
	ft := &fakeT{TB: t}
	var sink []byte
	func() {
		defer func() { _ = recover() }()
		AllocsPerRun(ft, 10, func() { sink = make([]byte, 64) })
	}()
	_ = sink
	if !ft.failed {
		t.Fatal("an allocating function passed")
	}
}

type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(string, ...any) {
	f.failed = true
	panic("fatal")
}

// TestUpstreamHeaderBuffers: removing a header, then setting another,
// leaves the values of the headers kept as they were.
func TestUpstreamHeaderBuffers(t *testing.T) {
	c := NewCtx("GET", "/").WithHeader("A", "a-value").WithHeader("B", "b-value").WithHeader("C", "c-value")
	c.SetRequestHeader("A", nil)
	c.SetRequestHeader("D", []byte("XXXXXXX"))
	c.AddRequestHeader("E", []byte("YYYYYYY"))
	var got []string
	for _, h := range c.UpstreamHeaders() {
		got = append(got, h.Name+": "+string(h.Value))
	}
	if want := "B: b-value|C: c-value|D: XXXXXXX|E: YYYYYYY"; strings.Join(got, "|") != want {
		t.Fatalf("upstream headers %q, want %q", strings.Join(got, "|"), want)
	}
}

// TestCtxHeaderAt: HeaderAt reads the values of a repeated header in the
// order given, the name compared case-insensitively, as the worker's.
func TestCtxHeaderAt(t *testing.T) {
	c := NewCtx("GET", "/").WithHeader("User-Agent", "a").WithHeader("X", "x").WithHeader("user-agent", "")
	var got []string
	for i := 0; ; i++ {
		v, ok := c.HeaderAt("USER-AGENT", i)
		if !ok {
			break
		}
		got = append(got, string(v))
	}
	if strings.Join(got, ",") != "a," || len(got) != 2 {
		t.Fatalf("HeaderAt read %q", got)
	}
	if _, ok := c.HeaderAt("absent", 0); ok {
		t.Fatal("HeaderAt of an absent header: ok")
	}
}

// TestCtxHeaderField: HeaderField reads the headers given, in order,
// names as written; ok false past the last.
func TestCtxHeaderField(t *testing.T) {
	c := NewCtx("GET", "/").WithHeader("User-Agent", "a").WithHeader("x-my-b", "")
	var got []string
	for i := 0; ; i++ {
		name, v, ok := c.HeaderField(i)
		if !ok {
			break
		}
		got = append(got, string(name)+"="+string(v))
	}
	if strings.Join(got, ",") != "User-Agent=a,x-my-b=" {
		t.Fatalf("HeaderField read %q", got)
	}
	if _, _, ok := c.HeaderField(-1); ok {
		t.Fatal("HeaderField(-1): ok")
	}
}

// TestCtxSetClientAddr: the address set is $remote_addr (unmapped) and
// $remote_port (the request's when 0) until Reset.
func TestCtxSetClientAddr(t *testing.T) {
	c := NewCtx("GET", "/").WithVar("remote_port", "40000")
	addr, port := httpvar.Parse("remote_addr"), httpvar.Parse("remote_port")
	c.SetClientAddr(netip.MustParseAddr("::ffff:10.0.0.1"), 0)
	if a, p := string(c.Var(addr)), string(c.Var(port)); a != "10.0.0.1" || p != "40000" {
		t.Fatalf("after SetClientAddr(10.0.0.1, 0): %s:%s", a, p)
	}
	c.SetClientAddr(netip.MustParseAddr("2001:db8::1"), 8080)
	if a, p := string(c.Var(addr)), string(c.Var(port)); a != "2001:db8::1" || p != "8080" {
		t.Fatalf("after SetClientAddr(2001:db8::1, 8080): %s:%s", a, p)
	}
	c.Reset()
	if a, p := string(c.Var(addr)), string(c.Var(port)); a != "127.0.0.1" || p != "40000" {
		t.Fatalf("after Reset: %s:%s", a, p)
	}
}

// TestResponseHeader: as the worker, a header a plugin set, else the
// upstream's answer's, else one added; the upstream's only when the
// answer is the upstream's.
func TestResponseHeader(t *testing.T) {
	c := NewCtx("GET", "/").WithResponseHeader("X-Up", "u").WithResponseHeader("X-Set", "upstream").WithResponseHeader("X-Add", "up")
	var p plugins.Phases
	Run(&p, c)
	c.SetResponseHeader("x-set", []byte("p"))
	c.AddResponseHeader("X-Add", []byte("a"))
	c.AddResponseHeader("X-Only", []byte("o"))
	for name, want := range map[string]string{"x-up": "u", "X-SET": "p", "X-Add": "up", "X-Only": "o", "X-None": ""} {
		if got := string(c.ResponseHeader(name)); got != want {
			t.Errorf("%s: %q, want %q", name, got, want)
		}
	}
	c.Reset()
	c.Exit(403, nil)
	Run(&p, c)
	if v := c.ResponseHeader("X-Up"); v != nil {
		t.Errorf("a plugin's answer has the upstream's X-Up %q", v)
	}
}
