package limit

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/internal/redis"
	"coregate/plugins/plugintest"
)

func decode(t *testing.T, raw string) Conf {
	t.Helper()
	c := Defaults()
	if err := json.Unmarshal([]byte(raw), &c); err != nil {
		t.Fatal(err)
	}
	return c
}

// TestKeyValue: each key_type's value for a request, and what a request
// without a value is counted under: the client's address for a variable
// not set or a template that resolves none; an empty value is a value,
// but with EmptyIsNone (limit-count's); a rule's key that resolves no
// variable has none, and one that resolves to empty has the empty value.
func TestKeyValue(t *testing.T) {
	c := plugintest.NewCtx("GET", "/p?a=1&e=").WithHeader("X-User", "ann").WithVar("remote_addr", "10.0.0.9")
	for _, tc := range []struct {
		key        Key
		want       string
		wantNoneOK bool // want ok false
	}{
		{key: NewKey("var", "http_x_user"), want: "ann"},
		{key: NewKey("", "arg_a"), want: "1"},
		{key: NewKey("var", "http_x_none"), want: "10.0.0.9"},
		{key: NewKey("var", "http_x_none").EmptyIsNone(), want: "10.0.0.9"},
		{key: NewKey("var", "arg_e"), want: ""},
		{key: NewKey("var", "arg_e").EmptyIsNone(), want: "10.0.0.9"},
		{key: NewKey("var_combination", "$http_x_user:$arg_a"), want: "ann:1"},
		{key: NewKey("var_combination", "$http_x_user $arg_none"), want: "ann "},
		{key: NewKey("var_combination", "x$http_x_none"), want: "10.0.0.9"},
		{key: NewKey("var_combination", "x$http_x_none").EmptyIsNone(), want: "10.0.0.9"},
		{key: NewKey("var_combination", "$arg_e"), want: ""},
		{key: NewKey("var_combination", "$arg_e").EmptyIsNone(), want: "10.0.0.9"},
		{key: NewKey("constant", "k"), want: "k"},
		{key: NewKey("constant", ""), want: ""},
		{key: NewKey("constant", "").EmptyIsNone(), want: "10.0.0.9"},
		{key: RuleKey("$http_x_user-$arg_none"), want: "ann-"},
		{key: RuleKey("$arg_e"), want: ""},
		{key: RuleKey("$arg_e").EmptyIsNone(), want: ""},
		{key: RuleKey("x$http_x_none"), wantNoneOK: true},
	} {
		got, ok := tc.key.Append([]byte("pre:"), c)
		if tc.wantNoneOK {
			if ok {
				t.Errorf("%+v: %q, want no key", tc.key, got)
			}
			continue
		}
		if !ok || string(got) != "pre:"+tc.want {
			t.Errorf("%+v: %q %v, want %q", tc.key, got, ok, "pre:"+tc.want)
		}
		if tc.key.InRules() != (tc.key.kind == kindRule) {
			t.Errorf("%+v: InRules %v", tc.key, tc.key.InRules())
		}
	}
}

// TestSpace: a counter's space is the prefix, the route's id and the
// configuration's hash, which is the same for the same configuration
// however its JSON is written, and differs for another; a fixed space
// is its prefix alone, whatever the route.
func TestSpace(t *testing.T) {
	a, err := NewSpace("p:", json.RawMessage(`{"count":1,"key":"k"}`))
	if err != nil {
		t.Fatal(err)
	}
	a2, _ := NewSpace("p:", json.RawMessage(`{ "key": "k", "count": 1 }`))
	b, _ := NewSpace("p:", json.RawMessage(`{"count":2,"key":"k"}`))
	c := plugintest.NewCtx("GET", "/").WithRoute("r7")
	ka := string(a.Append(nil, c))
	if !strings.HasPrefix(ka, "p:r7:") || !strings.HasSuffix(ka, ":") || len(ka) != len("p:r7:")+16+1 {
		t.Errorf("space %q, want p:r7:<16 hex digits>:", ka)
	}
	if ka2 := string(a2.Append(nil, c)); ka2 != ka {
		t.Errorf("the same configuration written otherwise: %q, want %q", ka2, ka)
	}
	if kb := string(b.Append(nil, c)); kb == ka {
		t.Errorf("another configuration shares the space %q", kb)
	}
	if k8 := string(a.Append(nil, plugintest.NewCtx("GET", "/").WithRoute("r8"))); k8 == ka {
		t.Errorf("another route shares the space %q", k8)
	}
	f := FixedSpace("g:")
	if k := string(f.Append([]byte("x"), c)); k != "xg:" {
		t.Errorf("fixed space %q, want %q", k, "xg:")
	}
	if _, err := NewSpace("p:", json.RawMessage(`{`)); err == nil {
		t.Error("NewSpace took broken JSON")
	}
}

// access is an access phase made of a function.
type access func(plugins.Ctx)

func (f access) Access(c plugins.Ctx) { f(c) }

// answer runs a request through the access phase f: its status (200: it
// was let through) and body.
func answer(f func(plugins.Ctx)) (int, string) {
	c := plugintest.NewCtx("GET", "/")
	plugintest.Run(&plugins.Phases{Access: []plugins.AccessPhase{access(f)}}, c)
	return c.Status(), string(c.Body)
}

// TestAnswer: rejected_code and rejected_msg (as APISIX's error_msg,
// escaped) answer a request past the limit, the gateway's page without
// rejected_msg; a limiter that cannot count answers 500, or lets the
// request through with allow_degradation.
func TestAnswer(t *testing.T) {
	conf := decode(t, `{"rejected_code":429,"rejected_msg":"slow \"down\""}`)
	a := conf.Answer()
	if st, body := answer(a.Reject); st != 429 || body != `{"error_msg":"slow \"down\""}`+"\n" {
		t.Errorf("reject: %d %q", st, body)
	}
	conf = decode(t, `{}`)
	d := conf.Answer()
	if st, body := answer(d.Reject); st != 503 || body != "" {
		t.Errorf("reject by default: %d %q, want 503 and the gateway's page", st, body)
	}
	if st, body := answer(func(c plugins.Ctx) { d.Fail(c, []byte("failed\n")) }); st != 500 || body != "failed\n" {
		t.Errorf("fail: %d %q", st, body)
	}
	conf = decode(t, `{"allow_degradation":true}`)
	g := conf.Answer()
	if st, _ := answer(func(c plugins.Ctx) { g.Fail(c, nil) }); st != 200 {
		t.Errorf("fail with allow_degradation: answered %d", st)
	}
}

// TestDelay: a delay under a millisecond is not one, as APISIX's sleeps.
func TestDelay(t *testing.T) {
	for _, tc := range []struct{ d, want time.Duration }{
		{0, 0}, {999 * time.Microsecond, 0}, {time.Millisecond, time.Millisecond}, {2 * time.Second, 2 * time.Second},
	} {
		c := plugintest.NewCtx("GET", "/")
		Delay(c, tc.d)
		if c.Delayed != tc.want {
			t.Errorf("Delay(%v): delayed %v, want %v", tc.d, c.Delayed, tc.want)
		}
	}
}

// TestOpen: policy local counts in the node's counter table (refused
// without one), redis and redis-cluster in the process's client of their
// Redis; any other policy, or Redis fields a worker cannot use, is
// refused by CheckPolicy and Open alike.
func TestOpen(t *testing.T) {
	env := plugins.NewLocalEnv()
	raw := json.RawMessage(`{}`)
	local := decode(t, string(raw))
	if err := local.CheckPolicy(raw); err != nil {
		t.Fatal(err)
	}
	if ctrs, rc, err := local.Open(raw, env); err != nil || ctrs == nil || rc != nil {
		t.Errorf("local: %v %v %v", ctrs, rc, err)
	}
	if _, _, err := local.Open(raw, plugins.Env{}); err == nil || err.Error() != "no counter table" {
		t.Errorf("local without a counter table: %v", err)
	}
	raw = json.RawMessage(`{"policy":"redis","redis_host":"127.0.0.1","redis_port":1}`)
	r := decode(t, string(raw))
	ctrs, rc, err := r.Open(raw, plugins.Env{})
	if err != nil || ctrs != nil || rc == nil {
		t.Errorf("redis: %v %v %v", ctrs, rc, err)
	}
	if _, rc2, _ := r.Open(raw, env); rc2 != rc {
		t.Error("the same Redis got another client")
	}
	for _, bad := range []string{`{"policy":"redis-sentinel"}`, `{"policy":"redis-cluster","redis_cluster_nodes":["no port"]}`} {
		b := decode(t, bad)
		errC := b.CheckPolicy(json.RawMessage(bad))
		_, _, errO := b.Open(json.RawMessage(bad), env)
		if errC == nil || errO == nil || errC.Error() != errO.Error() {
			t.Errorf("%s: CheckPolicy %v, Open %v", bad, errC, errO)
		}
	}
}

// resumer is a Redis call the access phase awaits.
type resumer struct {
	redis.Call
	resumed   bool
	abandoned bool
}

func (r *resumer) Resume(plugins.Ctx) { r.resumed = true }
func (r *resumer) Abandon()           { r.abandoned = true }

var echo = redis.NewScript(`return {tonumber(ARGV[1]), 7}`)

// TestAwait: Await submits the call once the request waits, and the
// request resumes with Redis's reply; a request that cannot wait (it
// waits already, or has been answered) submits nothing.
func TestAwait(t *testing.T) {
	port := plugintest.RedisServer(t)
	raw := json.RawMessage(fmt.Sprintf(`{"policy":"redis","redis_host":"127.0.0.1","redis_port":%d}`, port))
	conf := decode(t, string(raw))
	_, rc, err := conf.Open(raw, plugins.Env{})
	if err != nil {
		t.Fatal(err)
	}
	c := plugintest.NewCtx("GET", "/")
	r := &resumer{Call: redis.Call{Script: echo, Keys: []string{"k"}, Args: []string{"41"}}}
	if !Await(c, r, rc, &r.Call) {
		t.Fatal("Await refused")
	}
	second := &resumer{Call: redis.Call{Script: echo, Keys: []string{"k"}, Args: []string{"1"}}}
	if Await(c, second, rc, &second.Call) {
		t.Error("a second Await while the first waits was granted")
	}
	if !c.Settle() {
		t.Fatal("no Wake")
	}
	if !r.resumed || r.Err != nil || r.NRep != 2 || r.Reply[0] != 41 || r.Reply[1] != 7 {
		t.Errorf("resumed %v, reply %v (%d) %v", r.resumed, r.Reply, r.NRep, r.Err)
	}
	if second.Waker != nil || second.NRep != 0 {
		t.Error("the refused call was submitted")
	}
	c.Reset()
	c.Exit(503, nil)
	third := &resumer{Call: redis.Call{Script: echo, Keys: []string{"k"}, Args: []string{"1"}}}
	if Await(c, third, rc, &third.Call) || third.Waker != nil {
		t.Error("a request answered awaited")
	}
}
