package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// key-auth and proxy-rewrite through the binary: the answers a client
// gets, and the request the upstream gets, which echoes it back.

// echoed is the request an echo upstream got.
type echoed struct {
	Method string              `json:"method"`
	URI    string              `json:"uri"`
	Host   string              `json:"host"`
	Header map[string][]string `json:"header"`
}

// headEchoUpstream answers every request with the request it got, as JSON.
func headEchoUpstream(t testing.TB) *httpUpstream {
	return newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(echoed{Method: r.Method, URI: r.RequestURI, Host: r.Host, Header: r.Header})
	})
}

// upstreamSaw decodes what the echo upstream got; it fails t unless the
// answer is a 200.
func upstreamSaw(t testing.TB, r result) echoed {
	t.Helper()
	var e echoed
	if r.status != 200 {
		t.Fatalf("status %d, body %q", r.status, r.body)
	}
	if err := json.Unmarshal([]byte(r.body), &e); err != nil {
		t.Fatalf("echo %q: %v", r.body, err)
	}
	return e
}

func (e echoed) get(name string) string { return http.Header(e.Header).Get(name) }

func (e echoed) has(name string) bool { return len(http.Header(e.Header).Values(name)) > 0 }

const (
	missingKeyBody  = `{"message":"Missing API key in request"}` + "\n"
	invalidKeyBody  = `{"message":"Invalid API key in request"}` + "\n"
	keyAuthChallege = `apikey realm="key"`
)

// TestKeyAuth: key-auth from apisix.yaml, with consumers and a credential.
func TestKeyAuth(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	route := func(id, uri string, plugins obj) obj {
		return obj{"id": id, "uri": uri, "upstream": upstreamOf(nodes(up.Addr()), nil), "plugins": plugins}
	}
	consumers := []obj{
		{"username": "jack", "plugins": obj{"key-auth": obj{"key": "jack-key"}}},
		{"username": "anon"},
		{"username": "lim", "plugins": obj{"key-auth": obj{"key": "lim-key"},
			"limit-count": obj{"count": 2, "time_window": 300, "rejected_code": 429}}},
		// As in APISIX, a limit-count counter is the route's and its
		// configuration's: two consumers with the same configuration,
		// counting by client address, would share one. rose counts by
		// consumer_name.
		{"username": "rose", "plugins": obj{"key-auth": obj{"key": "rose-key"},
			"limit-count": obj{"count": 2, "time_window": 300, "rejected_code": 429, "key": "consumer_name"}}},
		{"id": "jack/credentials/c1", "plugins": obj{"key-auth": obj{"key": "jack-cred"}}},
	}
	for i := range 100 {
		consumers = append(consumers, obj{"username": fmt.Sprintf("user%d", i),
			"plugins": obj{"key-auth": obj{"key": fmt.Sprintf("key-%d", i)}}})
	}
	g := startGateway(t, standaloneYAML(map[string][]obj{
		"routes": {
			route("plain", "/ka", obj{"key-auth": obj{}}),
			route("hide", "/hide", obj{"key-auth": obj{"hide_credentials": true}}),
			route("custom", "/custom", obj{"key-auth": obj{"header": "X-Token", "query": "token", "hide_credentials": true}}),
			route("anon", "/anon", obj{"key-auth": obj{"anonymous_consumer": "anon"}}),
			route("anon-missing", "/anon-missing", obj{"key-auth": obj{"anonymous_consumer": "nobody"}}),
		},
		"consumers": consumers,
	}), "")
	c := newClient(t)
	key := func(k string) map[string]string { return map[string]string{"apikey": k} }

	// No key, a wrong key: 401 with APISIX's bodies and challenge.
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
		body       string
	}{
		{"missing", "/ka", nil, missingKeyBody},
		{"invalid header", "/ka", key("nope"), invalidKeyBody},
		{"invalid query", "/ka?apikey=nope", nil, invalidKeyBody},
		{"repeated query", "/ka?apikey=jack-key&apikey=jack-key", nil, invalidKeyBody},
		{"another route's header", "/custom", key("jack-key"), missingKeyBody},
	} {
		r := do(t, c, "GET", g.url(tc.path), "", tc.hdr, nil)
		if r.status != 401 || r.body != tc.body || r.header.Get("WWW-Authenticate") != keyAuthChallege {
			t.Fatalf("%s: %d %q WWW-Authenticate %q", tc.name, r.status, r.body, r.header.Get("WWW-Authenticate"))
		}
	}

	// A valid key, in the header or the query: the upstream learns the
	// consumer and, without hide_credentials, gets the key too. A
	// client's own X-Consumer-Username does not pass.
	e := upstreamSaw(t, do(t, c, "GET", g.url("/ka?a=1"), "", map[string]string{"apikey": "jack-key", "X-Consumer-Username": "root"}, nil))
	if e.get("X-Consumer-Username") != "jack" || len(e.Header["X-Consumer-Username"]) != 1 || e.get("apikey") != "jack-key" || e.URI != "/ka?a=1" {
		t.Fatalf("key in the header: upstream saw %+v", e)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/ka?a=1&apikey=jack-key"), "", nil, nil))
	if e.get("X-Consumer-Username") != "jack" || e.URI != "/ka?a=1&apikey=jack-key" {
		t.Fatalf("key in the query: upstream saw %+v", e)
	}
	// The credential object's key finds its consumer.
	if e = upstreamSaw(t, do(t, c, "GET", g.url("/ka"), "", key("jack-cred"), nil)); e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("credential c1: upstream saw %+v", e)
	}

	// hide_credentials: the key does not go upstream, the rest does.
	e = upstreamSaw(t, do(t, c, "GET", g.url("/hide?a=1"), "", map[string]string{"apikey": "jack-key", "X-Other": "o"}, nil))
	if e.has("apikey") || e.get("X-Other") != "o" || e.URI != "/hide?a=1" || e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("hidden header: upstream saw %+v", e)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/hide?a=1&apikey=jack-key&b=2"), "", nil, nil))
	if e.URI != "/hide?a=1&b=2" || e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("hidden query: upstream saw %+v", e)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/custom?token=jack-key&z=9"), "", nil, nil))
	if e.URI != "/custom?z=9" || e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("custom query: upstream saw %+v", e)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/custom"), "", map[string]string{"X-Token": "jack-key"}, nil))
	if e.has("X-Token") || e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("custom header: upstream saw %+v", e)
	}

	// anonymous_consumer: no key, or a wrong one, is the anonymous
	// consumer's request; a right key is its consumer's.
	for _, hdr := range []map[string]string{nil, key("nope")} {
		if e = upstreamSaw(t, do(t, c, "GET", g.url("/anon"), "", hdr, nil)); e.get("X-Consumer-Username") != "anon" {
			t.Fatalf("anonymous (%v): upstream saw %+v", hdr, e)
		}
	}
	if e = upstreamSaw(t, do(t, c, "GET", g.url("/anon"), "", key("jack-key"), nil)); e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("anonymous route, jack's key: upstream saw %+v", e)
	}
	r := do(t, c, "GET", g.url("/anon-missing"), "", nil, nil)
	if r.status != 401 || r.body != `{"message":"Invalid user authorization"}`+"\n" {
		t.Fatalf("an anonymous consumer that does not exist: %d %q", r.status, r.body)
	}

	// 100 consumers: each key finds its own.
	for i := range 100 {
		e = upstreamSaw(t, do(t, c, "GET", g.url("/ka"), "", key(fmt.Sprintf("key-%d", i)), nil))
		if want := fmt.Sprintf("user%d", i); e.get("X-Consumer-Username") != want {
			t.Fatalf("key-%d: upstream saw consumer %q, want %q", i, e.get("X-Consumer-Username"), want)
		}
	}

	// A consumer's own plugins: lim and rose have a limit of 2 each,
	// counted apart; jack, on the same route, has none.
	for _, who := range []string{"lim", "rose"} {
		for i := range 4 {
			r := do(t, c, "GET", g.url("/ka"), "", key(who+"-key"), nil)
			want := 200
			if i >= 2 {
				want = 429
			}
			if r.status != want {
				t.Fatalf("%s, request %d: %d %q, want %d", who, i+1, r.status, r.body, want)
			}
			if r.status == 200 && r.header.Get("X-RateLimit-Limit") != "2" {
				t.Fatalf("%s: X-RateLimit-Limit %q", who, r.header.Get("X-RateLimit-Limit"))
			}
		}
	}
	for range 5 {
		r := do(t, c, "GET", g.url("/ka"), "", key("jack-key"), nil)
		if r.status != 200 || r.header.Get("X-RateLimit-Limit") != "" {
			t.Fatalf("jack after lim's limit: %d %v", r.status, r.header)
		}
	}
}

// TestProxyRewrite: what the upstream gets of proxy-rewrite's edits, and
// of proxy-rewrite after key-auth's hide_credentials.
func TestProxyRewrite(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	route := func(id, uri string, plugins obj) obj {
		return obj{"id": id, "uri": uri, "upstream": upstreamOf(nodes(up.Addr()), nil), "plugins": plugins}
	}
	g := startGateway(t, standaloneYAML(map[string][]obj{
		"routes": {
			route("uri", "/pr/uri", obj{"proxy-rewrite": obj{"uri": "/rewritten/$arg_name"}}),
			route("regex", "/pr/re/*", obj{"proxy-rewrite": obj{"regex_uri": []string{"^/pr/re/(\\w+)/(.*)", "/re/$2/$1"}}}),
			route("host-method", "/pr/hm", obj{"proxy-rewrite": obj{"host": "up.example", "method": "POST"}}),
			route("headers", "/pr/h", obj{"proxy-rewrite": obj{"headers": obj{
				"add":    obj{"X-Add": "added", "X-Multi": "second"},
				"set":    obj{"X-Set": "set-$arg_v", "X-Replace": "new"},
				"remove": []string{"X-Remove", "User-Agent"},
			}}}),
			route("combo", "/combo", obj{
				"key-auth":      obj{"hide_credentials": true},
				"proxy-rewrite": obj{"uri": "/combo-up", "headers": obj{"set": obj{"X-Args": "[$args]", "X-Key": "[$arg_apikey]"}}},
			}),
		},
		"consumers": {{"username": "jack", "plugins": obj{"key-auth": obj{"key": "jack-key"}}}},
	}), "")
	c := newClient(t)

	e := upstreamSaw(t, do(t, c, "GET", g.url("/pr/uri?name=xy&k=1"), "", nil, nil))
	if e.URI != "/rewritten/xy?name=xy&k=1" || e.Method != "GET" {
		t.Fatalf("uri: upstream saw %s %s", e.Method, e.URI)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/pr/re/abc/d/e?q=1"), "", nil, nil))
	if e.URI != "/re/d/e/abc?q=1" {
		t.Fatalf("regex_uri: upstream saw %s", e.URI)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/pr/re/-/no"), "", nil, nil))
	if e.URI != "/pr/re/-/no" {
		t.Fatalf("regex_uri that does not match: upstream saw %s", e.URI)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/pr/hm?a=1"), "client.example", nil, nil))
	if e.Method != "POST" || e.Host != "up.example" || e.URI != "/pr/hm?a=1" {
		t.Fatalf("host and method: upstream saw %s %s Host %s", e.Method, e.URI, e.Host)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/pr/h?v=7"), "", map[string]string{
		"X-Multi": "first", "X-Replace": "old", "X-Remove": "gone", "User-Agent": "agent", "X-Keep": "kept"}, nil))
	want := map[string][]string{"X-Add": {"added"}, "X-Multi": {"first", "second"}, "X-Set": {"set-7"},
		"X-Replace": {"new"}, "X-Keep": {"kept"}}
	for name, vals := range want {
		if got := http.Header(e.Header).Values(name); strings.Join(got, "|") != strings.Join(vals, "|") {
			t.Fatalf("headers: upstream saw %s: %q, want %q (all: %v)", name, got, vals, e.Header)
		}
	}
	if e.has("X-Remove") || e.has("User-Agent") {
		t.Fatalf("headers: removed ones reached the upstream: %v", e.Header)
	}

	// key-auth hides the query key; proxy-rewrite, after it, rebuilds
	// the target from the arguments key-auth left.
	e = upstreamSaw(t, do(t, c, "GET", g.url("/combo?a=1&apikey=jack-key&b=2"), "", nil, nil))
	if e.URI != "/combo-up?a=1&b=2" || e.get("X-Args") != "[a=1&b=2]" || e.get("X-Key") != "[]" || e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("key-auth and proxy-rewrite: upstream saw %s %v", e.URI, e.Header)
	}
	e = upstreamSaw(t, do(t, c, "GET", g.url("/combo"), "", map[string]string{"apikey": "jack-key"}, nil))
	if e.URI != "/combo-up" || e.has("apikey") || e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("key-auth (header) and proxy-rewrite: upstream saw %s %v", e.URI, e.Header)
	}
	if r := do(t, c, "GET", g.url("/combo?apikey=nope"), "", nil, nil); r.status != 401 || r.body != invalidKeyBody {
		t.Fatalf("a wrong key before proxy-rewrite: %d %q", r.status, r.body)
	}
}

// TestAdminAPIKeyAuth: consumers and credentials written through the
// Admin API reach the workers; a duplicate key is refused.
func TestAdminAPIKeyAuth(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string, want int) result {
		t.Helper()
		r := admin.do(t, c, "PUT", path, body)
		if r.status != want {
			t.Fatalf("PUT %s: %d %s, want %d", path, r.status, r.body, want)
		}
		return r
	}
	put("routes/1", fmt.Sprintf(`{"uri":"/ka","plugins":{"key-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/ka"), "", nil, nil); r.status != 401 || r.body != missingKeyBody {
			return fmt.Errorf("GET /ka without a key = %d %q", r.status, r.body)
		}
		return nil
	})
	consumerBy := func(k string) error {
		r := do(t, c, "GET", g.url("/ka?apikey="+url.QueryEscape(k)), "", nil, nil)
		if r.status != 200 {
			return fmt.Errorf("key %s: %d %q", k, r.status, r.body)
		}
		return nil
	}
	within := func(what string, f func() error) {
		t.Helper()
		start := time.Now()
		eventually(t, 10*time.Second, f)
		t.Logf("%s: served after %v", what, time.Since(start).Round(time.Millisecond))
	}

	put("consumers", `{"username":"jack","plugins":{"key-auth":{"key":"jack-key"}}}`, 201)
	within("a new consumer", func() error { return consumerBy("jack-key") })
	if e := upstreamSaw(t, do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": "jack-key"}, nil)); e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("jack: upstream saw %+v", e)
	}

	put("consumers/jack/credentials/c1", `{"plugins":{"key-auth":{"key":"cred-key"}}}`, 201)
	within("a new credential", func() error { return consumerBy("cred-key") })
	if e := upstreamSaw(t, do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": "cred-key"}, nil)); e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("credential c1: upstream saw %+v", e)
	}

	r := put("consumers", `{"username":"rose","plugins":{"key-auth":{"key":"jack-key"}}}`, 400)
	if strings.TrimSpace(r.body) != `{"error_msg":"duplicate key of plugin key-auth found with consumer: jack","field":"plugins.key-auth.key"}` {
		t.Fatalf("duplicate key: %s", r.body)
	}
	r = put("consumers", `{"username":"rose","plugins":{"key-auth":{"key":"cred-key"}}}`, 400)
	if !strings.Contains(r.body, "duplicate key of plugin key-auth found with credential: c1 of consumer: jack") {
		t.Fatalf("duplicate of a credential's key: %s", r.body)
	}
	// A credential holds an authentication plugin (key-auth is one, of
	// the gateway's plugins; limit-count and prometheus are not); a
	// consumer in a group that does not exist is refused.
	for _, p := range []string{`"limit-count":{"count":1,"time_window":60}`, `"prometheus":{}`} {
		r = put("consumers/jack/credentials/c2", `{"plugins":{`+p+`}}`, 400)
		if !strings.Contains(r.body, `"error_msg":"only supports auth type plugins in consumer credential"`) {
			t.Fatalf("credential {%s}: %s", p, r.body)
		}
	}
	r = put("consumers", `{"username":"rose","group_id":"g1","plugins":{"key-auth":{"key":"rose-key"}}}`, 400)
	if !strings.Contains(r.body, `"error_msg":"failed to fetch consumer group info by consumer group id [g1], response code: 404"`) {
		t.Fatalf("group_id: %s", r.body)
	}

	// A consumer's key changed: the old one stops working, the new works.
	put("consumers", `{"username":"jack","plugins":{"key-auth":{"key":"jack-key-2"}}}`, 200)
	within("a changed key", func() error {
		if err := consumerBy("jack-key-2"); err != nil {
			return err
		}
		if r := do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": "jack-key"}, nil); r.status != 401 || r.body != invalidKeyBody {
			return fmt.Errorf("the old key: %d %q", r.status, r.body)
		}
		return nil
	})
	// A deleted credential's key stops working.
	if r := admin.do(t, c, "DELETE", "consumers/jack/credentials/c1", ""); r.status != 200 {
		t.Fatalf("DELETE the credential: %d %s", r.status, r.body)
	}
	within("a deleted credential", func() error {
		if r := do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": "cred-key"}, nil); r.status != 401 {
			return fmt.Errorf("the deleted credential's key: %d %q", r.status, r.body)
		}
		return nil
	})
}

// The variables the gateway resolves $env:// references from: the tests
// that use them set them in this process (t.Setenv, so they are not
// parallel), and the gateway, its workers included, inherits them.
const (
	e2eKeyVar   = "COREGATE_E2E_KEY"
	e2eUnsetVar = "COREGATE_E2E_UNSET"
	e2eKey      = "secret-value"
)

func setKeyEnv(t *testing.T) {
	t.Helper()
	t.Setenv(e2eKeyVar, e2eKey)
	t.Setenv(e2eUnsetVar, "")
	if err := os.Unsetenv(e2eUnsetVar); err != nil {
		t.Fatal(err)
	}
}

// TestKeyAuthEnvStandalone: a consumer's key given as $env://NAME in
// apisix.yaml is the value of NAME in the gateway's environment: that
// value authenticates, the reference as written does not, nor does an
// empty key. A consumer whose reference names a variable that is not set
// is left out, naming the object, and the rest served; the value is never
// logged.
func TestKeyAuthEnvStandalone(t *testing.T) {
	setKeyEnv(t)
	up := headEchoUpstream(t)
	file := func(consumers ...obj) string {
		return standaloneYAML(map[string][]obj{
			"routes": {{"id": "ka", "uri": "/ka", "upstream": upstreamOf(nodes(up.Addr()), nil), "plugins": obj{"key-auth": obj{}}}},
			"consumers": append([]obj{
				{"username": "jack", "plugins": obj{"key-auth": obj{"key": "$env://" + e2eKeyVar}}},
				{"username": "ann", "plugins": obj{"key-auth": obj{"key": "ann-key"}}},
			}, consumers...),
		})
	}
	g := startGateway(t, file(), "")
	c := newClient(t)
	if r := do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": e2eKey}, nil); r.status != 200 {
		t.Errorf("the variable's value: %d %q, want 200", r.status, r.body)
	} else if e := upstreamSaw(t, r); e.get("X-Consumer-Username") != "jack" {
		t.Errorf("the variable's value: upstream saw %+v", e)
	}
	for _, tc := range []struct {
		name, path string
		hdr        map[string]string
	}{
		{"the reference as written", "/ka", map[string]string{"apikey": "$env://" + e2eKeyVar}},
		{"the reference in the query", "/ka?apikey=" + url.QueryEscape("$env://"+e2eKeyVar), nil},
		{"an empty header", "/ka", map[string]string{"apikey": ""}},
		{"an empty query argument", "/ka?apikey=", nil},
	} {
		r := do(t, c, "GET", g.url(tc.path), "", tc.hdr, nil)
		if r.status != 401 || r.body != invalidKeyBody {
			t.Errorf("%s: %d %q, want 401 %q", tc.name, r.status, r.body, invalidKeyBody)
		}
	}

	before := len(leftOut(g.out.String()))
	g.rewrite(file(obj{"username": "bob", "plugins": obj{"key-auth": obj{"key": "$env://" + e2eUnsetVar}}}))
	eventually(t, 5*time.Second, func() error {
		if len(leftOut(g.out.String())) == before {
			return fmt.Errorf("nothing left out")
		}
		return nil
	})
	want := `item="apisix.yaml: consumers[2] (username bob)" err="failed to check the configuration of plugin key-auth err: ` +
		`property \"key\" validation failed: cannot resolve $env://` + e2eUnsetVar + `: environment variable ` + e2eUnsetVar + ` is not set`
	if last := leftOut(g.out.String())[before]; !strings.Contains(last, want) {
		t.Errorf("left out %q, want %q", last, want)
	}
	if e := upstreamSaw(t, do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": e2eKey}, nil)); e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("after the refusal: upstream saw %+v", e)
	}
	if strings.Contains(g.out.String(), e2eKey) {
		t.Errorf("the gateway logged the variable's value:\n%s", g.out.String())
	}
}

// TestAdminAPIKeyAuthEnv: a consumer written through the Admin API with
// its key as $env://NAME is stored as written, and the workers match the
// value of NAME; a reference the gateway cannot resolve, a secret
// manager's reference and an empty key are refused with a 400 naming the
// field, and nothing is stored.
func TestAdminAPIKeyAuthEnv(t *testing.T) {
	setKeyEnv(t)
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string) result {
		t.Helper()
		return admin.do(t, c, "PUT", path, body)
	}
	if r := put("routes/1", fmt.Sprintf(`{"uri":"/ka","plugins":{"key-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.Addr())); r.status != 201 {
		t.Fatalf("PUT the route: %d %s", r.status, r.body)
	}

	// Refused: each is a 400 naming the field, and is not stored.
	refused := []struct{ name, body, msg string }{
		{"unset", `{"username":"bob","plugins":{"key-auth":{"key":"$env://` + e2eUnsetVar + `"}}}`,
			`invalid plugins configuration: failed to check the configuration of plugin key-auth err: property \"key\" validation failed: ` +
				`cannot resolve $env://` + e2eUnsetVar + `: environment variable ` + e2eUnsetVar + ` is not set`},
		// A secret object that does not exist (secret_test.go has one that does).
		{"secret", `{"username":"bob","plugins":{"key-auth":{"key":"$secret://vault/1/bob/key"}}}`,
			`invalid plugins configuration: failed to check the configuration of plugin key-auth err: property \"key\" validation failed: ` +
				`cannot resolve $secret://vault/1/bob/key: no secret conf, secret_uri: $secret://vault/1/bob/key`},
		{"empty", `{"username":"bob","plugins":{"key-auth":{"key":""}}}`,
			`invalid plugins configuration: failed to check the configuration of plugin key-auth err: property \"key\" validation failed: ` +
				`string too short, expected at least 1, got 0`},
	}
	var answers []result
	for _, tc := range refused {
		answers = append(answers, put("consumers", tc.body))
	}
	// A consumer written after them is served once they would have been.
	if r := put("consumers", `{"username":"zed","plugins":{"key-auth":{"key":"zed-key"}}}`); r.status != 201 {
		t.Fatalf("PUT zed: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": "zed-key"}, nil); r.status != 200 {
			return fmt.Errorf("zed's key: %d %q", r.status, r.body)
		}
		return nil
	})
	for i, tc := range refused {
		want := `{"error_msg":"` + tc.msg + `","field":"plugins.key-auth.key"}`
		if r := answers[i]; r.status != 400 || strings.TrimSpace(r.body) != want {
			t.Errorf("%s: %d %s, want 400 %s", tc.name, r.status, r.body, want)
		}
	}
	if r := admin.do(t, c, "GET", "consumers/bob", ""); r.status != 404 {
		t.Errorf("GET bob: %d %s, want 404", r.status, r.body)
	}
	noKey := func(name, path string, hdr map[string]string) {
		t.Helper()
		r := do(t, c, "GET", g.url(path), "", hdr, nil)
		if r.status != 401 || r.body != invalidKeyBody || r.header.Get("WWW-Authenticate") != keyAuthChallege {
			t.Errorf("%s: %d %q, want 401 %q", name, r.status, r.body, invalidKeyBody)
		}
	}
	noKey("an empty header", "/ka", map[string]string{"apikey": ""})
	noKey("an empty query argument", "/ka?apikey=", nil)

	// jack's value authenticates as jack; his reference as written does
	// not.
	if r := put("consumers", `{"username":"jack","plugins":{"key-auth":{"key":"$env://`+e2eKeyVar+`"}}}`); r.status != 201 {
		t.Fatalf("PUT jack: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": e2eKey}, nil); r.status != 200 {
			return fmt.Errorf("the variable's value: %d %q", r.status, r.body)
		}
		return nil
	})
	if e := upstreamSaw(t, do(t, c, "GET", g.url("/ka"), "", map[string]string{"apikey": e2eKey}, nil)); e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("the variable's value: upstream saw %+v", e)
	}
	noKey("the reference as written", "/ka", map[string]string{"apikey": "$env://" + e2eKeyVar})

	// The Admin API shows the reference as stored, never the value.
	r := admin.do(t, c, "GET", "consumers/jack", "")
	if r.status != 200 || !strings.Contains(r.body, `"key":"$env://`+e2eKeyVar+`"`) || strings.Contains(r.body, e2eKey) {
		t.Errorf("GET jack: %d %s", r.status, r.body)
	}
	if strings.Contains(g.out.String(), e2eKey) {
		t.Errorf("the gateway logged the variable's value:\n%s", g.out.String())
	}
}
