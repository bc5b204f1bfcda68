package redirect

import (
	"encoding/json"
	"strings"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) *plugins.Phases {
	t.Helper()
	return buildEnv(t, conf, plugins.NewLocalEnv())
}

func buildEnv(t testing.TB, conf string, env plugins.Env) *plugins.Phases {
	return plugintest.BuildEnv(t, Name, conf, env)
}

// TestCheck: the schema's refusals and APISIX's own messages
// (t/plugin/redirect.t TESTs 1, 2, 24, 48).
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin redirect err: "
	for _, tc := range []struct{ conf, err string }{
		{`{"uri":"/foo"}`, ""},
		{`{"uri":"/foo","ret_code":301}`, ""},
		{`{"regex_uri":["^/a/(.*)","/b/$1"]}`, ""},
		{`{"http_to_https":true}`, ""},
		{`{"http_to_https":false}`, ""},
		{`{"http_to_https":true,"append_query_string":false}`, ""}, // redirect2.t TEST 3
		{`{"uri":"$uri","encode_uri":true,"append_query_string":true}`, ""},
		{`{}`, prefix + "value should match only one schema, but matches none"},
		{`{"uri":"/foo","http_to_https":true}`, prefix + "value should match only one schema, but matches both schemas 1 and 3"},
		{`{"uri":"/foo","http_to_https":false}`, prefix + "value should match only one schema, but matches both schemas 1 and 3"},
		{`{"uri":"/"}`, prefix + `property "uri" validation failed`},
		{`{"uri":"/foo","ret_code":199}`, prefix + `property "ret_code" validation failed`},
		{`{"uri":"/foo","ret_code":"301"}`, prefix + `property "ret_code" validation failed`},
		{`{"regex_uri":["^/a"]}`, prefix + `property "regex_uri" validation failed`},
		{`{"regex_uri":["^/a","/b","/c"]}`, prefix + `property "regex_uri" validation failed`},
		{`{"regex_uri":["^/(a","/b"]}`, prefix + "invalid regex_uri (^/(a, /b), err:failed to compile the regex"},
		{`{"regex_uri":["^/(a)","/$x"]}`, prefix + "invalid regex_uri (^/(a), /$x), err:failed to compile the replacement template"},
		{`{"http_to_https":true,"append_query_string":true}`, prefix + "only one of `http_to_https` and `append_query_string` can be configured."},
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

// request is one request to run through a configuration.
type request struct {
	method, target string
	headers        []string // "Name: value"
	vars           []string // "name=value"
}

func (r request) ctx() *plugintest.Ctx {
	m := r.method
	if m == "" {
		m = "GET"
	}
	c := plugintest.NewCtx(m, r.target)
	for _, h := range r.headers {
		k, v, _ := strings.Cut(h, ": ")
		c.WithHeader(k, v)
	}
	for _, kv := range r.vars {
		k, v, _ := strings.Cut(kv, "=")
		c.WithVar(k, v)
	}
	return c
}

// TestRedirect: the Location and status of t/plugin/redirect.t, request
// by request; 0 means the request goes on.
func TestRedirect(t *testing.T) {
	host := []string{"Host: foo.com"}
	for _, tc := range []struct {
		name, conf string
		req        request
		status     int
		location   string
	}{
		{"uri", `{"uri":"/test/add","ret_code":301}`, request{target: "/hello"}, 301, "/test/add"},
		{"default code", `{"uri":"/test/add"}`, request{target: "/hello"}, 302, "/test/add"},
		{"$uri", `{"uri":"$uri/test/add","ret_code":301}`, request{target: "/hello"}, 301, "/hello/test/add"},
		{"${arg}", `{"uri":"$uri/test/a${arg_name}c"}`, request{target: "/hello?name=json"}, 302, "/hello/test/ajsonc"},
		{"$$", `{"uri":"/foo$$uri"}`, request{target: "/hello?name=json"}, 302, "/foo$/hello"},
		{"\\$", `{"uri":"\\$uri/foo$uri\\$uri/bar","ret_code":301}`, request{target: "/hello"}, 301, `\$uri/foo/hello\$uri/bar`},
		{"unset var", `{"uri":"$uri/$bad_var/bar","ret_code":301}`, request{target: "/hello"}, 301, "/hello//bar"},
		{"lone backslash", `{"uri":"/a\\b\\$"}`, request{target: "/hello"}, 302, "/ab$"},
		{"unclosed brace", `{"uri":"/a${uri"}`, request{target: "/hello"}, 302, "/a${uri"},
		{"absolute", `{"uri":"https://$host$request_uri","ret_code":301}`, request{target: "/hello?a=1", headers: host}, 301, "https://foo.com/hello?a=1"},
		{"regex_uri", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"ret_code":301}`, request{target: "/test/1"}, 301, "http://test.com/1"},
		{"regex_uri regexp", `{"regex_uri":["^/(\\w+)/(\\d+)$","/$2/$1"]}`, request{target: "/item/42"}, 302, "/42/item"},
		{"regex_uri no match", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"]}`, request{target: "/hello"}, 0, ""},
		{"regex_uri encode", `{"regex_uri":["^/test/(.*)","http://test.com/${1}"],"encode_uri":true}`,
			request{target: "/test/with%20space", vars: []string{"uri=/test/with space"}}, 302, "http://test.com/with%20space"},
		{"uri encode", `{"uri":"$uri","encode_uri":true}`,
			request{target: "/hello/with%20space", vars: []string{"uri=/hello/with space"}}, 302, "/hello/with%20space"},
		{"encode keeps the query", `{"uri":"/a b?c d","encode_uri":true}`, request{target: "/hello"}, 302, "/a%20b?c d"},
		{"append_query_string", `{"uri":"$uri","append_query_string":true}`, request{target: "/hello?name=json"}, 302, "/hello?name=json"},
		{"append to a query", `{"uri":"$uri?type=string","append_query_string":true}`, request{target: "/hello?name=json"}, 302, "/hello?type=string&name=json"},
		{"regex_uri append", `{"regex_uri":["^/test/(.*)","http://test.com/${1}?q=apisix"],"append_query_string":true}`,
			request{target: "/test/hello?o=apache"}, 302, "http://test.com/hello?q=apisix&o=apache"}, // redirect2.t TEST 2
		{"append no query", `{"uri":"$uri","append_query_string":true}`, request{target: "/hello"}, 302, "/hello"},
		{"append encoded", `{"uri":"/a b","encode_uri":true,"append_query_string":true}`, request{target: "/hello?x=1"}, 302, "/a%20b?x=1"},
		{"http_to_https GET", `{"http_to_https":true}`, request{target: "/hello?a=1", headers: host}, 301, "https://foo.com/hello?a=1"},
		{"http_to_https HEAD", `{"http_to_https":true}`, request{method: "HEAD", target: "/hello", headers: host}, 301, "https://foo.com/hello"},
		{"http_to_https POST", `{"http_to_https":true,"ret_code":307}`, request{method: "POST", target: "/hello-https", headers: host}, 308, "https://foo.com/hello-https"},
		{"http_to_https ret_code", `{"http_to_https":true,"ret_code":302}`, request{target: "/hello", headers: host}, 301, "https://foo.com/hello"},
		{"already https", `{"http_to_https":true}`, request{target: "/hello", headers: host, vars: []string{"scheme=https"}}, 0, ""},
		{"forwarded https", `{"http_to_https":true}`, request{target: "/hello", headers: []string{"Host: foo.com", "X-Forwarded-Proto: https"}}, 0, ""},
		{"forwarded http over https", `{"http_to_https":true}`,
			request{target: "/hello", headers: []string{"Host: foo.com", "X-Forwarded-Proto: http"}, vars: []string{"scheme=https"}}, 301, "https://foo.com/hello"},
	} {
		c := tc.req.ctx()
		plugintest.Run(build(t, tc.conf), c)
		if tc.status == 0 {
			if c.Exited() || c.ResponseHeader("Location") != nil {
				t.Errorf("%s: redirected %d to %q", tc.name, c.ExitStatus(), c.ResponseHeader("Location"))
			}
			continue
		}
		if !c.Exited() || c.ExitStatus() != tc.status || string(c.ResponseHeader("Location")) != tc.location {
			t.Errorf("%s: exited %v %d, Location %q; want %d %q", tc.name, c.Exited(), c.ExitStatus(), c.ResponseHeader("Location"), tc.status, tc.location)
		}
	}
}

// TestHTTPSPort: the port of http_to_https's target, as get_port finds
// it (redirect.t TESTs 17-22): plugin_attr.redirect.https_port, else the
// node's HTTPS listener; none, 443 and ports out of range leave it out.
func TestHTTPSPort(t *testing.T) {
	for _, tc := range []struct {
		attr     string
		listener int
		want     string
	}{
		{"", 0, "https://foo.com/hello"},
		{"", 9443, "https://foo.com:9443/hello"},
		{`{"https_port":8443}`, 9443, "https://foo.com:8443/hello"},
		{`{"https_port":443}`, 9443, "https://foo.com/hello"},
		{`{"https_port":70000}`, 9443, "https://foo.com/hello"},
		{`{"https_port":-1}`, 0, "https://foo.com/hello"},
		{`{}`, 9445, "https://foo.com:9445/hello"},
	} {
		env := plugins.NewLocalEnv()
		env.HTTPSPort = tc.listener
		if tc.attr != "" {
			env.Attr = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(tc.attr)})
		}
		c := plugintest.NewCtx("GET", "/hello").WithHeader("Host", "foo.com")
		plugintest.Run(buildEnv(t, `{"http_to_https":true}`, env), c)
		if got := string(c.ResponseHeader("Location")); got != tc.want {
			t.Errorf("attr %s, listener %d: Location %q, want %q", tc.attr, tc.listener, got, tc.want)
		}
	}
	env := plugins.NewLocalEnv()
	env.Attr = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(`{"https_port":"x"}`)})
	if _, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(`{"http_to_https":true}`)}, env); err == nil {
		t.Error("a https_port that is not a number was taken")
	}
}

// TestRepeat: an instance's buffers are reused, request after request,
// without one request's Location leaking into the next.
func TestRepeat(t *testing.T) {
	p := build(t, `{"uri":"$uri","encode_uri":true,"append_query_string":true}`)
	for _, tc := range []struct{ target, want string }{
		{"/a-long-path/to/somewhere?x=1&y=2", "/a-long-path/to/somewhere?x=1&y=2"},
		{"/b", "/b"},
		{"/c?z", "/c?z"},
	} {
		c := plugintest.NewCtx("GET", tc.target)
		plugintest.Run(p, c)
		if got := string(c.ResponseHeader("Location")); got != tc.want {
			t.Errorf("%s: Location %q, want %q", tc.target, got, tc.want)
		}
	}
}
