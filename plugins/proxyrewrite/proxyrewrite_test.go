package proxyrewrite

import (
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, conf string) plugins.Phases { return *plugintest.Build(t, Name, conf) }

// request is one client request: its target as sent, headers, and the
// variables the worker would give ($uri, the decoded path, when it
// differs from the target's path).
type request struct {
	method, target string
	headers        []string // name, value, ...
	vars           []string // name, value, ...
}

func (r request) ctx() *plugintest.Ctx {
	m := r.method
	if m == "" {
		m = "GET"
	}
	c := plugintest.NewCtx(m, r.target)
	for i := 0; i+1 < len(r.headers); i += 2 {
		c.WithHeader(r.headers[i], r.headers[i+1])
	}
	for i := 0; i+1 < len(r.vars); i += 2 {
		c.WithVar(r.vars[i], r.vars[i+1])
	}
	return c
}

// upstream is what the upstream would receive: its target, method, Host
// (each empty when unchanged) and headers, in order.
type upstream struct {
	URI, Method, Host string
	Headers           []string
}

func observe(c *plugintest.Ctx) upstream {
	u := upstream{URI: string(c.UpstreamURI), Method: string(c.UpstreamMethod), Host: string(c.UpstreamHost)}
	for _, h := range c.UpstreamHeaders() {
		u.Headers = append(u.Headers, strings.ToLower(h.Name)+": "+string(h.Value))
	}
	return u
}

// TestRewrite follows t/plugin/proxy-rewrite.t.
func TestRewrite(t *testing.T) {
	tests := []struct {
		name string
		conf string
		req  request
		want upstream
	}{
		// uri (TESTs 15-18, 33-34, 40).
		{"uri keeps the query", `{"uri":"/plugin_proxy_rewrite_args"}`, request{target: "/hello?q=apisix&a=iresty"},
			upstream{URI: "/plugin_proxy_rewrite_args?q=apisix&a=iresty"}},
		{"uri without query", `{"uri":"/plugin_proxy_rewrite_args"}`, request{target: "/hello"},
			upstream{URI: "/plugin_proxy_rewrite_args"}},
		{"uri with a query of its own", `{"uri":"/plugin_proxy_rewrite_args?q=apisix"}`, request{target: "/hello?a=iresty"},
			upstream{URI: "/plugin_proxy_rewrite_args?q=apisix&a=iresty"}},
		{"uri from a variable", `{"uri":"/$arg_new_uri"}`, request{target: "/test?new_uri=hello"},
			upstream{URI: "/hello?new_uri=hello"}},
		{"uri variable with default", `{"uri":"/${ arg_v ?? v1 }/x"}`, request{target: "/test"},
			upstream{URI: "/v1/x"}},
		{"uri unknown variable", `{"uri":"/a$nope/b"}`, request{target: "/test"},
			upstream{URI: "/a/b"}},
		{"uri escaped dollar kept", `{"uri":"/a\\$arg_x"}`, request{target: "/test?x=1"},
			upstream{URI: "/a\\$arg_x?x=1"}},
		{"uri variable's ? escaped", `{"uri":"/p$http_x"}`, request{target: "/test", headers: []string{"x", "/a?b c"}},
			upstream{URI: "/p/a%253Fb%20c", Headers: []string{"x: /a?b c"}}},
		{"uri path escaped", `{"uri":"/a b#c%d\u00e9"}`, request{target: "/t"},
			upstream{URI: "/a%20b%23c%25d%C3%A9"}},

		// regex_uri (TESTs 21-25, 62-66).
		{"regex three groups", `{"regex_uri":["^/test/(.*)/(.*)/(.*)","/$1_$2_$3"]}`, request{target: "/test/plugin/proxy/rewrite"},
			upstream{URI: "/plugin_proxy_rewrite"}},
		{"regex no match keeps $uri", `{"regex_uri":["^/test/(.*)/(.*)/(.*)","/$1_$2_$3"]}`, request{target: "/test/not/found?x=1"},
			upstream{URI: "/test/not/found?x=1"}},
		{"uri wins over regex", `{"uri":"/hello","regex_uri":["^/test/(.*)","/${1}1"]}`, request{target: "/test/hello"},
			upstream{URI: "/hello"}},
		{"regex braces", `{"regex_uri":["^/test/(.*)","/${1}1"]}`, request{target: "/test/hello"},
			upstream{URI: "/hello1"}},
		{"regex first pair that matches", `{"regex_uri":["^/a/(.*)","/A/$1","^/b/(.*)","/B/$1"]}`, request{target: "/b/x?q=1"},
			upstream{URI: "/B/x?q=1"}},
		{"regex replaces the first match only", `{"regex_uri":["o","0"]}`, request{target: "/foo/bo"},
			upstream{URI: "/f0o/bo"}},
		{"regex $0 and $$", `{"regex_uri":["^/x/(.+)$","$0/$$/$2"]}`, request{target: "/x/y"},
			upstream{URI: "/x/y/$/"}},
		{"regex template query", `{"regex_uri":["^/p/(.*)","/q?id=$1"]}`, request{target: "/p/7?x=1"},
			upstream{URI: "/q?id=7&x=1"}},
		{"regex on the decoded path", `{"regex_uri":["^/p/(.*)","/q/$1"]}`,
			request{target: "/p/a%20b", vars: []string{"uri", "/p/a b"}}, upstream{URI: "/q/a%20b"}},
		{"regex decoded ? is escaped", `{"regex_uri":["^/p/(.*)","/q?id=$1"]}`,
			request{target: "/p/a%3Fb", vars: []string{"uri", "/p/a?b"}}, upstream{URI: "/q%3Fid=a%3Fb"}},
		{"regex CRLF not injected", `{"regex_uri":["^(/reflect.*)","/print_request_received?orig=$1"]}`,
			request{target: "/reflect%0d%0aX-Injected:pwn", vars: []string{"uri", "/reflect\r\nX-Injected:pwn"}},
			upstream{URI: "/print_request_received?orig=/reflect%0D%0AX-Injected:pwn"}},
		{"regex lookalike handled by regexp", `{"regex_uri":["^/(\\w+)/(\\d+)$","/$2/$1"]}`, request{target: "/item/42"},
			upstream{URI: "/42/item"}},

		// use_real_request_uri_unsafe (TESTs 45-57).
		{"unsafe uri", `{"uri":"/plugin_proxy_rewrite_args","use_real_request_uri_unsafe":true}`,
			request{target: "/hello?q=apisix&a=iresty"}, upstream{URI: "/plugin_proxy_rewrite_args?q=apisix&a=iresty"}},
		{"unsafe uri, no query", `{"uri":"/plugin_proxy_rewrite_args","use_real_request_uri_unsafe":true}`,
			request{target: "/hello"}, upstream{URI: "/plugin_proxy_rewrite_args"}},
		{"unsafe uri with a query of its own", `{"uri":"/plugin_proxy_rewrite_args?x=1","use_real_request_uri_unsafe":true}`,
			request{target: "/hello?q=apisix"}, upstream{URI: "/plugin_proxy_rewrite_args?x=1&q=apisix"}},
		{"unsafe alone", `{"use_real_request_uri_unsafe":true}`,
			request{target: "/a%20b?name=a%20b&x=%E4%B8%AD", vars: []string{"uri", "/a b"}}, upstream{URI: "/a%20b?name=a%20b&x=%E4%B8%AD"}},
		{"unsafe query with ?", `{"uri":"/print_uri_detailed","use_real_request_uri_unsafe":true}`,
			request{target: "/hello?a=1?b=2"}, upstream{URI: "/print_uri_detailed?a=1?b=2"}},
		{"safe query as sent", `{"uri":"/print_uri_detailed"}`,
			request{target: "/hello?name=a%20b&x=1"}, upstream{URI: "/print_uri_detailed?name=a%20b&x=1"}},
		{"unsafe regex on the whole target", `{"regex_uri":["^/p/([^?]*)\\?(.*)","/q/$1?$2&z"],"use_real_request_uri_unsafe":true}`,
			request{target: "/p/a%20b?x=1"}, upstream{URI: "/q/a%20b?x=1&z"}},

		// host, method.
		{"host and method", `{"host":"test.com:6443","method":"POST"}`, request{target: "/hello?x=1"},
			upstream{URI: "/hello?x=1", Host: "test.com:6443", Method: "POST"}},

		// headers (TESTs 9-14, 19-20, 36-39, 58-65).
		{"flat set", `{"uri":"/uri","headers":{"X-Api-Version":"v2","X-Num":1.5,"X-Int":100}}`,
			request{target: "/hello", headers: []string{"X-Api-Version", "v1", "Other", "o"}},
			upstream{URI: "/uri", Headers: []string{"other: o", "x-api-version: v2", "x-num: 1.5", "x-int: 100"}}},
		{"flat empty value removes", `{"uri":"/uri","headers":{"X-Api-Engine":"APISIX","X-Api-Test":""}}`,
			request{target: "/hello", headers: []string{"X-Api-Test", "foo", "X-Api-Engine", "bar"}},
			upstream{URI: "/uri", Headers: []string{"x-api-engine: APISIX"}}},
		{"flat set over an empty header", `{"uri":"/uri","headers":{"X-Api-Test":"hello"}}`,
			request{target: "/hello", headers: []string{"X-Api-Test", ""}},
			upstream{URI: "/uri", Headers: []string{"x-api-test: hello"}}},
		{"variables", `{"uri":"/uri","headers":{"x-api":"$remote_addr","name":"$arg_name","x-key":"$http_key"}}`,
			request{target: "/hello?name=Bill", headers: []string{"key", "X-APISIX"}},
			upstream{URI: "/uri?name=Bill", Headers: []string{"key: X-APISIX", "x-api: 127.0.0.1", "name: Bill", "x-key: X-APISIX"}}},
		{"unset variables", `{"uri":"/uri","headers":{"x-api":"$helle","name":"$arg_world","x-key":"$http_key","Version":"nginx_var_does_not_exist"}}`,
			request{target: "/hello"},
			upstream{URI: "/uri", Headers: []string{"version: nginx_var_does_not_exist"}}},
		{"set array", `{"uri":"/m","headers":{"set":{"x-multi":["val1","val2"]}}}`,
			request{target: "/hello", headers: []string{"x-multi", "origin"}},
			upstream{URI: "/m", Headers: []string{"x-multi: val1", "x-multi: val2"}}},
		{"add array", `{"uri":"/m","headers":{"add":{"x-multi":["val1","val2"]}}}`,
			request{target: "/hello", headers: []string{"x-multi", "origin"}},
			upstream{URI: "/m", Headers: []string{"x-multi: origin", "x-multi: val1", "x-multi: val2"}}},
		{"captures and variables in arrays", `{"regex_uri":["^/test/(.*)","/m"],"headers":{"set":{"x-multi":["cap-$1","$http_x_src"]}}}`,
			request{target: "/test/echo", headers: []string{"x-src", "from-src"}},
			upstream{URI: "/m", Headers: []string{"x-src: from-src", "x-multi: cap-echo", "x-multi: from-src"}}},
		{"captures in add", `{"regex_uri":["^/test/(.*)","/m"],"headers":{"add":{"x-multi":["cap-${1}","$http_x_src"]}}}`,
			request{target: "/test/echo", headers: []string{"x-src", "from-src"}},
			upstream{URI: "/m", Headers: []string{"x-src: from-src", "x-multi: cap-echo", "x-multi: from-src"}}},
		{"captures without a match are empty", `{"regex_uri":["^/test/(.*)","/m"],"headers":{"set":{"x-c":"c=$1;$9"}}}`,
			request{target: "/other"}, upstream{URI: "/other", Headers: []string{"x-c: c=;"}}},
		{"capture bringing a variable", `{"regex_uri":["^/v/(.*)","/m"],"headers":{"set":{"x-c":"$1"}}}`,
			request{target: "/v/$remote_addr", vars: []string{"uri", "/v/$remote_addr"}}, upstream{URI: "/m", Headers: []string{"x-c: 127.0.0.1"}}},
		{"variable's control characters escaped", `{"headers":{"set":{"x-c":"$arg_v"}}}`,
			request{target: "/h", vars: []string{"arg_v", "a\r\nb"}}, upstream{URI: "/h", Headers: []string{"x-c: a%0D%0Ab"}}},
		{"add, set, remove in order", `{"headers":{"remove":["X-Del","x-set"],"set":{"X-Set":"s"},"add":{"X-Set":"a","X-Add":"b"}}}`,
			request{target: "/h", headers: []string{"X-Del", "d", "X-Keep", "k"}},
			upstream{URI: "/h", Headers: []string{"x-keep: k", "x-add: b"}}},
		{"add then set", `{"headers":{"set":{"X-Set":"s"},"add":{"X-Set":"a","X-Add":""}}}`,
			request{target: "/h"},
			upstream{URI: "/h", Headers: []string{"x-add: ", "x-set: s"}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf)
			c := tc.req.ctx()
			plugintest.Run(&p, c)
			got := observe(c)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			// Twice: the instance's buffers are reused.
			c.Reset()
			plugintest.Run(&p, c)
			if diff := cmp.Diff(tc.want, observe(c)); diff != "" {
				t.Errorf("second run (-want +got):\n%s", diff)
			}
		})
	}
}

// TestCheck: what the schema and Check refuse, with APISIX's messages
// (TESTs 26-32, 42).
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin proxy-rewrite err: "
	tests := []struct{ conf, want string }{
		{`{"uri":"/hello"}`, ""},
		{`{"host":"apisix.iresty.com:6443"}`, ""},
		{`{"regex_uri":["^/test/(.*)","/$1"],"method":"PATCH"}`, ""},
		{`{"headers":{"add":{"a":1,"b":["x",2]},"set":{"c":"$1"},"remove":["d"]}}`, ""},
		{`{}`, "expect object to have at least 1 properties"},
		{`{"uri":"home"}`, `property "uri" validation failed: failed to match pattern "^\\/.*" with "home"`},
		{`{"regex_uri":["^/test/(.*)"]}`, `property "regex_uri" validation failed: expect array to have at least 2 items`},
		{`{"regex_uri":["^/a","/b","^/c"]}`, "The length of regex_uri should be an even number"},
		{`{"regex_uri":["[^/test/(.*)","/$1"]}`,
			"invalid regex_uri([^/test/(.*), /$1): failed to compile the regex (RE2 syntax: no lookaround, no backreferences): error parsing regexp: missing closing ]: `[^/test/(.*)`"},
		{`{"regex_uri":["^/(?=a)b","/$1"]}`,
			"invalid regex_uri(^/(?=a)b, /$1): failed to compile the regex (RE2 syntax: no lookaround, no backreferences): error parsing regexp: invalid or unsupported Perl syntax: `(?=`"},
		{"{\"regex_uri\":[\"^/test/(.*)\",\"/$`1\"]}", "invalid regex_uri(^/test/(.*), /$`1): failed to compile the replacement template"},
		{`{"regex_uri":["^/test/(.*)","/${1"]}`, "invalid regex_uri(^/test/(.*), /${1): failed to compile the replacement template"},
		{`{"regex_uri":["^/test/(.*)","/$"]}`, "invalid regex_uri(^/test/(.*), /$): failed to compile the replacement template"},
		{`{"headers":{"X-Api:Version":"v2"}}`, "invalid field character in header"},
		{`{"headers":{"":"v2"}}`, "invalid field length in header"},
		{`{"headers":{"X-Api-Version":"v2\r\n"}}`, "invalid value character in header"},
		{`{"headers":{"add":{"X Bad":"v"}}}`, "invalid field character in header"},
		{`{"method":"GETS"}`, `property "method" validation failed: matches none of the enum values`},
		{`{"host":"a b"}`, `property "host" validation failed: failed to match pattern "^[0-9a-zA-Z-.]+(:\\d{1,5})?$" with "a b"`},
	}
	for _, tc := range tests {
		got := ""
		if err := plugins.Check(Name, json.RawMessage(tc.conf)); err != nil {
			got = strings.TrimPrefix(err.Error(), prefix)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.conf, diff)
		}
	}
}

func TestREADMEExamples(t *testing.T) {
	md, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	if n := plugintest.CheckExamples(t, md, Name); n < 6 {
		t.Fatalf("README.md shows %d configurations of %s, want at least 6", n, Name)
	}
}
