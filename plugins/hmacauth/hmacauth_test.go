package hmacauth

import (
	"crypto/hmac"
	"crypto/sha1"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/json"
	"hash"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// index indexes consumers and credential objects (plugintest.IndexConsumers).
func index(t testing.TB, creds []plugins.Credential, objs ...string) *plugins.ConsumerIndex {
	return plugintest.IndexConsumers(t, creds, objs...)
}

func build(t testing.TB, conf string, cons plugins.Consumers) plugins.Phases {
	t.Helper()
	if err := plugins.Check(Name, json.RawMessage(conf)); err != nil {
		t.Fatal(err)
	}
	env := plugins.NewLocalEnv()
	env.Consumers = cons
	p, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, env)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

const (
	jack      = `{"username":"jack","plugins":{"hmac-auth":{"key_id":"my-access-key","secret_key":"my-secret-key"}}}`
	long      = `{"username":"long","plugins":{"hmac-auth":{"key_id":"long-key","secret_key":"` + longSecret + `"}}}`
	anonymous = `{"username":"anonymous","plugins":{"limit-count":{"count":1,"time_window":60}}}`
	owner     = `{"username":"owner"}`
	// longSecret is longer than every algorithm's block: HMAC hashes it.
	longSecret = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef!"
)

// now is the requests' clock, Unix seconds.
var now = time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)

// signed is a request signed as a client of APISIX's hmac-auth signs it
// (docs/en/latest/plugins/hmac-auth.md), with crypto/hmac: the signing
// string is keyId, then "name: value" of each of headers (the
// "@request-target" pseudo-header "METHOD uri"), each line ended by "\n".
type signed struct {
	method, target string
	keyID, secret  string
	algorithm      string
	headers        []string // the headers="…" list
	extra          []string // more request headers, name and value
	date           string   // "" for now's, "-" for none
	signature      string   // "" to sign
}

func (s signed) ctx() *plugintest.Ctx {
	method, target := s.method, s.target
	if method == "" {
		method = "GET"
	}
	if target == "" {
		target = "/hello"
	}
	c := plugintest.NewCtx(method, target)
	c.Clock = now.UnixNano()
	date := s.date
	if date == "" {
		date = now.Format(http.TimeFormat)
	}
	hdrs := map[string]string{}
	if date != "-" {
		c.WithHeader("Date", date)
		hdrs["date"] = date
	}
	for i := 0; i+1 < len(s.extra); i += 2 {
		c.WithHeader(s.extra[i], s.extra[i+1])
		hdrs[strings.ToLower(s.extra[i])] = s.extra[i+1]
	}
	alg := s.algorithm
	if alg == "" {
		alg = "hmac-sha256"
	}
	sig := s.signature
	if sig == "" {
		str := s.keyID + "\n"
		for _, h := range s.headers {
			if h == "@request-target" {
				str += method + " " + target + "\n"
			} else if v, ok := hdrs[strings.ToLower(h)]; ok {
				str += h + ": " + v + "\n"
			} else if v, ok := hdrs[strings.ReplaceAll(strings.ToLower(h), "_", "-")]; ok {
				str += h + ": " + v + "\n"
			}
		}
		newHash := map[string]func() hash.Hash{"hmac-sha1": sha1.New, "hmac-sha256": sha256.New, "hmac-sha512": sha512.New}[alg]
		if newHash == nil {
			newHash = sha256.New
		}
		m := hmac.New(newHash, []byte(s.secret))
		m.Write([]byte(str))
		sig = base64.StdEncoding.EncodeToString(m.Sum(nil))
	}
	c.WithHeader("Authorization", `Signature keyId="`+s.keyID+`",algorithm="`+alg+`",headers="`+strings.Join(s.headers, " ")+`",signature="`+sig+`"`)
	return c
}

// good is jack's request signed over @request-target and date.
func good() signed {
	return signed{keyID: "my-access-key", secret: "my-secret-key", headers: []string{"@request-target", "date"}}
}

func with(s signed, f func(*signed)) signed { f(&s); return s }

// outcome is what a test looks at after one request.
type outcome = plugintest.Outcome

func observe(c *plugintest.Ctx) outcome { return plugintest.Observe(c) }

const (
	missing   = `{"message":"client request can't be validated: missing Authorization header"}` + "\n"
	notSig    = `{"message":"client request can't be validated: Authorization header does not start with 'Signature'"}` + "\n"
	notValid  = `{"message":"client request can't be validated"}` + "\n"
	noUser    = `{"message":"Invalid user authorization"}` + "\n"
	hmacRealm = `hmac realm="hmac"`
)

func refusedWith(body string) outcome { return outcome{Status: 401, Body: body, Challenge: hmacRealm} }

func passedAs(consumer string) outcome { return outcome{Status: 200, Consumer: consumer} }

// rawAuth is a request with that Authorization header.
func rawAuth(v string) *plugintest.Ctx {
	c := plugintest.NewCtx("GET", "/hello")
	c.Clock = now.UnixNano()
	return c.WithHeader("Authorization", v)
}

// TestRewrite follows t/plugin/hmac-auth.t, hmac-auth2.t, hmac-auth3.t,
// hmac-auth-realm.t and hmac-auth-anonymous-consumer.t.
func TestRewrite(t *testing.T) {
	all := index(t, []plugins.Credential{{Username: "owner", ID: "cred-1",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key_id":"cred-key","secret_key":"cred-secret"}`)}}},
		jack, long, anonymous, owner)
	for _, tc := range []struct {
		name string
		conf string
		req  *plugintest.Ctx
		want outcome
	}{
		{"missing", `{}`, plugintest.NewCtx("GET", "/hello"), refusedWith(missing)},
		{"not Signature", `{}`, rawAuth(`Basic abc`), refusedWith(notSig)},
		{"scheme's case", `{}`, rawAuth(`signature keyId="my-access-key"`), refusedWith(notSig)},
		{"missing algorithm", `{}`, rawAuth(`Signature keyId="my-access-key",headers="@request-target date" ,signature="asdf"`), refusedWith(notValid)},
		{"missing keyId", `{}`, rawAuth(`Signature algorithm="hmac-sha256",signature="asdf"`), refusedWith(notValid)},
		{"missing signature", `{}`, rawAuth(`Signature keyId="my-access-key",algorithm="hmac-sha256"`), refusedWith(notValid)},
		{"invalid key_id", `{}`, with(good(), func(s *signed) { s.keyID = "sdf" }).ctx(), refusedWith(notValid)},
		{"invalid algorithm", `{}`, with(good(), func(s *signed) { s.algorithm = "ljlj" }).ctx(), refusedWith(notValid)},
		{"algorithm not allowed", `{"allowed_algorithms":["hmac-sha1"]}`, good().ctx(), refusedWith(notValid)},
		{"clock skew exceeded", `{}`, with(good(), func(s *signed) { s.date = "Thu, 24 Sep 2020 06:39:52 GMT" }).ctx(), refusedWith(notValid)},
		{"missing date", `{}`, with(good(), func(s *signed) { s.date = "-" }).ctx(), refusedWith(notValid)},
		{"invalid date", `{}`, with(good(), func(s *signed) { s.date = "adfsdf" }).ctx(), refusedWith(notValid)},
		{"date not signed", `{}`, with(good(), func(s *signed) { s.headers = []string{"@request-target"} }).ctx(), refusedWith(notValid)},
		{"signed_headers missing", `{"signed_headers":["date","x-custom-header-a"]}`, good().ctx(), refusedWith(notValid)},
		{"wrong secret", `{}`, with(good(), func(s *signed) { s.secret = "other" }).ctx(), refusedWith(notValid)},
		{"bad base64", `{}`, with(good(), func(s *signed) { s.signature = "!!!" }).ctx(), refusedWith(notValid)},
		{"no consumers", `{}`, good().ctx(), refusedWith(notValid)},
		{"realm", `{"realm":"my-realm"}`, plugintest.NewCtx("GET", "/hello"),
			outcome{Status: 401, Body: missing, Challenge: `hmac realm="my-realm"`}},

		{"valid", `{}`, good().ctx(), passedAs("jack")},
		{"hmac-sha1", `{}`, with(good(), func(s *signed) { s.algorithm = "hmac-sha1" }).ctx(), passedAs("jack")},
		{"hmac-sha512", `{}`, with(good(), func(s *signed) { s.algorithm = "hmac-sha512" }).ctx(), passedAs("jack")},
		{"long secret", `{}`, with(good(), func(s *signed) { s.keyID, s.secret = "long-key", longSecret }).ctx(), passedAs("long")},
		{"long secret, sha512", `{}`, with(good(), func(s *signed) { s.keyID, s.secret, s.algorithm = "long-key", longSecret, "hmac-sha512" }).ctx(), passedAs("long")},
		{"credential object", `{}`, with(good(), func(s *signed) { s.keyID, s.secret = "cred-key", "cred-secret" }).ctx(), passedAs("owner")},
		{"query in the target", `{}`, with(good(), func(s *signed) { s.target = "/hello?a=1&b=2" }).ctx(), passedAs("jack")},
		{"other method", `{}`, with(good(), func(s *signed) { s.method = "POST" }).ctx(), passedAs("jack")},
		{"custom headers", `{"signed_headers":["date","x-custom-header-a"]}`, with(good(), func(s *signed) {
			s.headers = []string{"@request-target", "date", "x-custom-header-a", "x-custom-header-b"}
			s.extra = []string{"X-Custom-Header-A", "asld$%dfasf", "x-custom-header-b", "23879fmsldfk"}
		}).ctx(), passedAs("jack")},
		// As ngx.req.get_headers() finds it: "x_custom_a" is the header
		// X-Custom-A, signed under the name the client listed.
		{"underscores for dashes", `{}`, with(good(), func(s *signed) {
			s.headers = []string{"date", "x_custom_a"}
			s.extra = []string{"X-Custom-A", "1"}
		}).ctx(), passedAs("jack")},
		{"absent header skipped", `{}`, with(good(), func(s *signed) { s.headers = []string{"date", "x-absent"} }).ctx(), passedAs("jack")},
		{"no signed_headers", `{"signed_headers":[]}`, with(good(), func(s *signed) { s.headers = []string{"@request-target"} }).ctx(), passedAs("jack")},
		{"within the skew", `{"clock_skew":3600}`, with(good(), func(s *signed) { s.date = now.Add(-59 * time.Minute).Format(http.TimeFormat) }).ctx(), passedAs("jack")},
		{"past the skew", `{"clock_skew":60}`, with(good(), func(s *signed) { s.date = now.Add(61 * time.Second).Format(http.TimeFormat) }).ctx(), refusedWith(notValid)},
		{"RFC 850 date", `{}`, with(good(), func(s *signed) { s.date = now.Format(time.RFC850) }).ctx(), passedAs("jack")},
		{"asctime date", `{}`, with(good(), func(s *signed) { s.date = now.Format(time.ANSIC) }).ctx(), passedAs("jack")},

		// anonymous_consumer.
		{"anonymous without header", `{"anonymous_consumer":"anonymous"}`, plugintest.NewCtx("GET", "/hello"), passedAs("anonymous")},
		{"anonymous, wrong secret", `{"anonymous_consumer":"anonymous"}`, with(good(), func(s *signed) { s.secret = "x" }).ctx(), passedAs("anonymous")},
		{"anonymous, valid still wins", `{"anonymous_consumer":"anonymous"}`, good().ctx(), passedAs("jack")},
		{"anonymous not found", `{"anonymous_consumer":"not-found-anonymous"}`, plugintest.NewCtx("GET", "/hello"), refusedWith(noUser)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cons := plugins.Consumers(all)
			if tc.name == "no consumers" {
				cons = nil
			}
			p := build(t, tc.conf, cons)
			plugintest.Run(&p, tc.req)
			got := observe(tc.req)
			if got.Status == 200 {
				if got.Headers["x-consumer-username"] != tc.want.Consumer {
					t.Errorf("X-Consumer-Username %q", got.Headers["x-consumer-username"])
				}
				if got.Headers["authorization"] != string(tc.req.Header("Authorization")) {
					t.Errorf("Authorization not sent upstream")
				}
				got.Headers = nil
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestHideCredentials: with hide_credentials the Authorization header does
// not go upstream, the others do; a client's own consumer headers are
// replaced or dropped.
func TestHideCredentials(t *testing.T) {
	all := index(t, nil, jack)
	for _, hide := range []bool{false, true} {
		conf := `{}`
		if hide {
			conf = `{"hide_credentials":true}`
		}
		p := build(t, conf, all)
		c := with(good(), func(s *signed) {
			s.extra = []string{"X-Consumer-Username", "admin", "X-Credential-Identifier", "c", "X-Consumer-Custom-ID", "x"}
		}).ctx()
		plugintest.Run(&p, c)
		o := observe(c)
		if o.Status != 200 || o.Headers["date"] == "" || o.Headers["x-consumer-username"] != "jack" ||
			o.Headers["x-credential-identifier"] != "" || o.Headers["x-consumer-custom-id"] != "" {
			t.Fatalf("hide %v: %+v", hide, o)
		}
		if _, sent := o.Headers["authorization"]; sent == hide {
			t.Fatalf("hide %v: Authorization sent %v", hide, sent)
		}
	}
}

// TestMatchField: the Authorization header's fields read as Lua's
// unanchored pattern reads them.
func TestMatchField(t *testing.T) {
	for _, tc := range []struct{ in, key, value string }{
		{`keyId="a"`, "keyId", "a"},
		{`  keyId="a b"`, "keyId", "a b"},
		{` x-keyId="a"`, "keyId", "a"},
		{`keyId=""`, "keyId", ""},
		{`keyId="a`, "", ""},
		{`keyId = "a"`, "", ""},
		{`"keyId="a"`, "keyId", "a"},
		{`k1="a"x="b"`, "k1", "a"},
	} {
		key, value, ok := matchField([]byte(tc.in))
		if string(key) != tc.key || string(value) != tc.value || ok != (tc.key != "") {
			t.Errorf("%s: %q %q %v", tc.in, key, value, ok)
		}
	}
}

// TestParseHTTPTime: nginx's three forms, and what it refuses.
func TestParseHTTPTime(t *testing.T) {
	want := time.Date(1994, 11, 6, 8, 49, 37, 0, time.UTC).Unix()
	for _, s := range []string{
		"Sun, 06 Nov 1994 08:49:37 GMT",
		"Sunday, 06-Nov-94 08:49:37 GMT",
		"Sun Nov  6 08:49:37 1994",
		"Sun Nov 06 08:49:37 1994",
		"Xyz, 06 Nov 1994 08:49:37 PST", // week day and zone unread
		"Sun,   06 Nov 1994 08:49:37",
	} {
		if got, ok := parseHTTPTime([]byte(s)); !ok || got != want {
			t.Errorf("%q: %d %v, want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "adfsdf", "Sun, 06 Nov 1994 08:49", "Sun, 06 Nov 1994 24:49:37 GMT",
		"Sun, 32 Nov 1994 08:49:37 GMT", "Sun, 31 Nov 1994 08:49:37 GMT", "Sun, 29 Feb 2025 08:49:37 GMT",
		"Sun, 06 Xov 1994 08:49:37 GMT", "Sun, 06 Nov 94 08:49:37 GMT", "Sun Nov  6 08:49:37", "Sun, 06/Nov/1994 08:49:37 GMT"} {
		if got, ok := parseHTTPTime([]byte(s)); ok {
			t.Errorf("%q: %d, want a refusal", s, got)
		}
	}
	if got, ok := parseHTTPTime([]byte("Thu, 29 Feb 2024 00:00:00 GMT")); !ok || got != time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC).Unix() {
		t.Errorf("leap day: %d %v", got, ok)
	}
	if got, ok := parseHTTPTime([]byte("Monday, 01-Jan-01 00:00:00 GMT")); !ok || got != time.Date(2001, 1, 1, 0, 0, 0, 0, time.UTC).Unix() {
		t.Errorf("two-digit year: %d %v", got, ok)
	}
}

// TestSchema: APISIX's schemas and messages (t/plugin/hmac-auth.t TESTs
// 2 to 5), and the encrypted secret_key.
func TestSchema(t *testing.T) {
	for _, tc := range []struct {
		consumer bool
		conf     string
		want     string
	}{
		{true, `{"key_id":"user-key","secret_key":"skey"}`, ""},
		{true, `{"key_id":"user-key"}`, `failed to check the configuration of plugin hmac-auth err: property "secret_key" is required`},
		{true, `{"secret_key":"skey"}`, `property "key_id" is required`},
		{true, `{"key_id":"` + strings.Repeat("akey", 80) + `","secret_key":"skey"}`, `property "key_id" validation failed: string too long, expected at most 256, got 320`},
		{true, `{"key_id":"akey","secret_key":"` + strings.Repeat("skey", 96) + `"}`, `property "secret_key" validation failed: string too long, expected at most 256, got 384`},
		{false, `{}`, ""},
		{false, `{"allowed_algorithms":["hmac-sha256"],"clock_skew":10,"signed_headers":["date","x-a"],"hide_credentials":true,"realm":"r","anonymous_consumer":"a","max_req_body_size":10,"validate_request_body":false}`, ""},
		{false, `{"allowed_algorithms":["hmac-md5"]}`, `property "allowed_algorithms" validation failed: failed to validate item 1: matches none of the enum values`},
		{false, `{"allowed_algorithms":[]}`, `property "allowed_algorithms" validation failed: expect array to have at least 1 items`},
		{false, `{"clock_skew":0}`, `property "clock_skew" validation failed: expected 0 to be at least 1`},
		{false, `{"signed_headers":[""]}`, `property "signed_headers" validation failed: failed to validate item 1: string too short, expected at least 1, got 0`},
		{false, `{"validate_request_body":true}`, ""},
		{false, `{"validate_request_body":true,"max_req_body_size":0}`, `property "max_req_body_size" validation failed: expected 0 to be at least 1`},
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
	if got := plugins.Default.EncryptFields(Name, true); len(got) != 1 || got[0] != "secret_key" {
		t.Errorf("consumer encrypt_fields %q", got)
	}
	// Two consumers with one key_id are refused when indexed.
	_, err := plugins.Default.IndexConsumers([]*plugins.Consumer{
		{Username: "a", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key_id":"k","secret_key":"1"}`)}},
		{Username: "b", Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key_id":"k","secret_key":"2"}`)}},
	}, nil)
	if err == nil || !strings.Contains(err.Error(), "found with consumer: a") {
		t.Errorf("duplicate key_id: %v", err)
	}
}

// TestAttachConsumer: as APISIX's attach_consumer, the upstream learns the
// consumer's name, the credential object that matched and the consumer's
// labels.custom_id; an anonymous consumer goes without its custom_id.
func TestAttachConsumer(t *testing.T) {
	const custom = `{"username":"custom","labels":{"custom_id":"c-42"},"plugins":{"hmac-auth":{"key_id":"k-own","secret_key":"s-own"}}}`
	x := index(t, []plugins.Credential{{Username: "custom", ID: "cred-7",
		Plugins: map[string]json.RawMessage{Name: json.RawMessage(`{"key_id":"k-cred","secret_key":"s-cred"}`)}}}, custom)
	req := func(keyID, secret string) *plugintest.Ctx {
		return signed{keyID: keyID, secret: secret, headers: []string{"@request-target", "date"},
			extra: []string{"X-Credential-Identifier", "spoofed", "X-Consumer-Custom-ID", "spoofed"}}.ctx()
	}
	for _, tc := range []struct {
		name, conf string
		req        *plugintest.Ctx
		want       map[string]string
	}{
		{"consumer", `{"hide_credentials":true}`, req("k-own", "s-own"),
			map[string]string{"x-consumer-username": "custom", "x-consumer-custom-id": "c-42"}},
		{"credential object", `{"hide_credentials":true}`, req("k-cred", "s-cred"),
			map[string]string{"x-consumer-username": "custom", "x-credential-identifier": "cred-7", "x-consumer-custom-id": "c-42"}},
		{"anonymous", `{"hide_credentials":true,"anonymous_consumer":"custom"}`, req("k-own", "wrong"),
			map[string]string{"x-consumer-username": "custom"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, x)
			plugintest.Run(&p, tc.req)
			got := observe(tc.req).Headers
			delete(got, "date")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got):\n%s", diff)
			}
		})
	}
}

// digestOf is the Digest header of body, as hmac-auth3.t computes it.
func digestOf(body string) string {
	sum := sha256.Sum256([]byte(body))
	return "SHA-256=" + base64.StdEncoding.EncodeToString(sum[:])
}

// TestValidateRequestBody follows t/plugin/hmac-auth3.t: with
// validate_request_body the Digest header must be the SHA-256 of the body
// the worker read, once the signature is good; a body over
// max_req_body_size is 413 with get_body's message.
func TestValidateRequestBody(t *testing.T) {
	all := index(t, nil, jack, anonymous)
	const body = `{"name": "world"}`
	post := func(digest, body string) *plugintest.Ctx {
		s := with(good(), func(s *signed) {
			s.method = "POST"
			if digest != "" {
				s.extra = []string{"Digest", digest}
			}
		})
		return s.ctx().WithBody(body)
	}
	const notValidated = `{"message":"client request can't be validated"}` + "\n"
	for _, tc := range []struct {
		name   string
		conf   string
		req    *plugintest.Ctx
		status int
		body   string
	}{
		{"digest missing", `{"validate_request_body":true}`, post("", body), 401, notValidated},
		{"digest wrong", `{"validate_request_body":true}`, post("hello", body), 401, notValidated},
		{"digest of another body", `{"validate_request_body":true}`, post(digestOf(body+" "), body), 401, notValidated},
		{"digest ok", `{"validate_request_body":true}`, post(digestOf(body), body), 200, ""},
		{"empty body", `{"validate_request_body":true}`, post(digestOf(""), ""), 200, ""},
		{"bad signature first", `{"validate_request_body":true}`, with(good(), func(s *signed) {
			s.method, s.secret, s.extra = "POST", "x", []string{"Digest", digestOf(body)}
		}).ctx().WithBody(body), 401, notValidated},
		{"not validated", `{}`, post("hello", body), 200, ""},
		{"over max_req_body_size", `{"validate_request_body":true,"max_req_body_size":10}`, post(digestOf(body), body), 413,
			`{"message":"request size 17 is greater than the maximum size 10 allowed"}` + "\n"},
		{"within max_req_body_size", `{"validate_request_body":true,"max_req_body_size":1024}`, post(digestOf(body), body), 200, ""},
		{"413 before anonymous", `{"validate_request_body":true,"max_req_body_size":10,"anonymous_consumer":"anonymous"}`, post(digestOf(body), body), 413, ""},
		{"anonymous on a wrong digest", `{"validate_request_body":true,"anonymous_consumer":"anonymous"}`, post("hello", body), 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf, all)
			plugintest.Run(&p, tc.req)
			if tc.req.Status() != tc.status || tc.body != "" && string(tc.req.Body) != tc.body {
				t.Fatalf("%d %q, want %d %q", tc.req.Status(), tc.req.Body, tc.status, tc.body)
			}
		})
	}
	if p := build(t, `{"validate_request_body":true}`, all); p.BodyLimit() != 64<<20 {
		t.Fatalf("BodyLimit %d, want max_req_body_size's default", p.BodyLimit())
	}
	if p := build(t, `{"max_req_body_size":10}`, all); p.BodyLimit() != 0 {
		t.Fatalf("the body is read without validate_request_body: %d", p.BodyLimit())
	}
}
