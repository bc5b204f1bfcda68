package worker

import (
	"encoding/json"
	"testing"

	"coregate/admin/spec"
	_ "coregate/plugins/all"
	"coregate/worker/router"
)

// TestCompileLeavesTheSpecAlone: compiling a configuration changes none
// of its objects. A worker builds each configuration from the objects of
// the one before that did not change (control.DecodeDelta), so an object
// a build modified would carry the change into the next.
func TestCompileLeavesTheSpecAlone(t *testing.T) {
	s := pluginSpec(t, nil, []string{`{"id":"g","plugins":{"prometheus":{}}}`},
		[]string{`{"username":"jack","plugins":{"key-auth":{"key":"k1"}}}`},
		[]string{`{"id":"jack/credentials/c1","plugins":{"key-auth":{"key":"k2"}}}`})
	for _, js := range []string{
		`{"id":1,"uri":"/a","service_id":"s","plugin_config_id":"pc","vars":[["arg_x","==","1"]],` +
			`"plugins":{"limit-count":{"count":2,"time_window":60},"proxy-rewrite":{"uri":"/up","headers":{"set":{"X-A":"$uri"}}}}}`,
		`{"id":"r2","uris":["/b","/c*"],"hosts":["*.a.com"],"methods":["GET"],"upstream_id":"u",` +
			`"plugins":{"key-auth":{"hide_credentials":true},"mocking":{"response_example":"hi"}}}`,
		`{"id":"r3","uri":"/d","priority":3,"upstream":{"nodes":[{"host":"::1","port":1980,"weight":2}],"timeout":{"connect":1,"send":2,"read":3},"pass_host":"rewrite","upstream_host":"x"}}`,
	} {
		r, err := spec.DecodeRoute([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		s.Routes = append(s.Routes, r)
	}
	sv, err := spec.DecodeService([]byte(`{"id":"s","plugins":{"prometheus":{}},"upstream":{"nodes":{"127.0.0.1:1981":2},"keepalive_pool":{"size":7}}}`))
	if err != nil {
		t.Fatal(err)
	}
	u, err := spec.DecodeUpstream([]byte(`{"id":"u","nodes":{"127.0.0.1:1980":1},"retries":2}`))
	if err != nil {
		t.Fatal(err)
	}
	s.Services, s.Upstreams = []*spec.Service{sv}, []*spec.Upstream{u}
	s.PluginConfigs = []*spec.PluginConfig{mustDecode(t, spec.DecodePluginConfig, `{"id":"pc","plugins":{"key-auth":{}}}`)}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	before, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	w := New(Config{Listen: []string{"127.0.0.1:0"}})
	for range 2 {
		if _, err := compile(s, router.HostURI, upstreamEnv{}, pluginSet{env: w.cfg.Plugins}, nil, nil); err != nil {
			t.Fatal(err)
		}
		after, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if string(after) != string(before) {
			t.Fatalf("compile changed the Spec:\nbefore %s\nafter  %s", before, after)
		}
	}
}
