package limitcount

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// build builds one limit-count configuration with env.
func build(t testing.TB, env plugins.Env, conf string) *plugins.Phases {
	t.Helper()
	p, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, env)
	if err != nil {
		t.Fatalf("build %s: %v", conf, err)
	}
	return &p
}

// answer is what a client sees of one request.
type answer struct {
	Status                  int
	Body                    string
	Limit, Remaining, Reset string
}

func run(p *plugins.Phases, c *plugintest.Ctx) answer {
	c.Reset()
	plugintest.Run(p, c)
	return answer{Status: c.Status(), Body: string(c.Body), Limit: string(c.ResponseHeader(limitHeader)),
		Remaining: string(c.ResponseHeader(remainingHeader)), Reset: string(c.ResponseHeader(resetHeader))}
}

func check(t *testing.T, what string, got, want answer) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s (-want +got):\n%s", what, d)
	}
}

const (
	sec = int64(time.Second)
	t0  = 1_700_000_000 * sec
)

// newCtx is a request at t0: every request of a test sees the same clock
// unless it moves it.
func newCtx(method, target string) *plugintest.Ctx {
	c := plugintest.NewCtx(method, target)
	c.Clock = t0
	return c
}

func TestWindow(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"count":2,"time_window":60}`)
	c := newCtx("GET", "/hello")
	c.UpstreamBody = []byte("hello")
	check(t, "first", run(p, c), answer{200, "hello", "2", "1", "60"})
	c.Clock = t0 + 10*sec
	check(t, "second", run(p, c), answer{200, "hello", "2", "0", "50"})
	// Rejected: the headers still go, Remaining 0; no rejected_msg: the
	// gateway's own page (nil body).
	c.Clock = t0 + 30*sec + sec/2
	check(t, "third", run(p, c), answer{503, "", "2", "0", "29.5"})
	c.Clock = t0 + 59*sec + 93*sec/100
	check(t, "fourth", run(p, c), answer{503, "", "2", "0", "0.07"})
	// Another client has its own counter.
	other := newCtx("GET", "/hello").WithVar("remote_addr", "10.0.0.2")
	other.Clock = t0 + 59*sec
	check(t, "other client", run(p, other), answer{200, "", "2", "1", "60"})
	// The window ends: a new one.
	c.Clock = t0 + 61*sec
	check(t, "next window", run(p, c), answer{200, "hello", "2", "1", "60"})
}

func TestRejectedAndHeaders(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"count":1,"time_window":10,"rejected_code":429,"rejected_msg":"Too many requests / \"slow down\"","show_limit_quota_header":false}`)
	c := newCtx("GET", "/hello")
	check(t, "first", run(p, c), answer{Status: 200})
	check(t, "rejected", run(p, c), answer{Status: 429, Body: `{"error_msg":"Too many requests \/ \"slow down\""}` + "\n"})
}

func TestKeys(t *testing.T) {
	env := plugins.NewLocalEnv()
	req := func(addr, user string) *plugintest.Ctx {
		c := newCtx("GET", "/hello").WithVar("remote_addr", addr)
		if user != "" {
			c.WithHeader("X-User", user)
		}
		return c
	}
	t.Run("var", func(t *testing.T) {
		p := build(t, env, `{"count":1,"time_window":60,"key":"http_x_user"}`)
		check(t, "ann", run(p, req("10.0.0.1", "ann")), answer{200, "", "1", "0", "60"})
		// Same user, another address: the same counter.
		check(t, "ann again", run(p, req("10.0.0.2", "ann")), answer{503, "", "1", "0", "60"})
		check(t, "bob", run(p, req("10.0.0.1", "bob")), answer{200, "", "1", "0", "60"})
		// No header: the client's address.
		check(t, "anonymous", run(p, req("10.0.0.3", "")), answer{200, "", "1", "0", "60"})
		check(t, "anonymous again", run(p, req("10.0.0.3", "")), answer{503, "", "1", "0", "60"})
		// An empty value: the client's address too.
		empty := req("10.0.0.3", "").WithHeader("X-User", "")
		check(t, "empty header", run(p, empty), answer{503, "", "1", "0", "60"})
	})
	t.Run("var_combination", func(t *testing.T) {
		p := build(t, env, `{"count":1,"time_window":60,"key_type":"var_combination","key":"$http_x_user ${arg_tier ?? free}"}`)
		check(t, "ann", run(p, req("10.0.0.1", "ann")), answer{200, "", "1", "0", "60"})
		check(t, "ann again", run(p, req("10.0.0.2", "ann")), answer{503, "", "1", "0", "60"})
		gold := newCtx("GET", "/hello?tier=gold").WithHeader("X-User", "ann")
		check(t, "ann gold", run(p, gold), answer{200, "", "1", "0", "60"})
		// The default counts as resolved: one counter for "free" users
		// without a name, whatever their address.
		check(t, "nobody", run(p, req("10.0.0.4", "")), answer{200, "", "1", "0", "60"})
		check(t, "nobody elsewhere", run(p, req("10.0.0.5", "")), answer{503, "", "1", "0", "60"})
		// Nothing resolved: the client's address.
		q := build(t, env, `{"count":1,"time_window":60,"key_type":"var_combination","key":"$http_x_user-$http_x_team"}`)
		check(t, "no vars", run(q, req("10.0.0.6", "")), answer{200, "", "1", "0", "60"})
		check(t, "no vars, other address", run(q, req("10.0.0.7", "")), answer{200, "", "1", "0", "60"})
		check(t, "no vars again", run(q, req("10.0.0.6", "")), answer{503, "", "1", "0", "60"})
	})
	t.Run("constant", func(t *testing.T) {
		p := build(t, env, `{"count":2,"time_window":60,"key_type":"constant","key":"all"}`)
		check(t, "one", run(p, req("10.0.0.1", "")), answer{200, "", "2", "1", "60"})
		check(t, "two", run(p, req("10.0.0.2", "x")), answer{200, "", "2", "0", "60"})
		check(t, "three", run(p, req("10.0.0.3", "")), answer{503, "", "2", "0", "60"})
	})
}

// TestCounterIdentity: counters belong to a route and a configuration;
// a rebuild of the same configuration (a reload) keeps them, a changed
// configuration starts again; a group shares one across routes.
func TestCounterIdentity(t *testing.T) {
	env := plugins.NewLocalEnv()
	const conf = `{"count":1,"time_window":60}`
	p := build(t, env, conf)
	r1 := newCtx("GET", "/a").WithRoute("r1")
	r2 := newCtx("GET", "/b").WithRoute("r2")
	check(t, "r1", run(p, r1), answer{200, "", "1", "0", "60"})
	check(t, "r2", run(p, r2), answer{200, "", "1", "0", "60"})
	check(t, "r1 again", run(p, r1), answer{503, "", "1", "0", "60"})
	// Reloaded, members in another order: the same counter.
	p = build(t, env, `{"time_window":60, "count":1}`)
	check(t, "r1 after a reload", run(p, r1), answer{503, "", "1", "0", "60"})
	// Changed: a new counter.
	p = build(t, env, `{"count":1,"time_window":60,"rejected_code":429}`)
	check(t, "r1 changed", run(p, r1), answer{200, "", "1", "0", "60"})

	const group = `{"count":2,"time_window":60,"group":"shared"}`
	g1, g2 := build(t, env, group), build(t, env, group)
	check(t, "group r1", run(g1, r1), answer{200, "", "2", "1", "60"})
	check(t, "group r2", run(g2, r2), answer{200, "", "2", "0", "60"})
	check(t, "group r1 again", run(g1, r1), answer{503, "", "2", "0", "60"})
	// A member whose configuration differs (the Admin API refuses it; one
	// written to etcd directly) shares the counter with its own count: a
	// worker does not refuse a whole configuration for it.
	// (three requests counted so far, the rejected one included)
	g3 := build(t, env, `{"count":5,"time_window":60,"group":"shared"}`)
	check(t, "group r1, other count", run(g3, r1), answer{200, "", "5", "1", "60"})
}

// TestFullTable: no room for a new counter is a limiter failure: 500
// with APISIX's body, or a pass with allow_degradation.
func TestFullTable(t *testing.T) {
	env := plugins.Env{Counters: plugins.NewCounterTable(1)}
	p := build(t, env, `{"count":5,"time_window":60}`)
	check(t, "first client", run(p, newCtx("GET", "/")), answer{200, "", "5", "4", "60"})
	second := newCtx("GET", "/").WithVar("remote_addr", "10.0.0.2")
	check(t, "table full", run(p, second), answer{Status: 500, Body: `{"error_msg":"failed to limit count"}` + "\n"})
	d := build(t, env, `{"count":5,"time_window":60,"allow_degradation":true}`)
	check(t, "table full, degraded", run(d, second), answer{Status: 200})
}

func TestLimitFromVar(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"count":"$http_x_count","time_window":"${arg_window ?? 30}"}`)
	c := newCtx("GET", "/").WithHeader("X-Count", "2")
	check(t, "from vars", run(p, c), answer{200, "", "2", "1", "30"})
	w := newCtx("GET", "/?window=10").WithHeader("X-Count", "1").WithVar("remote_addr", "10.0.0.9")
	check(t, "window from the query", run(p, w), answer{200, "", "1", "0", "10"})
	for _, bad := range []string{"", "0", "-1", "1.5", "abc", "9007199254740992"} {
		c := newCtx("GET", "/").WithHeader("X-Count", bad)
		if bad == "" {
			c = newCtx("GET", "/")
		}
		check(t, "count "+bad, run(p, c), answer{Status: 500})
	}
	d := build(t, plugins.NewLocalEnv(), `{"count":"$http_x_count","time_window":60,"allow_degradation":true}`)
	check(t, "bad count, degraded", run(d, newCtx("GET", "/")), answer{Status: 200})
}

func TestCheck(t *testing.T) {
	for _, tc := range []struct{ conf, err string }{
		{`{"count":2,"time_window":60,"rejected_code":503,"key":"remote_addr"}`, ""},
		{`{"count":2,"time_window":60}`, ""},
		{`{"rules":[{"count":1,"time_window":1,"key":"$remote_addr"}]}`, ""},
		{`{"count":2,"time_window":60,"policy":"redis","redis_host":"127.0.0.1"}`, ""},
		{`{"count":2,"time_window":60,"policy":"redis-sentinel","redis_sentinels":[{"host":"127.0.0.1","port":1}],"redis_master_name":"m"}`,
			`policy "redis-sentinel" is not supported yet, only "local", "redis" and "redis-cluster"`},
		{`{"count":2,"time_window":60,"window_type":"sliding"}`, `window_type "sliding" is not supported yet`},
		{`{"time_window":60}`, "value should match only one schema, but matches none"},
		{`{"count":0,"time_window":60}`, `property "count" validation failed: value should match only one schema, but matches none`},
		{`{"count":2,"time_window":0}`, `property "time_window" validation failed: value should match only one schema, but matches none`},
		{`{"count":2,"rules":[{"count":1,"time_window":1,"key":"k"}]}`, "count/time_window and rules cannot be specified at the same time"},
		{`{"count":2,"time_window":5,"key":"remote_addr","rules":[{"count":1,"time_window":10,"key":"${http_company}"}]}`, "count/time_window and rules cannot be specified at the same time"},
		{`{"rules":[{"count":5,"time_window":10,"key":"${http_company}"},{"count":8,"time_window":20,"key":"${http_company}"}]}`, "duplicate key '${http_company}' in rules"},
		{`{"rules":[{"count":5,"time_window":10}]}`, `property "key" is required`},
		{`{"group":"g","rules":[{"count":1,"time_window":1,"key":"k"}]}`, "group and rules cannot be specified at the same time"},
		{`{"count":2,"time_window":60,"rejected_code":600}`, `property "rejected_code" validation failed`},
		{`{"count":2,"time_window":60,"rejected_msg":""}`, `property "rejected_msg" validation failed`},
		{`{"count":2,"time_window":60,"key_type":"header"}`, `property "key_type" validation failed`},
		{`{"count":2,"time_window":60,"policy":"redis"}`, `property "redis_host" is required`},
		{`{"count":2,"time_window":60,"policy":"redis-cluster","redis_cluster_nodes":["127.0.0.1:1"]}`, `property "redis_cluster_name" is required`},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: %v, want %q", tc.conf, err, tc.err)
		case err != nil && !strings.HasPrefix(err.Error(), "failed to check the configuration of plugin limit-count err: "):
			t.Errorf("%s: %v: not APISIX's prefix", tc.conf, err)
		}
	}
}

// TestBuildRefusesWhatIsNotSupported: Check refuses it (above); Build, for
// a configuration that reached a worker without the Admin API, too.
func TestBuildRefusesWhatIsNotSupported(t *testing.T) {
	for _, tc := range []struct{ conf, err string }{
		{`{"count":2,"time_window":60,"policy":"redis-sentinel","redis_sentinels":[{"host":"127.0.0.1","port":1}],"redis_master_name":"m"}`,
			`policy "redis-sentinel" is not supported yet`},
		{`{"count":2,"time_window":60,"policy":"redis-cluster","redis_cluster_nodes":["abc"],"redis_cluster_name":"c"}`, `failed to parse address: abc`},
		{`{"count":2,"time_window":60,"window_type":"sliding"}`, `window_type "sliding" is not supported yet`},
	} {
		_, err := plugins.Default.Build(map[string]json.RawMessage{Name: json.RawMessage(tc.conf)}, plugins.NewLocalEnv())
		if err == nil || !strings.Contains(err.Error(), tc.err) {
			t.Errorf("%s: %v, want %q", tc.conf, err, tc.err)
		}
	}
}

func TestAppendReset(t *testing.T) {
	for ns, want := range map[int64]string{
		60 * sec: "60", 59*sec + 999*sec/1000: "59.99", 59*sec + sec/2: "59.5", 7 * sec / 100: "0.07",
		sec / 1000: "0", 0: "0", -5: "0", 10*sec + 5*sec/100: "10.05",
	} {
		if got := string(appendReset(nil, ns)); got != want {
			t.Errorf("appendReset(%d) = %q, want %q", ns, got, want)
		}
	}
}

// TestRules: APISIX's t/plugin/limit-count-rules.t: each rule whose key
// resolves counts the request; a request no rule applies to is a limiter
// failure (500); a rule's headers carry its prefix (its header_prefix, or
// its position).
func TestRules(t *testing.T) {
	env := plugins.NewLocalEnv()
	p := build(t, env, `{"rejected_code":503,"rejected_msg":"rejected","rules":[
		{"key":"${http_user}","count":"${http_jack_count}","time_window":60},
		{"key":"${http_project}","count":"${http_apisix_count}","time_window":60}]}`)
	check(t, "no rule applies", run(p, newCtx("GET", "/hello")), answer{Status: 500})
	jack := newCtx("GET", "/hello").WithHeader("user", "jack").WithHeader("jack-count", "2")
	jack.UpstreamBody = []byte("hello world\n")
	for i, want := range []answer{{Status: 200, Body: "hello world\n"}, {Status: 200, Body: "hello world\n"}, {Status: 503, Body: `{"error_msg":"rejected"}` + "\n"}} {
		a := run(p, jack)
		if a.Status != want.Status || a.Body != want.Body {
			t.Errorf("jack %d: %d %q, want %d %q", i+1, a.Status, a.Body, want.Status, want.Body)
		}
	}
	if got := string(jack.ResponseHeader("X-1-RateLimit-Remaining")); got != "0" {
		t.Errorf("jack's X-1-RateLimit-Remaining: %q", got)
	}
	project := newCtx("GET", "/hello").WithHeader("project", "apisix").WithHeader("apisix-count", "3")
	for i, want := range []int{200, 200, 200, 503} {
		if a := run(p, project); a.Status != want {
			t.Errorf("project %d: %d, want %d", i+1, a.Status, want)
		}
	}
	if got := string(project.ResponseHeader("X-2-RateLimit-Limit")); got != "3" {
		t.Errorf("project's X-2-RateLimit-Limit: %q", got)
	}

	// Variables with defaults in count and time_window.
	d := build(t, env, `{"rules":[{"count":"${http_count ?? 2}","time_window":"${http_tw ?? 5}","key":"${remote_addr}"}]}`)
	c := newCtx("GET", "/hello")
	for i, want := range []int{200, 200, 503} {
		if a := run(d, c); a.Status != want {
			t.Errorf("defaults %d: %d, want %d", i+1, a.Status, want)
		}
	}
	if got := string(c.ResponseHeader("X-1-RateLimit-Reset")); got != "5" {
		t.Errorf("X-1-RateLimit-Reset %q, want 5", got)
	}

	// header_prefix.
	h := build(t, env, `{"rules":[{"count":2,"time_window":60,"key":"${http_user}","header_prefix":"jack"},
		{"count":3,"time_window":60,"key":"${http_project}","header_prefix":"bar"}]}`)
	c = newCtx("GET", "/hello").WithHeader("user", "jack")
	run(h, c)
	got := []string{string(c.ResponseHeader("X-jack-RateLimit-Limit")), string(c.ResponseHeader("X-jack-RateLimit-Remaining")), string(c.ResponseHeader("X-jack-RateLimit-Reset"))}
	if d := cmp.Diff([]string{"2", "1", "60"}, got); d != "" {
		t.Errorf("header_prefix jack (-want +got):\n%s", d)
	}
	c = newCtx("GET", "/hello").WithHeader("project", "x")
	run(h, c)
	if got := string(c.ResponseHeader("X-bar-RateLimit-Remaining")); got != "2" {
		t.Errorf("X-bar-RateLimit-Remaining %q", got)
	}
	// Two rules that resolve to one value still count apart.
	both := newCtx("GET", "/hello").WithHeader("user", "same").WithHeader("project", "same")
	if a := run(h, both); a.Status != 200 || string(both.ResponseHeader("X-jack-RateLimit-Remaining")) != "1" || string(both.ResponseHeader("X-bar-RateLimit-Remaining")) != "2" {
		t.Errorf("two rules, one value: %+v", a)
	}
}
