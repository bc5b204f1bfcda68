package trafficsplit

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func env() plugins.Env {
	e := plugins.NewLocalEnv()
	e.Upstreams = &plugintest.Upstreams{IDs: []string{"1", "2"}}
	return e
}

func build(t *testing.T, conf string) *plugins.Phases {
	t.Helper()
	ph, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, env())
	if err != nil {
		t.Fatal(err)
	}
	return &ph
}

// choose runs c through p: the upstream chosen ("" for the route's).
func choose(p *plugins.Phases, c *plugintest.Ctx) string {
	c.Reset()
	plugintest.Run(p, c)
	if c.Chosen == nil {
		return ""
	}
	return c.Chosen.(string)
}

// TestCheck: APISIX's refusals (t/plugin/traffic-split*.t), the schema's
// and the vars' and an inline upstream's, as the Admin API gives them.
func TestCheck(t *testing.T) {
	const pre = "failed to check the configuration of plugin traffic-split err: "
	for _, tc := range []struct{ conf, err string }{
		{`{}`, ""},
		{`{"rules":[]}`, ""},
		{`{"rules":[{"weighted_upstreams":[{"upstream_id":1,"weight":2},{"weight":1}]}]}`, ""},
		{`{"rules":[{"match":[{"vars":[["arg_name","==","jack"],["http_user-id",">","23"]]}],"weighted_upstreams":[{"upstream":{"name":"a","type":"roundrobin","nodes":{"127.0.0.1:1981":1},"timeout":{"connect":15,"send":15,"read":15}},"weight":2},{"weight":1}]}]}`, ""},
		{`{"rules":[{"match":[{"vars":[["arg_name",123,"jack"]]}],"weighted_upstreams":[{"weight":1}]}]}`,
			pre + "failed to validate the 'vars' expression: invalid operator '123'"},
		{`{"rules":[{"weighted_upstreams":[{"weight":-1}]}]}`,
			pre + `property "rules" validation failed: failed to validate item 1: property "weighted_upstreams" validation failed: failed to validate item 1: property "weight" validation failed: expected -1 to be at least 0`},
		{`{"rules":[{"weighted_upstreams":[]}]}`,
			pre + `property "rules" validation failed: failed to validate item 1: property "weighted_upstreams" validation failed: expect array to have at least 1 items`},
		{`{"rules":[{"weighted_upstreams":[{"upstream":{"nodes":{"127.0.0.1:1981":1},"type":"nope"}}]}]}`,
			pre + `property "rules" validation failed: failed to validate item 1: property "weighted_upstreams" validation failed: failed to validate item 1: property "upstream" validation failed: `},
		{`{"rules":[{"weighted_upstreams":[{"upstream":{"nodes":{"127.0.0.1:1981":1},"pass_host":"rewrite"}}]}]}`,
			pre + "`upstream_host` can't be empty when `pass_host` is `rewrite`"},
		{`{"rules":[{"match":"x"}]}`, pre + `property "rules" validation failed: failed to validate item 1: property "match" validation failed: `},
	} {
		err := plugins.Check(Name, json.RawMessage(tc.conf))
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.conf, err)
		case tc.err != "" && (err == nil || !strings.HasPrefix(err.Error(), tc.err)):
			t.Errorf("%s: err = %v, want %q…", tc.conf, err, tc.err)
		}
	}
	if got := build(t, `{}`).Names(plugins.Access); !cmp.Equal(got, []string{Name}) {
		t.Errorf("access phase: %v", got)
	}
}

// TestDistribution: the weights 1:2:3 (the route's own of weight 1, an
// upstream_id of 2 and an inline upstream of 3), interleaved as
// lua-resty-balancer's roundrobin does: exactly in proportion over each
// round of 6 requests; a weight of 0 is never chosen.
func TestDistribution(t *testing.T) {
	p := build(t, `{"rules":[{"weighted_upstreams":[
		{"weight":1},
		{"upstream_id":"1","weight":2},
		{"upstream":{"name":"inline","nodes":{"127.0.0.1:1981":1}},"weight":3},
		{"upstream_id":"2","weight":0}]}]}`)
	c := plugintest.NewCtx("GET", "/")
	var seq []string
	count := map[string]int{}
	for range 600 {
		u := choose(p, c)
		count[u]++
		if len(seq) < 6 {
			seq = append(seq, u)
		}
	}
	if want := map[string]int{"": 100, "1": 200, "inline": 300}; !cmp.Equal(count, want) {
		t.Errorf("counts %v, want %v", count, want)
	}
	if want := []string{"inline", "1", "inline", "", "1", "inline"}; !cmp.Equal(seq, want) {
		t.Errorf("first round %q, want %q", seq, want)
	}
	if c.Exited() || c.Upstream != true {
		t.Errorf("the request did not go on upstream")
	}

	// The default: the route's own upstream.
	p = build(t, `{"rules":[{}]}`)
	if u := choose(p, c); u != "" {
		t.Errorf("default weighted_upstreams chose %q", u)
	}
}

// TestMatch: the first rule whose match holds chooses (any match item,
// all its vars); a rule without match always does; none holding leaves
// the route's upstream (APISIX's TEST 9-13 shapes).
func TestMatch(t *testing.T) {
	p := build(t, `{"rules":[
		{"match":[{"vars":[["arg_name","==","jack"],["http_user-id",">",23]]},{"vars":[["http_apisix-key","~~","[a-z]+"]]}],
		 "weighted_upstreams":[{"upstream_id":"1"}]},
		{"match":[{"vars":[["uri","==","/two"]]}],
		 "weighted_upstreams":[{"upstream_id":"2"}]}]}`)
	for _, tc := range []struct {
		target string
		hdr    [][2]string
		want   string
	}{
		{"/?name=jack", [][2]string{{"user-id", "30"}}, "1"},
		{"/?name=jack", [][2]string{{"user-id", "20"}}, ""},
		{"/?name=rose", [][2]string{{"user-id", "30"}}, ""},
		{"/", [][2]string{{"apisix-key", "hello"}}, "1"},
		{"/", [][2]string{{"apisix-key", "123"}}, ""},
		{"/two", nil, "2"},
		{"/two?name=jack", [][2]string{{"user-id", "30"}}, "1"},
		{"/three", nil, ""},
	} {
		c := plugintest.NewCtx("GET", tc.target)
		for _, h := range tc.hdr {
			c.WithHeader(h[0], h[1])
		}
		c.WithVar("uri", strings.SplitN(tc.target, "?", 2)[0])
		if got := choose(p, c); got != tc.want {
			t.Errorf("%s %v: chose %q, want %q", tc.target, tc.hdr, got, tc.want)
		}
	}

	p = build(t, `{"rules":[{"match":[{"vars":[["arg_x","==","1"]]}],"weighted_upstreams":[{"upstream_id":"1"}]},{"weighted_upstreams":[{"upstream_id":"2"}]}]}`)
	if got := choose(p, plugintest.NewCtx("GET", "/")); got != "2" {
		t.Errorf("the rule without match: %q", got)
	}
}

// TestMissingUpstreamID: a rule naming an upstream_id the snapshot lacks
// answers 500, as APISIX, once the rules reach it; the Admin API stored
// it (APISIX does not check the id).
func TestMissingUpstreamID(t *testing.T) {
	p := build(t, `{"rules":[{"match":[{"vars":[["arg_x","==","1"]]}],"weighted_upstreams":[{"upstream_id":"1"}]},{"weighted_upstreams":[{"upstream_id":"invalid-id"}]}]}`)
	c := plugintest.NewCtx("GET", "/?x=1")
	if got := choose(p, c); got != "1" || c.Exited() {
		t.Errorf("the first rule: %q exited %v", got, c.Exited())
	}
	c = plugintest.NewCtx("GET", "/")
	choose(p, c)
	if c.ExitStatus() != 500 || string(c.Body) != "failed to fetch upstream info by upstream id: invalid-id" || c.Upstream {
		t.Errorf("the missing id: %d %q", c.ExitStatus(), c.Body)
	}
	// Without the snapshot's upstreams (NewLocalEnv's), an upstream
	// cannot be chosen: the build says so.
	_, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(`{"rules":[{"weighted_upstreams":[{"upstream_id":"1"}]}]}`)}, plugins.NewLocalEnv())
	if !errors.Is(err, ErrNoUpstreams) {
		t.Errorf("no Upstreams: %v", err)
	}
}
