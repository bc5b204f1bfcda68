package worker

import (
	"encoding/json"
	"sync/atomic"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/control"
	"coregate/worker/router"
)

// countingPlugin counts the checks and builds of its configurations, and
// keeps the configuration it last built.
type countingPlugin struct {
	checks, builds atomic.Int64
	last           atomic.Value // string
}

func (*countingPlugin) Schema() []byte {
	return []byte(`{"type":"object","properties":{"v":{"type":"string"}}}`)
}

func (p *countingPlugin) Check(json.RawMessage) error { p.checks.Add(1); return nil }

func (p *countingPlugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	p.builds.Add(1)
	p.last.Store(string(raw))
	return &tinyAccess{tinyBase{conf: string(raw)}}, nil
}

func countingRegistry() (*plugins.Registry, *countingPlugin) {
	reg := plugins.NewRegistry([]plugins.Entry{{Name: "t-count", Priority: 1}})
	p := &countingPlugin{}
	reg.Register("t-count", p)
	return reg, p
}

// countingSpec is a route, a plugin config and a global rule, each
// configuring t-count with v set to tag and its own letter.
func countingSpec(t *testing.T, tag string) *spec.Spec {
	r := mustDecode(t, spec.DecodeRoute, `{"id":1,"uri":"/a","plugin_config_id":"pc","plugins":{"t-count":{"v":"r`+tag+`"}}}`)
	r2 := mustDecode(t, spec.DecodeRoute, `{"id":2,"uri":"/b","plugin_config_id":"pc","plugins":{}}`)
	s := &spec.Spec{Routes: []*spec.Route{r, r2},
		PluginConfigs: []*spec.PluginConfig{mustDecode(t, spec.DecodePluginConfig, `{"id":"pc","plugins":{"t-count":{"v":"p`+tag+`"}}}`)},
		GlobalRules:   []*spec.GlobalRule{mustDecode(t, spec.DecodeGlobalRule, `{"id":1,"plugins":{"t-count":{"v":"g`+tag+`"}}}`)},
	}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestCompileChecksOnce: a Spec its supervisor marked checked by a
// registry of the worker's fingerprint is built without a check of its
// configurations, after the mark crossed the control protocol (Config and
// Delta); one not marked, or marked by another registry, is checked as it
// is built, each configuration once; a configuration holding a reference
// is checked whatever the mark, as it resolves in the worker.
func TestCompileChecksOnce(t *testing.T) {
	compileWith := func(t *testing.T, reg *plugins.Registry, s *spec.Spec) {
		t.Helper()
		if _, err := compile(s, router.HostURI, upstreamEnv{}, pluginSet{reg: reg, env: plugins.NewLocalEnv()}, nil, nil); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("marked", func(t *testing.T) {
		reg, p := countingRegistry()
		s := countingSpec(t, "1")
		s.SetHash()
		s.Checked = reg.Fingerprint()
		payload, err := control.EncodeSpec(s)
		if err != nil {
			t.Fatal(err)
		}
		got, err := control.DecodeSpec(payload, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got.Checked != s.Checked {
			t.Fatalf("the mark did not cross the Config frame: %x", got.Checked)
		}
		compileWith(t, reg, got)
		// The global rule, route 1 (its own over the plugin config's) and
		// route 2 (the plugin config's).
		if c, b := p.checks.Load(), p.builds.Load(); c != 0 || b != 3 {
			t.Errorf("checks %d, builds %d; want 0, 3", c, b)
		}
		next := countingSpec(t, "2")
		next.Routes[1] = got.Routes[1]
		next.SetHash()
		next.Checked = s.Checked
		d, ok, err := control.EncodeDelta(got, next)
		if err != nil || !ok {
			t.Fatalf("delta: %v %v", ok, err)
		}
		got2, err := control.DecodeDelta(d, got, nil)
		if err != nil {
			t.Fatal(err)
		}
		if got2.Checked != s.Checked {
			t.Fatalf("the mark did not cross the Delta frame: %x", got2.Checked)
		}
		compileWith(t, reg, got2)
		if c := p.checks.Load(); c != 0 {
			t.Errorf("checks %d after the delta; want 0", c)
		}
	})
	t.Run("unmarked", func(t *testing.T) {
		reg, p := countingRegistry()
		compileWith(t, reg, countingSpec(t, "1"))
		// Three configurations, route 1's and the plugin config's built
		// twice (routes 1 and 2): each checked once.
		if c, b := p.checks.Load(), p.builds.Load(); c != 3 || b != 3 {
			t.Errorf("checks %d, builds %d; want 3, 3", c, b)
		}
		compileWith(t, reg, countingSpec(t, "1"))
		if c := p.checks.Load(); c != 3 {
			t.Errorf("checks %d after a build of the same configurations; want 3", c)
		}
	})
	t.Run("another registry's mark", func(t *testing.T) {
		reg, p := countingRegistry()
		s := countingSpec(t, "1")
		s.Checked = [32]byte{1}
		compileWith(t, reg, s)
		if c := p.checks.Load(); c != 3 {
			t.Errorf("checks %d; want 3", c)
		}
	})
	t.Run("reference", func(t *testing.T) {
		t.Setenv("COREGATE_CHECKED_TEST", "resolved")
		reg, p := countingRegistry()
		s := countingSpec(t, "1")
		s.Routes[0] = mustDecode(t, spec.DecodeRoute, `{"id":1,"uri":"/a","plugins":{"t-count":{"v":"$env://COREGATE_CHECKED_TEST"}}}`)
		s.Checked = reg.Fingerprint()
		compileWith(t, reg, s)
		if c := p.checks.Load(); c != 1 {
			t.Errorf("checks %d; want 1, the configuration with a reference", c)
		}
		if b := p.builds.Load(); b != 3 {
			t.Errorf("builds %d; want 3", b)
		}
		snap, err := compile(s, router.HostURI, upstreamEnv{}, pluginSet{reg: reg, env: plugins.NewLocalEnv()}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		var conf string
		for _, rt := range snap.routes.flat() {
			if rt.id() == "1" {
				conf = rt.plugins.Plugins[0].Instance.(*tinyAccess).conf
			}
		}
		if conf != `{"v":"resolved"}` {
			t.Errorf("route 1 built from %s, want the reference resolved", conf)
		}
	})
}
