package standalone

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"

	"github.com/google/go-cmp/cmp"
)

func env(m map[string]string) func(string) (string, bool) {
	return func(k string) (string, bool) { v, ok := m[k]; return v, ok }
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// summary reduces a Spec to what the tests compare: each object as the JSON
// it would be stored as.
func summary(t *testing.T, s *spec.Spec) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	add := func(kind string, v any) {
		b, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		out[kind] = append(out[kind], string(b))
	}
	for _, r := range s.Routes {
		add("routes", r)
	}
	for _, x := range s.Services {
		add("services", x)
	}
	for _, u := range s.Upstreams {
		add("upstreams", u)
	}
	for _, c := range s.Consumers {
		add("consumers", c)
	}
	for _, c := range s.PluginConfigs {
		add("plugin_configs", c)
	}
	for _, c := range s.GlobalRules {
		add("global_rules", c)
	}
	for _, c := range s.PluginMetadata {
		add("plugin_metadata", c)
	}
	return out
}

// The examples of APISIX's deployment-modes.md ("Standalone") load as
// APISIX loads them.
func TestLoadAPISIXExamples(t *testing.T) {
	tests := []struct {
		name string
		file string
		want map[string][]string
	}{
		{"single route", `
routes:
  -
    uri: /hello
    upstream:
        nodes:
            "127.0.0.1:1980": 1
        type: roundrobin
#END`, map[string][]string{"routes": {`{"id":"arr_1","uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`}}},
		{"two routes", `
routes:
  -
    uri: /hello
    upstream:
        nodes:
            "127.0.0.1:1980": 1
        type: roundrobin
  -
    uri: /hello2
    upstream:
        nodes:
            "127.0.0.1:1981": 1
        type: roundrobin
#END
`, map[string][]string{"routes": {
			`{"id":"arr_1","uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`,
			`{"id":"arr_2","uri":"/hello2","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1981":1}}}`,
		}}},
		{"route and service", `
routes:
    -
        uri: /hello
        service_id: 1
services:
    -
        id: 1
        upstream:
            nodes:
                "127.0.0.1:1980": 1
            type: roundrobin
#END`, map[string][]string{
			"routes":   {`{"id":"arr_1","uri":"/hello","service_id":1}`},
			"services": {`{"id":1,"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`},
		}},
		{"route and upstream", `
routes:
    -
        uri: /hello
        upstream_id: 1
upstreams:
    -
        id: 1
        nodes:
            "127.0.0.1:1980": 1
        type: roundrobin
#END`, map[string][]string{
			"routes":    {`{"id":"arr_1","uri":"/hello","upstream_id":1}`},
			"upstreams": {`{"id":1,"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}`},
		}},
		{"route, service and upstream", `
routes:
    -
        uri: /hello
        service_id: 1
services:
    -
        id: 1
        upstream_id: 2
upstreams:
    -
        id: 2
        nodes:
            "127.0.0.1:1980": 1
        type: roundrobin
#END`, map[string][]string{
			"routes":    {`{"id":"arr_1","uri":"/hello","service_id":1}`},
			"services":  {`{"id":1,"upstream_id":2}`},
			"upstreams": {`{"id":2,"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}`},
		}},
		{"global rule", `
global_rules:
    -
        id: 1
        plugins:
            response-rewrite:
                body: "hello\n"
#END`, map[string][]string{"global_rules": {`{"id":1,"plugins":{"response-rewrite":{"body":"hello\n"}}}`}}},
		{"consumer", `
consumers:
  - username: jwt
    plugins:
        jwt-auth:
            key: user-key
            secret: my-secret-key
#END`, map[string][]string{"consumers": {`{"username":"jwt","plugins":{"jwt-auth":{"key":"user-key","secret":"my-secret-key"}}}`}}},
		{"nodes array and plugin config", `
plugin_configs:
  - id: pc1
    plugins:
      limit-count: {count: 2, time_window: 60}
routes:
  - id: 7
    uris: [/a, /b/*]
    plugin_config_id: pc1
    upstream:
      nodes:
        - host: 127.0.0.1
          port: 1980
          weight: 1
        - host: "::1"
          weight: 2
          priority: -1
#END`, map[string][]string{
			"plugin_configs": {`{"id":"pc1","plugins":{"limit-count":{"count":2,"time_window":60}}}`},
			"routes":         {`{"id":7,"uris":["/a","/b/*"],"plugin_config_id":"pc1","upstream":{"nodes":[{"host":"127.0.0.1","port":1980,"weight":1},{"host":"::1","weight":2,"priority":-1}]}}`},
		}},
		{"plugin metadata", "plugin_metadata:\n  - id: prometheus\n    disabled_labels:\n      http_status: [node]\n#END", map[string][]string{
			"plugin_metadata": {`{"id":"prometheus","disabled_labels":{"http_status":["node"]}}`},
		}},
		{"empty file", "#END\n", map[string][]string{}},
		{"empty lists and unsupported empties", "routes: []\nssls: []\nplugin_metadata:\n#END", map[string][]string{}},
		{"end flag with trailing space", "routes:\n#END  \n\n", map[string][]string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := Parse([]byte(tc.file), "conf/apisix.yaml", env(nil))
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, summary(t, s)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if s.Hash == ([32]byte{}) {
				t.Error("Hash not set")
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	const okRoute = "routes:\n  - id: 1\n    uri: /a\n    upstream_id: 1\nupstreams:\n  - id: 1\n    nodes: {\"a:1\": 1}\n"
	tests := []struct {
		name string
		file string
		want string
		kind error
	}{
		{"no end flag", "routes: []\n", "apisix.yaml: missing valid end flag", ErrEndFlag},
		{"plugin metadata without a name", "plugin_metadata:\n  - disabled_labels: {}\n#END", "apisix.yaml: plugin_metadata[0]: missing plugin name (id)", ErrInvalid},
		{"plugin metadata twice", "plugin_metadata:\n  - id: prometheus\n  - id: prometheus\n#END", "apisix.yaml: plugin_metadata prometheus: duplicate id", ErrInvalid},
		{"end flag not at the end", "#END\nroutes: []\n", "apisix.yaml: missing valid end flag", ErrEndFlag},
		{"end flag too far", "routes: []\n#END           \n", "apisix.yaml: missing valid end flag", ErrEndFlag},
		{"half written", okRoute[:40], "apisix.yaml: missing valid end flag", ErrEndFlag},
		{"yaml syntax", "routes: [\n#END", "", ErrFormat},
		{"top level list", "- a\n#END", "apisix.yaml: want a mapping of resource lists at the top level", ErrFormat},
		{"routes not a list", "routes: {uri: /a}\n#END", "apisix.yaml: routes: want a list", ErrFormat},
		{"item not an object", "routes: [1]\n#END", "apisix.yaml: routes[0]: want an object", ErrFormat},
		{"unknown key", "route: []\n#END", "apisix.yaml: route: unknown key", ErrUnsupported},
		{"unsupported stream_routes", "stream_routes:\n  - server_port: 9100\n#END", "apisix.yaml: stream_routes: not supported yet", ErrUnsupported},
		{"invalid ssl", "ssls:\n  - sni: a.com\n#END", `apisix.yaml: ssls[0] (id arr_1): invalid configuration: value should match only one schema, but matches none`, ErrInvalid},
		{"invalid route", "routes:\n  - id: 1\n    uri: /a\n    upstream_id: 1\n  - id: 7\n    uri: /b\n    foo: 1\n    upstream_id: 1\nupstreams:\n  - id: 1\n    nodes: {\"a:1\": 1}\n#END",
			"apisix.yaml: routes[1] (id 7): invalid configuration: additional properties forbidden, found foo", ErrInvalid},
		{"invalid route without id", "routes:\n  - uri: /b\n    methods: [GETX]\n    upstream: {nodes: {\"a:1\": 1}}\n#END",
			`apisix.yaml: routes[0] (id arr_1): invalid configuration: property "methods" validation failed: failed to validate item 1: matches none of the enum values` +
				` (methods[0]: value "GETX", expected one of "GET", "POST", "PUT", "DELETE", "PATCH", "HEAD", "OPTIONS", "CONNECT", "TRACE", "PURGE")`, ErrInvalid},
		{"invalid upstream", "upstreams:\n  - id: u\n    nodes: {\"a:1\": 1}\n    pass_host: rewrite\n#END",
			"apisix.yaml: upstreams[0] (id u): `upstream_host` can't be empty when `pass_host` is `rewrite`", ErrInvalid},
		{"invalid vars", "routes:\n  - uri: /b\n    vars: [[arg_a, \"=\", \"1\"]]\n    upstream: {nodes: {\"a:1\": 1}}\n#END",
			`apisix.yaml: routes[0] (id arr_1): failed to validate the 'vars' expression: invalid operator '='`, ErrInvalid},
		{"missing upstream", "routes:\n  - id: 1\n    uri: /a\n    upstream_id: 9\n#END", "apisix.yaml: route 1: upstream_id 9 not found", ErrInvalid},
		{"missing service", "routes:\n  - uri: /a\n    service_id: s\n#END", "apisix.yaml: route arr_1: service_id s not found", ErrInvalid},
		{"duplicate ids", okRoute + "  - id: 1\n    nodes: {}\n#END", "apisix.yaml: upstream 1: duplicate id", ErrInvalid},
		{"consumer without username", "consumers:\n  - plugins: {}\n#END", `apisix.yaml: consumers[0]: invalid configuration: property "username" is required`, ErrInvalid},
		{"consumer bad username", "consumers:\n  - username: a b\n#END", `apisix.yaml: consumers[0] (username a b): invalid configuration: property "username" validation failed: failed to match pattern "^[a-zA-Z0-9_\\-]+$" with "a b"`, ErrInvalid},
		{"global rule without plugins", "global_rules:\n  - id: 1\n#END", `apisix.yaml: global_rules[0] (id 1): invalid configuration: property "plugins" is required`, ErrInvalid},
		{"plugin config without id", "plugin_configs:\n  - plugins: {}\n#END", `apisix.yaml: plugin_configs[0] (id arr_1): invalid configuration: property "id" is required`, ErrInvalid},
		{"bad node names node and value", "upstreams:\n  - id: u\n    nodes: {\"127.0.0.1:99999\": 1}\n#END",
			`apisix.yaml: upstreams[0] (id u): invalid configuration: property "nodes" validation failed: object matches none of the required (nodes["127.0.0.1:99999"]: node "127.0.0.1:99999": port 99999 out of range)`, ErrInvalid},
		{"plugin config extra field", "plugin_configs:\n  - id: pc\n    plugins: {}\n    foo: 1\n#END",
			`apisix.yaml: plugin_configs[0] (id pc): invalid configuration: additional properties forbidden, found foo`, ErrInvalid},
		{"unset variable", "routes:\n  - uri: ${{CG_NOPE}}\n    upstream_id: 1\n#END", "apisix.yaml: failed to handle configuration: can't find environment variable CG_NOPE", ErrInvalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.file), "conf/apisix.yaml", env(nil))
			if err == nil {
				t.Fatal("no error")
			}
			if tc.want != "" {
				if diff := cmp.Diff(tc.want, err.Error()); diff != "" {
					t.Errorf("(-want +got):\n%s", diff)
				}
			}
			if !errors.Is(err, tc.kind) {
				t.Errorf("error %v does not match %v", err, tc.kind)
			}
			var le *LoadError
			if !errors.As(err, &le) {
				t.Errorf("error is %T, want *LoadError", err)
			}
		})
	}
	// the spec error behind a LoadError is reachable
	_, err := Parse([]byte("routes:\n  - uri: /a\n    upstream_id: 9\n#END"), "apisix.yaml", env(nil))
	if !errors.Is(err, spec.ErrReference) {
		t.Errorf("%v does not unwrap to spec.ErrReference", err)
	}
}

func TestLoadEnv(t *testing.T) {
	file := `
routes:
  - id: ${{ROUTE_ID}}
    uri: "${{PREFIX:=/api}}/hello"
    upstream:
      nodes:
        "${{UP_HOST}}:${{UP_PORT}}": ${{WEIGHT:=1}}
      retries: "${{RETRIES}}"
#END`
	s, err := Parse([]byte(file), "apisix.yaml", env(map[string]string{"ROUTE_ID": "5", "UP_HOST": "10.0.0.1", "UP_PORT": "8080", "RETRIES": "2"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{"routes": {`{"id":5,"uri":"/api/hello","upstream":{"nodes":{"10.0.0.1:8080":1},"retries":2}}`}}
	if diff := cmp.Diff(want, summary(t, s)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_, err = Parse([]byte(file), "apisix.yaml", env(map[string]string{"ROUTE_ID": "5", "UP_HOST": "h", "RETRIES": "1"}))
	if diff := cmp.Diff("apisix.yaml: failed to handle configuration: can't find environment variable UP_PORT", errText(err)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if !errors.Is(err, spec.ErrEnv) {
		t.Errorf("%v does not unwrap to spec.ErrEnv", err)
	}
}

func TestLoadJSON(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "apisix.json")
	body := `{"routes":[{"id":1,"uri":"/hello","upstream_id":"u"}],"upstreams":[{"id":"u","nodes":{"127.0.0.1:${{PORT}}":1}}]}`
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := LoadEnv(path, env(map[string]string{"PORT": "1980"}))
	if err != nil {
		t.Fatal(err)
	}
	want := map[string][]string{
		"routes":    {`{"id":1,"uri":"/hello","upstream_id":"u"}`},
		"upstreams": {`{"id":"u","nodes":{"127.0.0.1:1980":1}}`},
	}
	if diff := cmp.Diff(want, summary(t, s)); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	if err := os.WriteFile(path, []byte(`{"routes":[`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(path); !errors.Is(err, ErrFormat) || !strings.HasPrefix(errText(err), "apisix.json: ") {
		t.Errorf("bad JSON: %v", err)
	}
	if _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, ErrFormat) || !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}

// The files in conf/ load: config.yaml, which `make run` uses (a
// traditional node on its embedded etcd, the Admin API on loopback with
// the key APISIX's benchmark scripts send), and apisix.yaml, the same
// example route for a data plane.
func TestConfFiles(t *testing.T) {
	c, warns, err := nodeconf.Load("../../conf/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if len(warns) != 0 {
		t.Errorf("conf/config.yaml warnings: %v", warns)
	}
	if p := c.Provider(); p.Kind != "etcd" || c.Deployment.Etcd.External {
		t.Errorf("Provider = %+v, external etcd %v; want the embedded etcd", p, c.Deployment.Etcd.External)
	}
	got := []any{c.APISIX.NodeListen, c.NginxConfig.WorkerProcesses, c.Deployment.Role, c.APISIX.EnableAdmin,
		c.Deployment.Admin.AdminListen.Addr(), c.Deployment.Admin.AdminKey}
	want := []any{[]nodeconf.Listen{{Port: 9080}}, 1, "traditional", true,
		"127.0.0.1:9180", []nodeconf.AdminKey{{Name: "admin", Key: "edd1c9f034335f136f87ad84b625c8f1", Role: "admin"}}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("config.yaml (-want +got):\n%s", diff)
	}
	p := nodeconf.Provider{Kind: "yaml", File: filepath.Join("../../conf", "apisix.yaml")}
	s, err := Load(p.File)
	if err != nil {
		t.Fatal(err)
	}
	wantSpec := map[string][]string{"routes": {`{"id":1,"uri":"/hello","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`}}
	if diff := cmp.Diff(wantSpec, summary(t, s)); diff != "" {
		t.Errorf("apisix.yaml (-want +got):\n%s", diff)
	}
}
