package keyauth

import (
	"encoding/json"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// consumers indexes consumers given as APISIX consumer objects, through
// the registry as the worker does.
func consumers(t *testing.T, objs ...string) *plugins.ConsumerIndex {
	t.Helper()
	var cs []*plugins.Consumer
	for _, o := range objs {
		var c struct {
			Username string                     `json:"username"`
			Labels   map[string]string          `json:"labels"`
			Plugins  map[string]json.RawMessage `json:"plugins"`
		}
		if err := json.Unmarshal([]byte(o), &c); err != nil {
			t.Fatal(err)
		}
		cs = append(cs, &plugins.Consumer{Username: c.Username, Plugins: c.Plugins, CustomID: c.Labels["custom_id"]})
	}
	x, err := plugins.Default.IndexConsumers(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	return x
}

func build(t testing.TB, conf string, cons plugins.Consumers) plugins.Phases {
	env := plugins.NewLocalEnv()
	env.Consumers = cons
	return *plugintest.BuildEnv(t, Name, conf, env)
}

// outcome is what a test looks at after one request.
type outcome = plugintest.Outcome

func observe(c *plugintest.Ctx) outcome { return plugintest.Observe(c) }

type request struct {
	target  string
	headers []string // name, value, ...
}

func (r request) ctx() *plugintest.Ctx {
	c := plugintest.NewCtx("GET", r.target)
	for i := 0; i+1 < len(r.headers); i += 2 {
		c.WithHeader(r.headers[i], r.headers[i+1])
	}
	return c
}

const (
	jack      = `{"username":"jack","plugins":{"key-auth":{"key":"auth-one"}}}`
	spaced    = `{"username":"spaced","plugins":{"key-auth":{"key":"a b+c"}}}`
	anonymous = `{"username":"anonymous","plugins":{"limit-count":{"count":1,"time_window":60}}}`
)

var (
	missing = `{"message":"Missing API key in request"}` + "\n"
	invalid = `{"message":"Invalid API key in request"}` + "\n"
	noUser  = `{"message":"Invalid user authorization"}` + "\n"
)

func passed(consumer, uri string, headers ...string) outcome {
	o := outcome{Status: 200, Consumer: consumer, URI: uri, Headers: map[string]string{"x-consumer-username": consumer}}
	for i := 0; i+1 < len(headers); i += 2 {
		o.Headers[headers[i]] = headers[i+1]
	}
	return o
}

// TestRewrite follows t/plugin/key-auth.t, key-auth-realm.t and
// key-auth-anonymous-consumer.t.
func TestRewrite(t *testing.T) {
	all := consumers(t, jack, spaced, anonymous)
	// An index that has a consumer of the empty key, which the consumer
	// schema refuses: a request's empty key is still no consumer's.
	withEmpty := emptyKeyIndex{all, &plugins.Consumer{Username: "blank"}}
	tests := []struct {
		name string
		conf string
		cons plugins.Consumers
		req  request
		want outcome
	}{
		{"header", `{}`, all, request{"/hello", []string{"apikey", "auth-one"}},
			passed("jack", "", "apikey", "auth-one")},
		{"header any case", `{}`, all, request{"/hello", []string{"ApiKey", "auth-one"}},
			passed("jack", "", "apikey", "auth-one")},
		{"invalid header", `{}`, all, request{"/hello", []string{"apikey", "123"}},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"empty header", `{}`, all, request{"/hello", []string{"apikey", ""}},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"missing", `{}`, all, request{"/hello", nil},
			outcome{Status: 401, Body: missing, Challenge: `apikey realm="key"`}},
		{"no consumers", `{}`, nil, request{"/hello", []string{"apikey", "auth-one"}},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"custom header", `{"header":"Authorization"}`, all, request{"/hello", []string{"authorization", "auth-one"}},
			passed("jack", "", "authorization", "auth-one")},
		{"header with underscores", `{"header":"x_api_key"}`, all, request{"/hello", []string{"X-Api-Key", "auth-one"}},
			passed("jack", "", "x-api-key", "auth-one")},
		{"custom header, default one ignored", `{"header":"Authorization"}`, all, request{"/hello", []string{"apikey", "auth-one"}},
			outcome{Status: 401, Body: missing, Challenge: `apikey realm="key"`}},
		{"query", `{}`, all, request{"/hello?apikey=auth-one", nil}, passed("jack", "")},
		{"custom query", `{"query":"auth"}`, all, request{"/hello?x=1&auth=auth-one", nil}, passed("jack", "")},
		{"query unescaped", `{}`, all, request{"/hello?api%6Bey=a+b%2Bc", nil}, passed("spaced", "")},
		{"query repeated", `{}`, all, request{"/hello?apikey=auth-one&apikey=auth-one", nil},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"query without value", `{}`, all, request{"/hello?apikey", nil},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"query empty", `{}`, all, request{"/hello?apikey=", nil},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"empty key", `{}`, withEmpty, request{"/hello?apikey=", nil},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"empty key in a header", `{}`, withEmpty, request{"/hello", []string{"apikey", ""}},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		// An empty header is a key, as ngx.req.get_headers gives "": the
		// query argument is not looked at.
		{"empty header before query", `{}`, all, request{"/hello?apikey=auth-one", []string{"apikey", ""}},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"empty key, anonymous", `{"anonymous_consumer":"anonymous"}`, withEmpty, request{"/hello", []string{"apikey", ""}},
			passed("anonymous", "", "apikey", "")},
		{"argument without value is no key", `{}`, withEmpty, request{"/hello?apikey", nil},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"header before query", `{}`, all, request{"/hello?apikey=auth-one", []string{"apikey", "bad"}},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"realm", `{"realm":"my-custom-realm"}`, all, request{"/hello", nil},
			outcome{Status: 401, Body: missing, Challenge: `apikey realm="my-custom-realm"`}},

		// hide_credentials (TESTs 14-25).
		{"header kept", `{"hide_credentials":false}`, all, request{"/echo", []string{"apikey", "auth-one", "test", "auth-two"}},
			passed("jack", "", "apikey", "auth-one", "test", "auth-two")},
		{"header hidden", `{"hide_credentials":true}`, all, request{"/echo", []string{"apikey", "auth-one", "test", "auth-two"}},
			passed("jack", "", "test", "auth-two")},
		{"header hidden, query kept", `{"hide_credentials":true}`, all, request{"/echo?apikey=auth-one", []string{"apikey", "auth-one"}},
			passed("jack", "")},
		{"query hidden", `{"query":"auth","hide_credentials":true}`, all, request{"/echo?auth=auth-one", nil},
			passed("jack", "/echo")},
		{"query repeated, hide_credentials", `{"query":"auth","hide_credentials":true}`, all,
			request{"/e%63ho?a=%41&auth=auth-one&test=auth-two&flag&auth=x", nil},
			outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"query hidden, others kept", `{"query":"auth","hide_credentials":true}`, all,
			request{"/e%63ho?a=%41&auth=auth-one&test=auth-two&flag", []string{"auth", "auth-one"}},
			passed("jack", "/e%63ho?a=%41&test=auth-two&flag", "auth", "auth-one")},

		// anonymous_consumer.
		{"anonymous without key", `{"anonymous_consumer":"anonymous"}`, all, request{"/hello", nil},
			passed("anonymous", "")},
		{"anonymous, key still wins", `{"anonymous_consumer":"anonymous"}`, all, request{"/hello", []string{"apikey", "auth-one"}},
			passed("jack", "", "apikey", "auth-one")},
		{"anonymous not found", `{"anonymous_consumer":"not-found-anonymous"}`, all, request{"/hello", nil},
			outcome{Status: 401, Body: noUser, Challenge: `apikey realm="key"`}},
		{"anonymous, no consumers", `{"anonymous_consumer":"anonymous"}`, nil, request{"/hello", nil},
			outcome{Status: 401, Body: noUser, Challenge: `apikey realm="key"`}},
		{"anonymous, invalid header hidden", `{"anonymous_consumer":"anonymous","hide_credentials":true}`, all,
			request{"/print", []string{"apikey", "invalid-key"}}, passed("anonymous", "")},
		{"anonymous, invalid query hidden", `{"anonymous_consumer":"anonymous","hide_credentials":true,"query":"auth"}`, all,
			request{"/print?auth=invalid-key", nil}, passed("anonymous", "/print")},
		{"anonymous, invalid header and query hidden", `{"anonymous_consumer":"anonymous","hide_credentials":true,"query":"auth"}`, all,
			request{"/print?auth=invalid-key&x=1", []string{"apikey", "invalid-key"}}, passed("anonymous", "/print?x=1")},

		// attach_consumer: what the client claims is replaced or dropped.
		{"consumer headers not spoofed", `{}`, all,
			request{"/hello", []string{"apikey", "auth-one", "X-Consumer-Username", "admin", "X-Credential-Identifier", "c", "X-Consumer-Custom-ID", "x"}},
			passed("jack", "", "apikey", "auth-one")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var cons plugins.Consumers
			if tc.cons != nil {
				cons = tc.cons
			}
			p := build(t, tc.conf, cons)
			c := tc.req.ctx()
			plugintest.Run(&p, c)
			if diff := cmp.Diff(tc.want, observe(c)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// emptyKeyIndex is an index whose consumer blank has the empty key of
// key-auth, as no checked configuration gives.
type emptyKeyIndex struct {
	plugins.Consumers
	blank *plugins.Consumer
}

func (x emptyKeyIndex) Find(plugin string, cred []byte) plugins.Found {
	if plugin == Name && len(cred) == 0 {
		return plugins.Found{Consumer: x.blank}
	}
	return x.Consumers.Find(plugin, cred)
}

// TestConsumerSchema: a consumer's configuration is checked against the
// consumer schema (t/plugin/key-auth.t TESTs 1, 2, 9), a route's against
// the route schema.
func TestConsumerSchema(t *testing.T) {
	tests := []struct {
		consumer bool
		conf     string
		want     string
	}{
		{true, `{"key":"test-key"}`, ""},
		{true, `{"key":123}`, `failed to check the configuration of plugin key-auth err: property "key" validation failed: wrong type: expected string, got number`},
		{true, `{}`, `failed to check the configuration of plugin key-auth err: property "key" is required`},
		{true, `{"key":""}`, `failed to check the configuration of plugin key-auth err: property "key" validation failed: string too short, expected at least 1, got 0`},
		{false, `{}`, ""},
		{false, `{"header":"Authorization","query":"auth","hide_credentials":true,"anonymous_consumer":"anonymous","realm":"r"}`, ""},
		{false, `{"hide_credentials":"yes"}`, `failed to check the configuration of plugin key-auth err: property "hide_credentials" validation failed: wrong type: expected boolean, got string`},
		{false, `{"anonymous_consumer":""}`, `failed to check the configuration of plugin key-auth err: property "anonymous_consumer" validation failed: string too short, expected at least 1, got 0`},
		{false, `{"realm":"a\"b"}`, `failed to check the configuration of plugin key-auth err: property "realm" validation failed: failed to match pattern "^[\\x20-\\x21\\x23-\\x5B\\]-\\x7E]+$" with "a\"b"`},
	}
	for _, tc := range tests {
		check := plugins.Check
		if tc.consumer {
			check = plugins.CheckConsumer
		}
		got := ""
		if err := check(Name, json.RawMessage(tc.conf)); err != nil {
			got = err.Error()
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("consumer %v, %s (-want +got):\n%s", tc.consumer, tc.conf, diff)
		}
	}
	if _, ok := plugins.Default.ConsumerSchema(Name); !ok {
		t.Error("no consumer schema registered")
	}
	// A consumer without a key is refused when a snapshot is indexed.
	_, err := plugins.Default.IndexConsumers([]*plugins.Consumer{{Username: "x", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{}`)}}}, nil)
	if err == nil || !strings.Contains(err.Error(), `property "key" is required`) {
		t.Errorf("IndexConsumers of a consumer without a key: %v", err)
	}
	// Two consumers with one key are refused too.
	_, err = plugins.Default.IndexConsumers([]*plugins.Consumer{
		{Username: "a", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"k"}`)}},
		{Username: "b", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"k"}`)}},
	}, nil)
	if err == nil || err.Error() != "duplicate key of plugin key-auth found with consumer: a" {
		t.Errorf("duplicate key: %v", err)
	}
}

// TestLookupIndependentOfConsumers: with 10,000 consumers the key of any
// one of them is found, and no other.
func TestLookupIndependentOfConsumers(t *testing.T) {
	var cs []*plugins.Consumer
	for i := range 10000 {
		n := strings.Repeat("x", i%7) + itoa(i)
		cs = append(cs, &plugins.Consumer{Username: "user" + n, Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"key-` + n + `"}`)}})
	}
	x, err := plugins.Default.IndexConsumers(cs, nil)
	if err != nil {
		t.Fatal(err)
	}
	p := build(t, `{}`, x)
	for _, i := range []int{0, 1, 4999, 9999} {
		n := strings.Repeat("x", i%7) + itoa(i)
		c := plugintest.NewCtx("GET", "/?apikey=key-"+n)
		plugintest.Run(&p, c)
		if c.Consumer() == nil || c.Consumer().Username != "user"+n {
			t.Fatalf("key %d: consumer %v, status %d", i, c.Consumer(), c.Status())
		}
	}
}

func itoa(i int) string {
	b, _ := json.Marshal(i)
	return string(b)
}

// TestEnvKey: a consumer's key given as $env://NAME is the variable's
// value: that value authenticates, the reference itself does not, and a
// consumer whose variable is not set is left out, its reference matching
// nothing.
func TestEnvKey(t *testing.T) {
	const v = "COREGATE_KEYAUTH_TEST_KEY"
	t.Setenv(v, "env-secret")
	refd := `{"username":"envy","plugins":{"key-auth":{"key":"$env://` + v + `"}}}`
	if err := plugins.CheckConsumer(Name, json.RawMessage(`{"key":"$env://`+v+`"}`)); err != nil {
		t.Fatal(err)
	}
	p := build(t, `{}`, consumers(t, jack, refd))
	for _, tc := range []struct {
		key  string
		want outcome
	}{
		{"env-secret", passed("envy", "", "apikey", "env-secret")},
		{"$env://" + v, outcome{Status: 401, Body: invalid, Challenge: `apikey realm="key"`}},
		{"auth-one", passed("jack", "", "apikey", "auth-one")},
	} {
		c := request{"/hello", []string{"apikey", tc.key}}.ctx()
		plugintest.Run(&p, c)
		if diff := cmp.Diff(tc.want, observe(c)); diff != "" {
			t.Errorf("apikey %s (-want +got):\n%s", tc.key, diff)
		}
	}

	t.Setenv(v, "")
	if err := os.Unsetenv(v); err != nil {
		t.Fatal(err)
	}
	if err := plugins.CheckConsumer(Name, json.RawMessage(`{"key":"$env://`+v+`"}`)); err == nil ||
		err.Error() != `failed to check the configuration of plugin key-auth err: property "key" validation failed: cannot resolve $env://`+v+`: environment variable `+v+` is not set` {
		t.Errorf("CheckConsumer of an unset variable: %v", err)
	}
	x := consumers(t, jack, refd)
	if r := x.Refused(); len(r) != 1 || !errors.Is(r[0], plugins.ErrReference) || !strings.HasPrefix(r[0].Error(), "consumer envy: ") {
		t.Errorf("Refused = %v, want consumer envy", r)
	}
	p = build(t, `{}`, x)
	for _, key := range []string{"$env://" + v, "env-secret", ""} {
		c := request{"/hello", []string{"apikey", key}}.ctx()
		plugintest.Run(&p, c)
		if o := observe(c); o.Status != 401 || o.Consumer != "" {
			t.Errorf("apikey %q with the variable unset: %+v", key, o)
		}
	}
}

// TestAttachConsumer: as APISIX's attach_consumer, the upstream learns the
// consumer's name, the credential object that matched and the consumer's
// labels.custom_id; an anonymous consumer goes without its custom_id.
func TestAttachConsumer(t *testing.T) {
	custom := &plugins.Consumer{Username: "custom", CustomID: "c-42",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"k-own"}`)}}
	x, err := plugins.Default.IndexConsumers([]*plugins.Consumer{custom}, []plugins.Credential{{Username: "custom", ID: "cred-7",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key":"k-cred"}`)}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, conf, key string
		want            map[string]string
	}{
		{"consumer", `{"hide_credentials":true}`, "k-own",
			map[string]string{"x-consumer-username": "custom", "x-consumer-custom-id": "c-42"}},
		{"credential object", `{"hide_credentials":true}`, "k-cred",
			map[string]string{"x-consumer-username": "custom", "x-credential-identifier": "cred-7", "x-consumer-custom-id": "c-42"}},
		{"anonymous", `{"hide_credentials":true,"anonymous_consumer":"custom"}`, "k-none",
			map[string]string{"x-consumer-username": "custom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, x)
			c := request{"/hello", []string{"apikey", tc.key, "X-Credential-Identifier", "spoofed", "X-Consumer-Custom-ID", "spoofed"}}.ctx()
			plugintest.Run(&p, c)
			if diff := cmp.Diff(tc.want, observe(c).Headers); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
