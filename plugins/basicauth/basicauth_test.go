package basicauth

import (
	"encoding/base64"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// index indexes consumers and credential objects (plugintest.IndexConsumers).
func index(t testing.TB, creds []plugins.Credential, objs ...string) *plugins.ConsumerIndex {
	return plugintest.IndexConsumers(t, creds, objs...)
}

func build(t testing.TB, conf string, cons plugins.Consumers) plugins.Phases {
	env := plugins.NewLocalEnv()
	env.Consumers = cons
	return *plugintest.BuildEnv(t, Name, conf, env)
}

// outcome is what a test looks at after one request.
type outcome = plugintest.Outcome

func observe(c *plugintest.Ctx) outcome { return plugintest.Observe(c) }

// ctx is a request with headers (name, value, ...).
func ctx(headers ...string) *plugintest.Ctx {
	c := plugintest.NewCtx("GET", "/hello")
	for i := 0; i+1 < len(headers); i += 2 {
		c.WithHeader(headers[i], headers[i+1])
	}
	return c
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

const (
	foo       = `{"username":"foo","plugins":{"basic-auth":{"username":"foo","password":"bar"}}}`
	spaced    = `{"username":"spaced","plugins":{"basic-auth":{"username":"sp","password":"a"}}}`
	empty     = `{"username":"empty","plugins":{"basic-auth":{"username":"nopass","password":""}}}`
	anonymous = `{"username":"anonymous","plugins":{"limit-count":{"count":1,"time_window":60}}}`
	// owner has no basic-auth of its own: its credential object has.
	owner = `{"username":"owner"}`
)

var (
	missing = `{"message":"Missing authorization in request"}` + "\n"
	invalid = `{"message":"Invalid authorization in request"}` + "\n"
	noUser  = `{"message":"Invalid user authorization"}` + "\n"
)

func passed(consumer string, headers ...string) outcome {
	o := outcome{Status: 200, Consumer: consumer, Headers: map[string]string{"x-consumer-username": consumer}}
	for i := 0; i+1 < len(headers); i += 2 {
		o.Headers[headers[i]] = headers[i+1]
	}
	return o
}

func refused(body string) outcome {
	return outcome{Status: 401, Body: body, Challenge: `Basic realm="basic"`}
}

// TestRewrite follows t/plugin/basic-auth.t, basic-auth-realm.t and
// basic-auth-anonymous-consumer.t.
func TestRewrite(t *testing.T) {
	all := index(t, []plugins.Credential{{Username: "owner", ID: "cred-1",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"cuser","password":"cpass"}`)}}},
		foo, spaced, empty, anonymous, owner)
	good := "Basic " + b64("foo:bar")
	for _, tc := range []struct {
		name string
		conf string
		cons plugins.Consumers
		hdrs []string
		want outcome
	}{
		{"missing", `{}`, all, nil, refused(missing)},
		{"bad scheme", `{}`, all, []string{"Authorization", "Bad_header YmFyOmJhcgo="}, refused(invalid)},
		{"bad base64", `{}`, all, []string{"Authorization", "Basic aca_a"}, refused(invalid)},
		{"no password", `{}`, all, []string{"Authorization", "Basic YmFy"}, refused(invalid)},
		{"empty last field", `{}`, all, []string{"Authorization", "Basic " + b64("foo:")}, refused(invalid)},
		{"invalid username", `{}`, all, []string{"Authorization", "Basic YmFyOmJhcgo="}, refused(noUser)},
		{"invalid password", `{}`, all, []string{"Authorization", "Basic Zm9vOmZvbwo="}, refused(noUser)},
		{"longer password", `{}`, all, []string{"Authorization", "Basic " + b64("foo:barr")}, refused(noUser)},
		{"no consumers", `{}`, nil, []string{"Authorization", good}, refused(noUser)},
		{"valid", `{}`, all, []string{"Authorization", good}, passed("foo", "authorization", good)},
		{"scheme in any case", `{}`, all, []string{"Authorization", "bAsIc " + b64("foo:bar")},
			passed("foo", "authorization", "bAsIc "+b64("foo:bar"))},
		// "Zm9vOmJhcgo=" is "foo:bar\n": white space is removed.
		{"white space removed", `{}`, all, []string{"Authorization", "Basic " + b64(" f o o :\tbar\n")},
			passed("foo", "authorization", "Basic "+b64(" f o o :\tbar\n"))},
		// The scheme need not start the header, and what follows the
		// first '=' is ignored, as ngx.re.match and ngx.decode_base64 do.
		{"scheme anywhere", `{}`, all, []string{"Authorization", "xbasic " + b64("foo:bar")},
			passed("foo", "authorization", "xbasic "+b64("foo:bar"))},
		{"after padding ignored", `{}`, all, []string{"Authorization", "Basic Zm9vOmJhcg==!!"},
			passed("foo", "authorization", "Basic Zm9vOmJhcg==!!")},
		{"unpadded", `{}`, all, []string{"Authorization", "Basic Zm9vOmJhcg"},
			passed("foo", "authorization", "Basic Zm9vOmJhcg")},
		// A second ':' and what follows it are lost, as in APISIX: the
		// consumer whose password is "a" is matched by "a:b".
		{"password with a colon", `{}`, all, []string{"Authorization", "Basic " + b64("sp:a:b")},
			passed("spaced", "authorization", "Basic "+b64("sp:a:b"))},
		{"empty password", `{}`, all, []string{"Authorization", "Basic " + b64("nopass::")},
			passed("empty", "authorization", "Basic "+b64("nopass::"))},
		{"credential object", `{}`, all, []string{"Authorization", "Basic " + b64("cuser:cpass")},
			passed("owner", "authorization", "Basic "+b64("cuser:cpass"), "x-credential-identifier", "cred-1")},
		{"credential object, wrong password", `{}`, all, []string{"Authorization", "Basic " + b64("cuser:bar")}, refused(noUser)},
		{"realm", `{"realm":"my-realm"}`, all, nil,
			outcome{Status: 401, Body: missing, Challenge: `Basic realm="my-realm"`}},

		// hide_credentials.
		{"hidden", `{"hide_credentials":true}`, all, []string{"Authorization", good, "X-Other", "1"},
			passed("foo", "x-other", "1")},

		// anonymous_consumer.
		{"anonymous without header", `{"anonymous_consumer":"anonymous"}`, all, nil, passed("anonymous")},
		{"anonymous, invalid password", `{"anonymous_consumer":"anonymous"}`, all,
			[]string{"Authorization", "Basic " + b64("foo:nope")}, passed("anonymous", "authorization", "Basic "+b64("foo:nope"))},
		{"anonymous, valid still wins", `{"anonymous_consumer":"anonymous"}`, all, []string{"Authorization", good},
			passed("foo", "authorization", good)},
		{"anonymous hidden", `{"anonymous_consumer":"anonymous","hide_credentials":true}`, all,
			[]string{"Authorization", "Basic " + b64("foo:nope")}, passed("anonymous")},
		{"anonymous not found", `{"anonymous_consumer":"not-found-anonymous"}`, all, nil, refused(noUser)},

		// attach_consumer: what the client claims is replaced or dropped.
		{"consumer headers not spoofed", `{}`, all,
			[]string{"Authorization", good, "X-Consumer-Username", "admin", "X-Credential-Identifier", "c", "X-Consumer-Custom-ID", "x"},
			passed("foo", "authorization", good)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, tc.cons)
			c := ctx(tc.hdrs...)
			plugintest.Run(&p, c)
			if diff := cmp.Diff(tc.want, observe(c)); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestSchema: APISIX's schemas and messages (t/plugin/basic-auth.t TESTs
// 1, 2, 12, 13), and the encrypted password.
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		consumer bool
		conf     string
		want     string
	}{
		{true, `{"username":"foo","password":"bar"}`, ""},
		{true, `{"username":123,"password":"bar"}`, `property "username" validation failed: wrong type: expected string, got number`},
		{true, `{"username":"foo"}`, `property "password" is required`},
		{true, `{}`, `property "username" is required`},
		{false, `{}`, ""},
		{false, `{"hide_credentials":true,"realm":"r","anonymous_consumer":"a"}`, ""},
		{false, `{"hide_credentials":"yes"}`, `property "hide_credentials" validation failed: wrong type: expected boolean, got string`},
		{false, `{"realm":"a\"b"}`, `property "realm" validation failed: failed to match pattern`},
		{false, `{"anonymous_consumer":""}`, `property "anonymous_consumer" validation failed: string too short, expected at least 1, got 0`},
	} {
		check := plugins.Check
		if tc.consumer {
			check = plugins.CheckConsumer
		}
		got := ""
		if err := check(Name, json.RawMessage(tc.conf)); err != nil {
			got = err.Error()
		}
		if tc.want == "" && got != "" || !strings.Contains(got, tc.want) {
			t.Errorf("consumer %v %s: %q, want %q", tc.consumer, tc.conf, got, tc.want)
		}
	}
	if got := plugins.Default.EncryptFields(Name, true); len(got) != 1 || got[0] != "password" {
		t.Errorf("consumer encrypt_fields %q", got)
	}
	if got := plugins.Default.EncryptFields(Name, false); got != nil {
		t.Errorf("route encrypt_fields %q", got)
	}
	// Two consumers with one username are refused when indexed.
	_, err := plugins.Default.IndexConsumers([]*plugins.Consumer{
		{Username: "a", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"u","password":"1"}`)}},
		{Username: "b", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"u","password":"2"}`)}},
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "found with consumer: a") {
		t.Errorf("duplicate username: %v", err)
	}
}

// TestAttachConsumer: as APISIX's attach_consumer, the upstream learns the
// consumer's name, the credential object that matched and the consumer's
// labels.custom_id; an anonymous consumer goes without its custom_id.
func TestAttachConsumer(t *testing.T) {
	const custom = `{"username":"custom","labels":{"custom_id":"c-42"},"plugins":{"basic-auth":{"username":"cu","password":"pw"}}}`
	x := index(t, []plugins.Credential{{Username: "custom", ID: "cred-7",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"username":"cu2","password":"pw2"}`)}}}, custom)
	for _, tc := range []struct {
		name, conf, auth string
		want             map[string]string
	}{
		{"consumer", `{"hide_credentials":true}`, b64("cu:pw"),
			map[string]string{"x-consumer-username": "custom", "x-consumer-custom-id": "c-42"}},
		{"credential object", `{"hide_credentials":true}`, b64("cu2:pw2"),
			map[string]string{"x-consumer-username": "custom", "x-credential-identifier": "cred-7", "x-consumer-custom-id": "c-42"}},
		{"anonymous", `{"hide_credentials":true,"anonymous_consumer":"custom"}`, b64("cu:nope"),
			map[string]string{"x-consumer-username": "custom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, x)
			c := ctx("Authorization", "Basic "+tc.auth, "X-Credential-Identifier", "spoofed", "X-Consumer-Custom-ID", "spoofed")
			plugintest.Run(&p, c)
			if diff := cmp.Diff(tc.want, observe(c).Headers); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}
