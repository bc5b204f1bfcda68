package adminapi

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/admin/store"
)

const upstream1 = `{"type":"roundrobin","nodes":{"127.0.0.1:8080":1}}`

// wantValue checks a write's {key, value} envelope: value is what was
// sent plus id, create_time and update_time, nothing else.
func wantValue(t *testing.T, c *client, r response, status int, key, sent string) map[string]any {
	t.Helper()
	c.want(r, status, "")
	m := r.json(t)
	if len(m) != 2 || m["key"] != c.st.Prefix()+key {
		t.Fatalf("envelope %s, want key %s", r.body, c.st.Prefix()+key)
	}
	v := m["value"].(map[string]any)
	for _, k := range []string{"create_time", "update_time"} {
		n, err := v[k].(json.Number).Int64()
		if err != nil || n < time.Now().Unix()-3600 || n > time.Now().Unix()+5 {
			t.Fatalf("%s %v in %s", k, v[k], r.body)
		}
		delete(v, k)
	}
	var want map[string]any
	d := json.NewDecoder(strings.NewReader(sent))
	d.UseNumber()
	if err := d.Decode(&want); err != nil {
		t.Fatal(err)
	}
	if !jsonEqual(encodeJSON(v), encodeJSON(want)) {
		t.Fatalf("value %s\nwant (without timestamps) %s", encodeJSON(v), sent)
	}
	return m["value"].(map[string]any)
}

func TestRoutePutGetDelete(t *testing.T) {
	c := newTestServer(t)
	body := `{"uri":"/index","methods":["GET"],"upstream":` + upstream1 + `}`
	// 201 for a new key; the value is what was sent plus id and the
	// timestamps: no priority, no status (schema defaults are not stored).
	wantValue(t, c, c.do("PUT", "/apisix/admin/routes/1", body), 201, "/routes/1",
		`{"id":"1","uri":"/index","methods":["GET"],"upstream":`+upstream1+`}`)
	// 200 when it replaces one, keeping create_time.
	kv, err := c.st.Get(t.Context(), c.st.Prefix()+"/routes/1")
	if err != nil {
		t.Fatal(err)
	}
	old := strings.Replace(string(kv.Value), `"create_time":`, `"create_time":1000,"x":`, 1)
	if _, _, err := c.st.Put(t.Context(), kv.Key, []byte(old), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	r := c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/index2","upstream":`+upstream1+`}`)
	c.want(r, 200, "")
	if v := r.json(t)["value"].(map[string]any); v["create_time"] != json.Number("1000") || v["uri"] != "/index2" || v["methods"] != nil {
		t.Fatalf("replaced: %s", r.body)
	}

	// GET one: the envelope with etcd's revisions.
	kv, _ = c.st.Get(t.Context(), c.st.Prefix()+"/routes/1")
	r = c.do("GET", "/apisix/admin/routes/1", "")
	c.want(r, 200, `{"key":"`+kv.Key+`","value":`+string(kv.Value)+`,"createdIndex":`+
		strconv.FormatInt(kv.CreateRevision, 10)+`,"modifiedIndex":`+strconv.FormatInt(kv.ModRevision, 10)+`}`)
	if kv.CreateRevision == kv.ModRevision {
		t.Fatalf("revisions %d %d after two writes", kv.CreateRevision, kv.ModRevision)
	}
	c.want(c.do("GET", "/apisix/admin/routes/9", ""), 404, `{"message":"Key not found"}`)

	// PUT without an id in the URL takes the body's, which keeps its type.
	wantValue(t, c, c.do("PUT", "/apisix/admin/routes", `{"id":"2","uri":"/2","upstream":`+upstream1+`}`), 201, "/routes/2",
		`{"id":"2","uri":"/2","upstream":`+upstream1+`}`)
	wantValue(t, c, c.do("PUT", "/apisix/admin/routes", `{"id":3,"uri":"/3","upstream":`+upstream1+`}`), 201, "/routes/3",
		`{"id":3,"uri":"/3","upstream":`+upstream1+`}`)
	// The same id in both is fine; the URL's (a string) is stored.
	wantValue(t, c, c.do("PUT", "/apisix/admin/routes/3", `{"id":3,"uri":"/3","upstream":`+upstream1+`}`), 200, "/routes/3",
		`{"id":"3","uri":"/3","upstream":`+upstream1+`}`)
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"id":"2","uri":"/x"}`), 400, `{"error_msg":"wrong route id","field":"id"}`)
	c.want(c.do("PUT", "/apisix/admin/routes", `{"uri":"/x"}`), 400, `{"error_msg":"missing route id","field":"id"}`)
	c.want(c.do("PUT", "/apisix/admin/routes/1", ""), 400, `{"error_msg":"missing configurations"}`)

	// DELETE.
	c.want(c.do("DELETE", "/apisix/admin/routes/2", ""), 200, `{"deleted":"1","key":"`+c.st.Prefix()+`/routes/2"}`)
	c.want(c.do("DELETE", "/apisix/admin/routes/2", ""), 404, `{"message":"Key not found"}`)
	c.want(c.do("DELETE", "/apisix/admin/routes", ""), 400, `{"error_msg":"missing route id"}`)
	if c.stored("/routes/2") != nil {
		t.Fatal("route 2 still stored")
	}
}

func TestRoutePost(t *testing.T) {
	c := newTestServer(t)
	r := c.do("POST", "/apisix/admin/routes", `{"uri":"/p","upstream":`+upstream1+`}`)
	c.want(r, 201, "")
	v := r.json(t)["value"].(map[string]any)
	id, _ := v["id"].(string)
	if !regexp.MustCompile(`^[0-9]{20}$`).MatchString(id) || id == postIDPlaceholder {
		t.Fatalf("POST id %q", id)
	}
	wantValue(t, c, r, 201, "/routes/"+id, `{"id":"`+id+`","uri":"/p","upstream":`+upstream1+`}`)
	if c.stored("/routes/"+id) == nil {
		t.Fatal("not stored")
	}
	r2 := c.do("POST", "/apisix/admin/routes", `{"uri":"/p","upstream":`+upstream1+`}`)
	if id2 := r2.json(t)["value"].(map[string]any)["id"]; id2 == id {
		t.Fatalf("two POSTs, one id %v", id2)
	}
	c.want(c.do("POST", "/apisix/admin/routes", `{"id":"5","uri":"/p"}`), 400, `{"error_msg":"wrong route id, do not need it","field":"id"}`)
	c.want(c.do("POST", "/apisix/admin/routes/5", `{"uri":"/p"}`), 400, `{"error_msg":"wrong route id, do not need it","field":"id"}`)
	c.want(c.do("POST", "/apisix/admin/routes", `{"uri":"/p","methods":["FOO"]}`), 400, "")
	kvs, _, _ := c.st.List(t.Context(), c.st.Prefix()+"/routes/")
	if len(kvs) != 2 {
		t.Fatalf("%d routes stored, want 2", len(kvs))
	}
}

func TestTimestampsForbidden(t *testing.T) {
	c := newTestServer(t)
	for _, tc := range []struct{ body, field string }{
		{`{"uri":"/a","create_time":1}`, "create_time"},
		{`{"uri":"/a","update_time":1}`, "update_time"},
		{`{"uri":"/a","create_time":null}`, "create_time"},
		{`{"uri":"/a","upstream":{"nodes":{"127.0.0.1:1":1},"create_time":1}}`, "upstream.create_time"},
		{`{"uri":"/a","plugins":{"update_time":{}}}`, "plugins.update_time"},
	} {
		for _, m := range []string{"PUT", "POST"} {
			p := "/apisix/admin/routes"
			if m == "PUT" {
				p += "/1"
			}
			c.want(c.do(m, p, tc.body), 400, `{"error_msg":"the property is forbidden:  `+tc.field+`","field":"`+tc.field+`"}`)
		}
	}
	// false is not set, in Lua's eyes; the schema then refuses it.
	r := c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","create_time":false}`)
	c.want(r, 400, "")
	if strings.Contains(string(r.body), "forbidden") {
		t.Fatal(string(r.body))
	}
	if c.stored("/routes/1") != nil {
		t.Fatal("stored")
	}
}

func TestTTL(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/routes/1?ttl=abc", `{"uri":"/a","upstream":`+upstream1+`}`), 400,
		`{"error_msg":"invalid argument ttl: should be a number"}`)
	c.want(c.do("GET", "/apisix/admin/routes?ttl=abc", ""), 400, `{"error_msg":"invalid argument ttl: should be a number"}`)
	c.want(c.do("PUT", "/apisix/admin/routes/1?ttl=0", `{"uri":"/a","upstream":`+upstream1+`}`), 400, "")
	c.want(c.do("PUT", "/apisix/admin/routes/1?ttl=1", `{"uri":"/a","upstream":`+upstream1+`}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/2", `{"uri":"/b","upstream":`+upstream1+`}`), 201, "")
	deadline := time.Now().Add(30 * time.Second)
	for c.stored("/routes/1") != nil {
		if time.Now().After(deadline) {
			t.Fatal("route 1 did not expire")
		}
		time.Sleep(200 * time.Millisecond)
	}
	c.want(c.do("GET", "/apisix/admin/routes/1", ""), 404, `{"message":"Key not found"}`)
	if c.stored("/routes/2") == nil {
		t.Fatal("route 2, without ttl, expired")
	}
}

func TestRequestErrors(t *testing.T) {
	c := newTestServer(t)
	r := c.do("PUT", "/apisix/admin/routes/1", `{"uri":`)
	c.want(r, 400, "")
	m := r.json(t)
	if !strings.HasPrefix(m["error_msg"].(string), "invalid request body: ") || m["req_body"] != `{"uri":` {
		t.Fatalf("bad JSON: %s", r.body)
	}
	big := `{"uri":"/a","desc":"` + strings.Repeat("x", maxBody) + `"}`
	c.want(c.do("PUT", "/apisix/admin/routes/1", big), 400, `{"error_msg":"invalid request body: request size `+
		strconv.Itoa(len(big))+` is greater than the maximum size 1572864 allowed"}`)

	// The same without Content-Length (chunked): the size read is told.
	pr, pw := io.Pipe()
	go func() {
		_, _ = pw.Write([]byte(big))
		pw.Close()
	}()
	req, _ := http.NewRequest("PUT", c.url+"/apisix/admin/routes/1", pr)
	req.Header.Set("X-API-KEY", testKey)
	resp, err := c.http.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	out, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 400 || !jsonEqual(out, []byte(`{"error_msg":"invalid request body: request size `+
		strconv.Itoa(len(big))+` is greater than the maximum size 1572864 allowed"}`)) {
		t.Fatalf("chunked: %d %s", resp.StatusCode, out)
	}

	// Text that is not Unicode is refused, not stored with U+FFFD in its
	// place: bytes that are not UTF-8, an escaped surrogate that is not
	// half of a pair.
	for _, tc := range []struct{ body, want string }{
		{"{\"uri\":\"/a\xff\",\"upstream\":" + upstream1 + "}", "invalid request body: invalid UTF-8 at offset 10"},
		{"{\"uri\":\"/a\",\"desc\":\"\xc0\xaf\",\"upstream\":" + upstream1 + "}", "invalid request body: invalid UTF-8 at offset 20"},
		{"{\"uri\":\"/a\",\"desc\":\"\xed\xa0\x80\",\"upstream\":" + upstream1 + "}", "invalid request body: invalid UTF-8 at offset 20"},
		{"{\"uri\":\"/a\",\"d\xe9sc\":\"x\",\"upstream\":" + upstream1 + "}", "invalid request body: invalid UTF-8 at offset 14"},
		{`{"uri":"/a","desc":"\ud800","upstream":` + upstream1 + `}`, "invalid request body: invalid unicode escape code at offset 20"},
		{`{"uri":"/a","desc":"\udc00\ud800","upstream":` + upstream1 + `}`, "invalid request body: invalid unicode escape code at offset 20"},
		{`{"uri":"/a","desc":"\ud800\u0041","upstream":` + upstream1 + `}`, "invalid request body: invalid unicode escape code at offset 20"},
		{`{"uri":"/a","desc":"x\\ud800\ud83d","upstream":` + upstream1 + `}`, "invalid request body: invalid unicode escape code at offset 28"},
	} {
		r := c.do("PUT", "/apisix/admin/routes/1", tc.body)
		c.want(r, 400, "")
		if m := r.json(t); m["error_msg"] != tc.want || m["req_body"] == nil {
			t.Fatalf("%q: %s", tc.body, r.body)
		}
		if c.stored("/routes/1") != nil {
			t.Fatalf("%q: stored", tc.body)
		}
	}
	// A pair is one character; escaped or not, it is stored as sent.
	r = c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","desc":"\ud83d\ude00 \u00e9 é 😀","upstream":`+upstream1+`}`)
	c.want(r, 201, "")
	if d := c.stored("/routes/1")["desc"]; d != "😀 é é 😀" {
		t.Fatalf("desc %q", d)
	}
	c.want(c.do("DELETE", "/apisix/admin/routes/1", ""), 200, "")

	for _, tc := range []struct{ body, want string }{
		{`{"uri":"/a","methods":["FOO"]}`, `{"error_msg":"invalid configuration: property \"methods\" validation failed: failed to validate item 1: matches none of the enum values","field":"methods[0]","detail":"value \"FOO\", expected one of \"GET\", \"POST\", \"PUT\", \"DELETE\", \"PATCH\", \"HEAD\", \"OPTIONS\", \"CONNECT\", \"TRACE\", \"PURGE\""}`},
		{`{"uri":"/a","foo":1}`, `{"error_msg":"invalid configuration: additional properties forbidden, found foo"}`},
		{`{"uri":"/a","host":"a.com","hosts":["b.com"]}`, `{"error_msg":"only one of host or hosts is allowed","field":"hosts"}`},
		{`{"uri":"/a","vars":[["arg_a","=","1"]],"upstream":` + upstream1 + `}`, ""},
		{`[1]`, ""},
		{`"x"`, ""},
		{`null`, ""},
		{`{"uri":"/a","plugins":{"limit-count":{"count":0,"time_window":60}}}`, ""},
		{`{"uri":"/a","plugins":{"no-such":{}}}`, `{"error_msg":"unknown plugin [no-such]","field":"plugins.no-such"}`},
		{`{"uri":"/a","upstream_id":9}`, `{"error_msg":"failed to fetch upstream info by upstream id [9], response code: 404","field":"upstream_id"}`},
		{`{"uri":"/a","service_id":"s"}`, `{"error_msg":"failed to fetch service info by service id [s], response code: 404","field":"service_id"}`},
		{`{"uri":"/a","plugin_config_id":"p","upstream":` + upstream1 + `}`, `{"error_msg":"failed to fetch plugin config info by plugin config id [p], response code: 404","field":"plugin_config_id"}`},
		{`{"uri":"/a","upstream":{"nodes":{"127.0.0.1:99999":1}}}`, ""},
	} {
		r := c.do("PUT", "/apisix/admin/routes/1", tc.body)
		c.want(r, 400, tc.want)
		if c.stored("/routes/1") != nil {
			t.Fatalf("%s: stored", tc.body)
		}
		if tc.want == "" {
			if m := r.json(t); m["error_msg"] == "" {
				t.Fatalf("%s: %s", tc.body, r.body)
			}
		}
	}
	// The messages spec and the registry give, and the fields they name.
	r = c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","vars":[["arg_a","=","1"]],"upstream":`+upstream1+`}`)
	c.want(r, 400, "")
	if m := r.json(t); m["error_msg"] != "failed to validate the 'vars' expression: invalid operator '='" {
		t.Fatalf("vars: %s", r.body)
	}
	r = c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","plugins":{"limit-count":{"count":0,"time_window":60}}}`)
	m = r.json(t)
	if !strings.HasPrefix(m["error_msg"].(string), "failed to check the configuration of plugin limit-count err: ") ||
		m["field"] != "plugins.limit-count.count" {
		t.Fatalf("plugin: %s", r.body)
	}
	r = c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream":{"nodes":{"127.0.0.1:99999":1}}}`)
	if m := r.json(t); m["field"] == nil || m["detail"] == nil {
		t.Fatalf("node: %s", r.body)
	}
}

func TestRouting(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("GET", "/apisix/admin/foo", ""), 404, `{"error_msg":"Unsupported resource type: foo"}`)
	c.want(c.do("GET", "/apisix/admin/secret", ""), 404, `{"error_msg":"Unsupported resource type: secret"}`)
	c.want(c.do("GET", "/apisix/admin/secrets", ""), 200, `{"list":[],"total":0}`) // a resource now (secrets_test.go)
	c.want(c.do("GET", "/apisix/admin", ""), 404, `{"error_msg":"Unsupported resource type: "}`)
	c.want(c.do("GET", "/other", ""), 404, `{"error_msg":"not found"}`)
	c.want(c.do("PUT", "/apisix/admin/plugins/limit-count", "{}"), 404, `{"error_msg":"not found"}`)
	c.want(c.do("DELETE", "/apisix/admin/schema/route", ""), 404, `{"error_msg":"not found"}`)
	c.want(c.do("TRACE", "/apisix/admin/routes", ""), 404, `{"error_msg":"not found"}`)
	for _, tc := range []struct{ method, path, kind string }{
		{"POST", "/apisix/admin/consumers", "consumer"},
		{"PATCH", "/apisix/admin/consumers/jack", "consumer"},
		{"POST", "/apisix/admin/consumers/jack/credentials", "credential"},
		{"PATCH", "/apisix/admin/consumers/jack/credentials/a", "credential"},
		{"POST", "/apisix/admin/plugin_configs", "plugin config"},
		{"POST", "/apisix/admin/global_rules", "global rule"},
	} {
		c.want(c.do(tc.method, tc.path, `{}`), 405, "{\"error_msg\":\"not supported `"+tc.method+"` method for "+tc.kind+"\"}")
	}
	// Slashes merged and dot segments resolved, as nginx's $uri.
	c.want(c.do("PUT", "/apisix/admin//upstreams/./1/", `{"nodes":{"127.0.0.1:1":1}}`), 201, "")
	c.want(c.do("GET", "/apisix/admin/upstreams/1", ""), 200, "")

	// Stream routes: APISIX with its default proxy_mode (http, the only
	// one coregate has) refuses every method on them, whatever the body,
	// once the token is checked.
	for _, m := range []string{"GET", "PUT", "POST", "DELETE", "PATCH"} {
		for _, p := range []string{"/apisix/admin/stream_routes", "/apisix/admin/stream_routes/1", "/apisix/admin/stream_routes/1/x"} {
			c.want(c.do(m, p, `{"x`), 400, `{"error_msg":"stream mode is disabled, can not add stream routes"}`)
		}
	}
	anon := *c
	anon.key = ""
	anon.want(anon.do("PUT", "/apisix/admin/stream_routes/1", `{}`), 401, "")
	c.want(c.do("HEAD", "/apisix/admin/stream_routes", ""), 404, "")
}

func TestStoreUnavailable(t *testing.T) {
	st := newUnreachableStore(t)
	h, err := New(Options{Store: st, Admin: testAdmin(), Plugins: testPlugins})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, h, st)
	for _, tc := range []struct{ method, path, body string }{
		{"GET", "/apisix/admin/routes", ""},
		{"GET", "/apisix/admin/routes/1", ""},
		{"PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream":` + upstream1 + `}`},
		{"POST", "/apisix/admin/routes", `{"uri":"/a","upstream":` + upstream1 + `}`},
		{"PATCH", "/apisix/admin/routes/1", `{"uri":"/b"}`},
		{"DELETE", "/apisix/admin/upstreams/1", ""},
	} {
		r := c.do(tc.method, tc.path, tc.body)
		c.want(r, 503, "")
		if m := r.json(t); m["error_msg"] == "" {
			t.Fatalf("%s %s: %s", tc.method, tc.path, r.body)
		}
	}
	// What is wrong with the request is still said first.
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","foo":1}`), 400, "")
}

// TestPathIDs: an id in the path is one segment, decoded once, and must
// be an id APISIX's schema allows (a username for a consumer, a plugin's
// name for plugin metadata): a decoded "/" or ".." never makes it reach
// another key, so that path rules placed in front of the Admin API mean
// what they say.
func TestPathIDs(t *testing.T) {
	c := newTestServer(t)
	route := `{"uri":"/a","upstream":` + upstream1 + `}`
	c.want(c.do("PUT", "/apisix/admin/consumers/jack", `{"username":"jack"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/consumers/jack/credentials/c1", `{"plugins":{"key-auth":{"key":"k1"}}}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/routes/a", route), 201, "")

	const idDetail = `an id is 1 to 64 characters of a-z, A-Z, 0-9, \"-\", \"_\" and \".\"`
	const nameDetail = `a username is 1 to 256 characters of a-z, A-Z, 0-9, \"_\" and \"-\"`
	badID := func(kind, id string) string {
		return `{"error_msg":"invalid ` + kind + ` id [` + id + `]","field":"id","detail":"` + idDetail + `"}`
	}
	badName := func(name string) string {
		return `{"error_msg":"invalid consumer username [` + name + `]","field":"username","detail":"` + nameDetail + `"}`
	}
	long := strings.Repeat("a", 65)
	for _, tc := range []struct{ method, path, body, want string }{
		{"PUT", "/apisix/admin/routes/a%2fb", route, badID("route", "a/b")},
		{"PUT", "/apisix/admin/routes/a%2Fb", route, badID("route", "a/b")},
		{"PATCH", "/apisix/admin/routes/a%2fb", `{"desc":"x"}`, badID("route", "a/b")},
		{"GET", "/apisix/admin/routes/a%2fb", "", badID("route", "a/b")},
		{"DELETE", "/apisix/admin/routes/a%2fb", "", badID("route", "a/b")},
		{"PUT", "/apisix/admin/routes/x%2f..%2f..%2fconsumers%2fevil", `{"username":"evil"}`, badID("route", "x/../../consumers/evil")},
		{"DELETE", "/apisix/admin/routes/x%2f..%2f..%2fconsumers%2fjack", "", badID("route", "x/../../consumers/jack")},
		{"PUT", "/apisix/admin/upstreams/%2e%2e", upstream1, badID("upstream", "..")},
		{"PUT", "/apisix/admin/upstreams/%2e", upstream1, badID("upstream", ".")},
		{"PUT", "/apisix/admin/services/a%20b", `{"upstream":` + upstream1 + `}`, badID("service", "a b")},
		{"PUT", "/apisix/admin/plugin_configs/" + long, `{"plugins":{}}`, badID("plugin config", long)},
		{"PUT", "/apisix/admin/global_rules/g%3a1", `{"plugins":{}}`, badID("global rule", "g:1")},
		{"GET", "/apisix/admin/ssls/s%2f1", "", badID("ssl", "s/1")},
		{"PUT", "/apisix/admin/consumers/jack%2fcredentials%2fc2", `{"username":"jack/credentials/c2"}`, badName("jack/credentials/c2")},
		{"GET", "/apisix/admin/consumers/jack%2fcredentials%2fc1", "", badName("jack/credentials/c1")},
		{"DELETE", "/apisix/admin/consumers/jack%2fcredentials%2fc1", "", badName("jack/credentials/c1")},
		{"PUT", "/apisix/admin/consumers/ja.ck", `{"username":"ja.ck"}`, badName("ja.ck")},
		{"GET", "/apisix/admin/consumers/x%2f..%2fjack/credentials", "", badName("x/../jack")},
		{"PUT", "/apisix/admin/consumers/x%2f..%2fjack/credentials/c2", `{"plugins":{"key-auth":{"key":"k2"}}}`, badName("x/../jack")},
		{"PUT", "/apisix/admin/consumers/jack/credentials/c%2f..%2fc1", `{"plugins":{"key-auth":{"key":"k2"}}}`, badID("credential", "c/../c1")},
		{"DELETE", "/apisix/admin/consumers/jack/credentials/%2e%2e", "", badID("credential", "..")},
		{"GET", "/apisix/admin/plugin_metadata/a%2fb", "", `{"error_msg":"invalid plugin name [a/b]","field":"id","detail":"` + idDetail + `"}`},
		{"DELETE", "/apisix/admin/plugin_metadata/..%2f..%2froutes%2fa", "", `{"error_msg":"invalid plugin name [../../routes/a]","field":"id","detail":"` + idDetail + `"}`},
	} {
		c.want(c.do(tc.method, tc.path, tc.body), 400, tc.want)
	}
	// Nothing was written or deleted: route a as it was, no route "a/b",
	// no consumer evil, jack and his credential still there.
	kvs, _, err := c.st.List(t.Context(), c.st.Prefix()+"/")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, kv := range kvs {
		keys = append(keys, strings.TrimPrefix(kv.Key, c.st.Prefix()))
	}
	if want := "/consumers/jack /consumers/jack/credentials/c1 /routes/a"; strings.Join(keys, " ") != want {
		t.Fatalf("stored %v, want %s", keys, want)
	}
	if c.stored("/routes/a")["desc"] != nil {
		t.Fatal("route a patched")
	}

	// An id percent-encoded where it need not be is the same id.
	c.want(c.do("PUT", "/apisix/admin/routes/%61-b", route), 201, "")
	if c.stored("/routes/a-b") == nil {
		t.Fatal("route a-b not stored")
	}
	c.want(c.do("GET", "/apisix/admin/consumers/%6Aack/credentials/c%31", ""), 200, "")
}
