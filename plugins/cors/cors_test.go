package cors

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

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

// corsHeaders are the headers the plugin may set, as the tests compare
// them.
var corsHeaders = []string{"Vary", "Access-Control-Allow-Origin", "Access-Control-Allow-Methods",
	"Access-Control-Allow-Headers", "Access-Control-Expose-Headers", "Access-Control-Max-Age",
	"Access-Control-Allow-Credentials", "Timing-Allow-Origin"}

// run takes a request with the given headers (name: value) through p and
// returns the CORS headers of its response, by name.
func run(p *plugins.Phases, method string, headers ...string) (*plugintest.Ctx, map[string]string) {
	c := plugintest.NewCtx(method, "/hello")
	for _, h := range headers {
		k, v, _ := strings.Cut(h, ": ")
		c.WithHeader(k, v)
	}
	plugintest.Run(p, c)
	got := map[string]string{}
	for _, k := range corsHeaders {
		if vs := c.ResponseHeaderValues(k); vs != nil {
			got[k] = strings.Join(vs, ", ")
		}
	}
	return c, got
}

// TestCheck: the schema's refusals and APISIX's own messages.
func TestCheck(t *testing.T) {
	const prefix = "failed to check the configuration of plugin cors err: "
	for _, tc := range []struct{ conf, err string }{
		{`{}`, ""},
		{`{"allow_origins":"http://a.com,https://b.com:8080","allow_credential":true,"allow_methods":"GET","allow_headers":"x"}`, ""},
		{`{"allow_origins":"**","allow_methods":"**","allow_headers":"**","expose_headers":"*"}`, ""},
		{`{"allow_origins":"null"}`, ""},
		{`{"allow_origins":"a.com"}`, prefix + `property "allow_origins" validation failed`},
		{`{"allow_origins":"http://a.com,"}`, prefix + `property "allow_origins" validation failed`},
		{`{"max_age":"5"}`, prefix + `property "max_age" validation failed`},
		{`{"allow_credential":true}`, prefix + "you can not set '*' for other option when 'allow_credential' is true"},
		{`{"allow_origins":"http://a.com","allow_methods":"*","allow_headers":"x","allow_credential":true}`, prefix + "you can not set '*'"},
		{`{"allow_origins":"http://a.com","allow_methods":"GET","allow_headers":"*","allow_credential":true}`, prefix + "you can not set '*'"},
		{`{"allow_origins":"http://a.com","allow_methods":"GET","allow_headers":"x","expose_headers":"*","allow_credential":true}`, prefix + "you can not set '*'"},
		{`{"allow_origins":"http://a.com","allow_methods":"GET","allow_headers":"x","timing_allow_origins":"*","allow_credential":true}`, prefix + "you can not set '*'"},
		{`{"allow_origins_by_regex":[]}`, prefix + `property "allow_origins_by_regex" validation failed`},
		{`{"allow_origins_by_regex":["a","a"]}`, prefix + `property "allow_origins_by_regex" validation failed`},
		{`{"allow_origins_by_regex":["("]}`, prefix + "error parsing regexp"},
		{`{"timing_allow_origins_by_regex":["[a"]}`, prefix + "error parsing regexp"},
		{`{"allow_origins_by_metadata":[""]}`, prefix + `property "allow_origins_by_metadata" validation failed`},
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

// TestMetadataCheck: the metadata's origin lists follow allow_origins's
// pattern (t/plugin/cors3.t TEST 1).
func TestMetadataCheck(t *testing.T) {
	if err := plugins.Default.CheckMetadata(Name, json.RawMessage(`{"allow_origins":{"k":"http://a.com,http://b.com"}}`)); err != nil {
		t.Fatal(err)
	}
	if err := plugins.Default.CheckMetadata(Name, json.RawMessage(`{"allow_origins":{"k":"a.com"}}`)); err == nil {
		t.Fatal("an origin without a scheme passed")
	}
}

// TestHeaders: the headers of t/plugin/cors.t and cors2.t, request by
// request. Vary: Origin goes with an allow_origins other than "*" alone,
// as in APISIX (cors2.t TEST 5: a regex's match says "Vary: Via").
func TestHeaders(t *testing.T) {
	specified := `{"allow_origins":"http://sub.domain.com,http://sub2.domain.com","allow_methods":"GET,POST",
		"allow_headers":"headr1,headr2","expose_headers":"ex-headr1,ex-headr2","max_age":50,"allow_credential":true}`
	force := `{"allow_origins":"**","allow_methods":"**","allow_headers":"**","expose_headers":"*"}`
	all := "GET,POST,PUT,DELETE,PATCH,HEAD,OPTIONS,CONNECT,TRACE"
	for _, tc := range []struct {
		name, conf string
		headers    []string
		want       map[string]string
	}{
		{"defaults, no origin", `{}`, nil, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "*",
			"Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5"}},
		{"defaults", `{}`, []string{"Origin: http://x.com"}, map[string]string{
			"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "*",
			"Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5"}},
		{"specified", specified, []string{"Origin: http://sub2.domain.com"}, map[string]string{
			"Vary": "Origin", "Access-Control-Allow-Origin": "http://sub2.domain.com",
			"Access-Control-Allow-Methods": "GET,POST", "Access-Control-Allow-Headers": "headr1,headr2",
			"Access-Control-Expose-Headers": "ex-headr1,ex-headr2", "Access-Control-Max-Age": "50",
			"Access-Control-Allow-Credentials": "true"}},
		{"specified, no match", specified, []string{"Origin: http://sub3.domain.com"}, map[string]string{"Vary": "Origin"}},
		{"specified, no origin", specified, nil, map[string]string{"Vary": "Origin"}},
		{"one origin, no match", `{"allow_origins":"http://a.com"}`, []string{"Origin: http://b.com"}, map[string]string{"Vary": "Origin"}},
		{"one origin", `{"allow_origins":"http://a.com"}`, []string{"Origin: http://a.com"}, map[string]string{
			"Vary": "Origin", "Access-Control-Allow-Origin": "http://a.com", "Access-Control-Allow-Methods": "*",
			"Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5"}},
		{"force", force, []string{"Origin: https://sub.domain.com", "Access-Control-Request-Headers: req-header1,req-header2"}, map[string]string{
			"Vary": "Origin", "Access-Control-Allow-Origin": "https://sub.domain.com", "Access-Control-Allow-Methods": all,
			"Access-Control-Allow-Headers": "req-header1,req-header2", "Access-Control-Expose-Headers": "*",
			"Access-Control-Max-Age": "5"}},
		{"force, no origin", force, nil, map[string]string{
			"Vary": "Origin", "Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": all,
			"Access-Control-Expose-Headers": "*", "Access-Control-Max-Age": "5"}},
		{"regex", `{"allow_origins_by_regex":[".*\\.test\\.com$","^http://x\\.org$"]}`, []string{"Origin: http://a.test.com"}, map[string]string{
			"Access-Control-Allow-Origin": "http://a.test.com", "Access-Control-Allow-Methods": "*",
			"Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5"}},
		{"regex, second rule", `{"allow_origins_by_regex":[".*\\.test\\.com$","^http://x\\.org$"]}`, []string{"Origin: http://x.org"}, map[string]string{
			"Access-Control-Allow-Origin": "http://x.org", "Access-Control-Allow-Methods": "*",
			"Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5"}},
		{"regex wins over allow_origins", `{"allow_origins":"http://a.com","allow_origins_by_regex":["^http://b\\.com$"]}`,
			[]string{"Origin: http://a.com"}, map[string]string{"Vary": "Origin"}},
		{"regex, no origin", `{"allow_origins_by_regex":[".*"]}`, nil, nil},
		{"timing", `{"allow_origins":"http://a.com","timing_allow_origins":"http://a.com,http://b.com"}`, []string{"Origin: http://b.com"},
			map[string]string{"Vary": "Origin", "Timing-Allow-Origin": "http://b.com"}},
		{"timing by regex", `{"timing_allow_origins":"http://no.com","timing_allow_origins_by_regex":["^http://t"]}`, []string{"Origin: http://t.com"},
			map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "*",
				"Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5", "Timing-Allow-Origin": "http://t.com"}},
		{"timing, no match", `{"timing_allow_origins":"http://a.com"}`, []string{"Origin: http://b.com"},
			map[string]string{"Access-Control-Allow-Origin": "*", "Access-Control-Allow-Methods": "*",
				"Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5"}},
	} {
		_, got := run(build(t, tc.conf), "GET", tc.headers...)
		if tc.want == nil {
			tc.want = map[string]string{}
		}
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}

// TestPreflight: any OPTIONS request is answered 200 with an empty body in
// the rewrite phase (the upstream is not reached), with the headers.
func TestPreflight(t *testing.T) {
	p := build(t, `{"allow_origins":"http://a.com","allow_methods":"GET,POST"}`)
	c, got := run(p, "OPTIONS", "Origin: http://a.com")
	if c.Upstream || c.Status() != 200 || len(c.Body) != 0 {
		t.Fatalf("preflight: upstream %v, status %d, body %q", c.Upstream, c.Status(), c.Body)
	}
	if got["Access-Control-Allow-Origin"] != "http://a.com" || got["Access-Control-Allow-Methods"] != "GET,POST" {
		t.Fatalf("preflight headers %v", got)
	}
	if c, _ := run(p, "GET", "Origin: http://a.com"); !c.Upstream {
		t.Fatal("a GET did not go upstream")
	}
}

// TestVaryAdded: Vary: Origin is added beside the response's own (TEST 9's
// "Vary: Via, Origin"), not in its place.
func TestVaryAdded(t *testing.T) {
	p := build(t, `{"allow_origins":"http://a.com"}`)
	c := plugintest.NewCtx("GET", "/").WithHeader("Origin", "http://a.com")
	c.AddResponseHeader("Vary", []byte("Via"))
	plugintest.Run(p, c)
	if got := c.ResponseHeaderValues("Vary"); !cmp.Equal(got, []string{"Via", "Origin"}) {
		t.Fatalf("Vary %q", got)
	}
}

// TestMetadata: allow_origins_by_metadata allows the origins of the lists
// it names, from the plugin metadata (t/plugin/cors3.t), before
// allow_origins; a list the metadata lacks allows nothing.
func TestMetadata(t *testing.T) {
	env := plugins.NewLocalEnv()
	env.Metadata = plugins.NewSettings(map[string]json.RawMessage{Name: json.RawMessage(
		`{"allow_origins":{"key_1":"https://domain.com","key_2":"https://sub.domain.com,https://sub2.domain.com","key_3":"*"}}`)})
	base := map[string]string{"Access-Control-Allow-Methods": "*", "Access-Control-Allow-Headers": "*", "Access-Control-Max-Age": "5"}
	with := func(m map[string]string) map[string]string {
		out := map[string]string{}
		for k, v := range base {
			out[k] = v
		}
		for k, v := range m {
			out[k] = v
		}
		return out
	}
	for _, tc := range []struct {
		name, conf, origin string
		want               map[string]string
	}{
		{"first key", `{"allow_origins_by_metadata":["key_1"]}`, "https://domain.com", with(map[string]string{"Access-Control-Allow-Origin": "https://domain.com"})},
		{"not in the list", `{"allow_origins_by_metadata":["key_1"]}`, "https://other.com", map[string]string{}},
		{"second key", `{"allow_origins_by_metadata":["key_1","key_2"]}`, "https://sub2.domain.com", with(map[string]string{"Access-Control-Allow-Origin": "https://sub2.domain.com"})},
		{"a star list", `{"allow_origins_by_metadata":["key_3"]}`, "https://any.com", with(map[string]string{"Access-Control-Allow-Origin": "https://any.com"})},
		{"a missing key", `{"allow_origins_by_metadata":["nope"]}`, "https://domain.com", map[string]string{}},
		{"then allow_origins", `{"allow_origins_by_metadata":["key_1"],"allow_origins":"https://local.com"}`, "https://local.com",
			with(map[string]string{"Vary": "Origin", "Access-Control-Allow-Origin": "https://local.com"})},
	} {
		_, got := run(buildEnv(t, tc.conf, env), "GET", "Origin: "+tc.origin)
		if d := cmp.Diff(tc.want, got); d != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, d)
		}
	}
}
