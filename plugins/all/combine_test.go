package all

import (
	"encoding/json"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// build makes the phases of one plugins object with the consumer jack
// (key "k1").
func build(t testing.TB, conf string) plugins.Phases {
	t.Helper()
	x, err := plugins.Default.IndexConsumers([]*plugins.Consumer{{Username: "jack",
		Plugins: map[string]json.RawMessage{"key-auth": json.RawMessage(`{"key":"k1"}`)}}}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal([]byte(conf), &m); err != nil {
		t.Fatal(err)
	}
	env := plugins.NewLocalEnv()
	env.Consumers = x
	p, err := plugins.Default.BuildPhases(m, env)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestKeyAuthHiddenQueryThroughProxyRewrite: key-auth (2500) takes the
// query key out of the arguments and proxy-rewrite (1008), which rebuilds
// the target after it, appends the arguments as key-auth left them: the
// key does not come back, as in APISIX, where proxy-rewrite reads the
// ngx.var.args key-auth edited.
func TestKeyAuthHiddenQueryThroughProxyRewrite(t *testing.T) {
	for _, tc := range []struct{ name, conf, target, want string }{
		{"uri", `{"key-auth":{"hide_credentials":true},"proxy-rewrite":{"uri":"/new"}}`,
			"/old?a=1&apikey=k1&b=2", "/new?a=1&b=2"},
		{"uri with a query", `{"key-auth":{"hide_credentials":true},"proxy-rewrite":{"uri":"/new?x=1"}}`,
			"/old?apikey=k1&b=2", "/new?x=1&b=2"},
		{"regex_uri", `{"key-auth":{"hide_credentials":true},"proxy-rewrite":{"regex_uri":["^/old/(.*)","/n/$1"]}}`,
			"/old/p?apikey=k1", "/n/p"},
		{"headers only", `{"key-auth":{"hide_credentials":true},"proxy-rewrite":{"headers":{"set":{"X-A":"$arg_apikey|$args"}}}}`,
			"/p?apikey=k1&c=3", "/p?c=3"},
		{"not hidden", `{"key-auth":{},"proxy-rewrite":{"uri":"/new"}}`,
			"/old?apikey=k1&b=2", "/new?apikey=k1&b=2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := build(t, tc.conf)
			c := plugintest.NewCtx("GET", tc.target)
			plugintest.Run(&p, c)
			if c.Status() != 200 || c.Consumer() == nil {
				t.Fatalf("status %d, consumer %v", c.Status(), c.Consumer())
			}
			if got := string(c.UpstreamURI); got != tc.want {
				t.Fatalf("upstream target %q, want %q", got, tc.want)
			}
		})
	}
	// The header template saw the arguments key-auth left.
	p := build(t, `{"key-auth":{"hide_credentials":true},"proxy-rewrite":{"headers":{"set":{"X-A":"$arg_apikey|$args"}}}}`)
	c := plugintest.NewCtx("GET", "/p?apikey=k1&c=3")
	plugintest.Run(&p, c)
	if got := string(c.UpstreamHeader("X-A")); got != "|c=3" {
		t.Fatalf("X-A %q, want %q", got, "|c=3")
	}
}
