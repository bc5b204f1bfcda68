package worker

import (
	"fmt"
	"strings"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	_ "coregate/plugins/all"
	"coregate/worker/control"
	"coregate/worker/router"
)

// TestCompilePluginListAsMap: a route whose plugins a worker decoded as
// a list (control, spec.Route.CompactPlugins) builds the plugins, in the
// same order, and the consumers' variants that the same route in the
// written form, a map, builds: plugins of its own only, over a service's,
// over a plugin config's, and with an authentication plugin and
// consumers.
func TestCompilePluginListAsMap(t *testing.T) {
	s := pluginSpec(t, nil, nil, []string{`{"username":"jack","plugins":{"key-auth":{"key":"k1"},"proxy-rewrite":{"uri":"/jack"}}}`}, nil)
	for _, js := range []string{
		`{"id":"own","uri":"/own","upstream_id":"u","plugins":{"proxy-rewrite":{"headers":{"set":{"X-A":"1"}}},"response-rewrite":{"headers":{"set":{"X-R":"own"}}}}}`,
		`{"id":"svc","uri":"/svc","service_id":"s","plugins":{"response-rewrite":{"headers":{"set":{"X-R":"svc"}}}}}`,
		`{"id":"pc","uri":"/pc","upstream_id":"u","plugin_config_id":"pc","plugins":{"proxy-rewrite":{"uri":"/up"}}}`,
		`{"id":"auth","uri":"/auth","upstream_id":"u","plugins":{"key-auth":{},"proxy-rewrite":{"uri":"/up"}}}`,
		`{"id":"none","uri":"/none","upstream_id":"u"}`,
	} {
		s.Routes = append(s.Routes, mustDecode(t, spec.DecodeRoute, js))
	}
	sv := mustDecode(t, spec.DecodeService, `{"id":"s","plugins":{"prometheus":{}},"upstream":{"nodes":{"127.0.0.1:1981":2}}}`)
	u := mustDecode(t, spec.DecodeUpstream, `{"id":"u","nodes":{"127.0.0.1:1980":1}}`)
	s.Services, s.Upstreams = []*spec.Service{sv}, []*spec.Upstream{u}
	s.PluginConfigs = []*spec.PluginConfig{mustDecode(t, spec.DecodePluginConfig, `{"id":"pc","plugins":{"limit-count":{"count":2,"time_window":60}}}`)}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	s.SetHash()
	payload, err := control.EncodeSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	decoded, err := control.DecodeSpec(payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range decoded.Routes {
		if r.Plugins != nil || (r.ID.String() != "none") != (r.PluginList != nil) {
			t.Fatalf("route %s decoded: plugins %v, list %v; want a list only", r.ID, r.Plugins, r.PluginList)
		}
	}
	built := func(s *spec.Spec) map[string]string {
		ps := pluginSet{reg: plugins.Default, env: plugins.NewLocalEnv()}
		snap, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, rt := range snap.routes.flat() {
			var b strings.Builder
			for _, c := range rt.plugins.Plugins {
				fmt.Fprintf(&b, "%s(%T) ", c.Name, c.Instance)
			}
			for cons, v := range rt.about.byConsumer {
				fmt.Fprintf(&b, "| %s:", cons.Username)
				for _, c := range v.phases.Plugins {
					fmt.Fprintf(&b, " %s", c.Name)
				}
			}
			out[string(rt.id())] = b.String()
		}
		return out
	}
	want, got := built(s), built(decoded)
	if len(want) != 5 || !strings.Contains(want["auth"], "| jack: ") || !strings.Contains(want["svc"], "prometheus") || !strings.Contains(want["pc"], "limit-count") {
		t.Fatalf("the map form built %q", want)
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("route %s: from the list %q, from the map %q", id, got[id], w)
		}
	}
}
