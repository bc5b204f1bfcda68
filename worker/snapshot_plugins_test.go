package worker

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
)

// tinyPlugin is a test plugin: its instances remember the configuration
// they were built from and the Env they got; which phases they run in
// depends on the name (see tinyInstance's kinds).
type tinyPlugin struct{ name string }

func (tinyPlugin) Schema() []byte { return []byte(`{"type":"object"}`) }

func (tinyPlugin) Check(raw json.RawMessage) error {
	var m map[string]any
	return json.Unmarshal(raw, &m)
}

func (p tinyPlugin) Build(raw json.RawMessage, env plugins.Env) (plugins.Instance, error) {
	base := tinyBase{conf: string(raw), env: env}
	switch p.name {
	case "t-auth":
		return &tinyRewrite{base}, nil
	case "t-limit":
		return &tinyLimit{base}, nil
	case "t-log":
		return &tinyLog{base}, nil
	default:
		return &tinyAccess{base}, nil
	}
}

type tinyBase struct {
	conf string
	env  plugins.Env
}

func (b *tinyBase) base() *tinyBase { return b }

type tinyRewrite struct{ tinyBase }

func (*tinyRewrite) Rewrite(plugins.Ctx) {}

type tinyAccess struct{ tinyBase }

func (*tinyAccess) Access(plugins.Ctx) {}

type tinyLimit struct{ tinyBase }

func (*tinyLimit) Access(plugins.Ctx)       {}
func (*tinyLimit) HeaderFilter(plugins.Ctx) {}
func (*tinyLimit) Log(plugins.Ctx)          {}

type tinyLog struct{ tinyBase }

func (*tinyLog) Log(plugins.Ctx) {}

func tinyRegistry() *plugins.Registry {
	table := []plugins.Entry{{Name: "t-mock", Priority: 10900}, {Name: "t-auth", Priority: 2500},
		{Name: "t-limit", Priority: 1002}, {Name: "t-log", Priority: 500}}
	r := plugins.NewRegistry(table)
	for _, e := range table {
		r.Register(e.Name, tinyPlugin{e.Name})
	}
	return r
}

// phaseView is a built plugin set as names per phase and the configuration
// each plugin was built from.
type phaseView struct {
	Phases map[string][]string
	Confs  map[string]string
}

func viewPhases(t *testing.T, p *plugins.Phases, env plugins.Env) phaseView {
	t.Helper()
	v := phaseView{Phases: map[string][]string{}, Confs: map[string]string{}}
	for ph := plugins.Rewrite; ph < plugins.NumPhases; ph++ {
		if names := p.Names(ph); len(names) > 0 {
			v.Phases[ph.String()] = names
		}
	}
	for _, c := range p.Plugins {
		b := c.Instance.(interface{ base() *tinyBase }).base()
		// Upstreams is the snapshot's own (splitEnv), as Consumers.
		if e := b.env; e.Upstreams == nil {
			t.Errorf("%s built without the snapshot's upstreams", c.Name)
		} else if e.Upstreams = nil; e != env {
			t.Errorf("%s built with another Env", c.Name)
		}
		v.Confs[c.Name] = b.conf
	}
	return v
}

// TestCompilePhaseTables: compile merges a route's plugins over its
// plugin_config's over its service's (the nearer layer's whole
// configuration wins, as APISIX), builds them once with the worker's Env,
// and keeps them on the compiled route in phase tables in priority order;
// global rules are built too, one set each, in the Spec's order.
func TestCompilePhaseTables(t *testing.T) {
	svc, err := spec.DecodeService([]byte(`{"id":"s","plugins":{"t-log":{"from":"service"},"t-limit":{"from":"service"},"t-mock":{"from":"service"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r1, err := spec.DecodeRoute([]byte(`{"id":1,"uri":"/a","service_id":"s","plugin_config_id":"pc","plugins":{"t-auth":{"from":"route"}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := spec.DecodeRoute([]byte(`{"id":2,"uri":"/b","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r3, err := spec.DecodeRoute([]byte(`{"id":3,"uri":"/c","plugin_config_id":"pc","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{
		Routes: []*spec.Route{r1, r2, r3}, Services: []*spec.Service{svc},
		PluginConfigs: []*spec.PluginConfig{mustDecode(t, spec.DecodePluginConfig, `{"id":"pc","plugins":{"t-limit":{"from":"pc"},"t-auth":{"from":"pc"}}}`)},
		GlobalRules: []*spec.GlobalRule{
			mustDecode(t, spec.DecodeGlobalRule, `{"id":2,"plugins":{"t-log":{"g":2}}}`),
			mustDecode(t, spec.DecodeGlobalRule, `{"id":1,"plugins":{"t-auth":{"g":1},"t-mock":{"g":1}}}`),
		},
	}
	env := plugins.NewLocalEnv()
	snap, err := compile(s, router.HostURI, upstreamEnv{}, pluginSet{reg: tinyRegistry(), env: env}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]phaseView{}
	for _, rt := range snap.routes.flat() {
		got["route "+rt.id()] = viewPhases(t, &rt.plugins, env)
	}
	for i := range snap.globals {
		got["global "+string(rune('0'+i))] = viewPhases(t, &snap.globals[i], env)
	}
	want := map[string]phaseView{
		"route 1": {
			Phases: map[string][]string{
				"rewrite": {"t-auth"}, "access": {"t-mock", "t-limit"},
				"header_filter": {"t-limit"}, "log": {"t-limit", "t-log"},
			},
			Confs: map[string]string{
				"t-auth": `{"from":"route"}`, "t-limit": `{"from":"pc"}`,
				"t-log": `{"from":"service"}`, "t-mock": `{"from":"service"}`,
			},
		},
		"route 2": {Phases: map[string][]string{}, Confs: map[string]string{}},
		"route 3": {
			Phases: map[string][]string{"rewrite": {"t-auth"}, "access": {"t-limit"}, "header_filter": {"t-limit"}, "log": {"t-limit"}},
			Confs:  map[string]string{"t-auth": `{"from":"pc"}`, "t-limit": `{"from":"pc"}`},
		},
		"global 0": {Phases: map[string][]string{"log": {"t-log"}}, Confs: map[string]string{"t-log": `{"g":2}`}},
		"global 1": {
			Phases: map[string][]string{"rewrite": {"t-auth"}, "access": {"t-mock"}},
			Confs:  map[string]string{"t-auth": `{"g":1}`, "t-mock": `{"g":1}`},
		},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("phase tables (-want +got):\n%s", d)
	}
	// The execution order is the table's, whatever the layers.
	var order []string
	for _, c := range snap.routes.at(0).plugins.Plugins {
		order = append(order, c.Name)
	}
	if d := cmp.Diff([]string{"t-mock", "t-auth", "t-limit", "t-log"}, order); d != "" {
		t.Fatalf("order (-want +got):\n%s", d)
	}
}

// TestCompileRefusesUnknownPluginsOfEveryLayer: a plugin the gateway does
// not have refuses the configuration wherever it is written: in a route's
// plugin_config, or in a global rule.
func TestCompileRefusesUnknownPluginsOfEveryLayer(t *testing.T) {
	r, err := spec.DecodeRoute([]byte(`{"id":1,"uri":"/a","plugin_config_id":"pc","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	_, err = Compile(&spec.Spec{Routes: []*spec.Route{r},
		PluginConfigs: []*spec.PluginConfig{mustDecode(t, spec.DecodePluginConfig, `{"id":"pc","plugins":{"from-plugin-config":{}}}`)}}, router.HostURI)
	if err == nil || err.Error() != "route 1: unknown plugin [from-plugin-config]" {
		t.Fatalf("plugin_config: err = %v", err)
	}
	_, err = Compile(&spec.Spec{Routes: []*spec.Route{r}}, router.HostURI)
	if err == nil || err.Error() != "route 1: plugin_config_id pc not found" {
		t.Fatalf("missing plugin_config: err = %v", err)
	}
	_, err = Compile(&spec.Spec{
		GlobalRules: []*spec.GlobalRule{mustDecode(t, spec.DecodeGlobalRule, `{"id":1,"plugins":{"from-global-rule":{}}}`)}}, router.HostURI)
	if err == nil || err.Error() != "global_rule 1: unknown plugin [from-global-rule]" {
		t.Fatalf("global rule: err = %v", err)
	}
}
