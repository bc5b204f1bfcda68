package nodeconf

import (
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestTemplate: the config.yaml coregate init writes has every key the
// loader reads (Keys: a key added to the loader and not to settings
// fails here), loads without a warning, and holds the defaults: it
// loads as an empty config.yaml does, plugin_attr.prometheus written out.
func TestTemplate(t *testing.T) {
	tmpl := Template()
	c, warns, err := Parse(tmpl, "conf/config.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, tmpl)
	}
	if len(warns) != 0 {
		t.Errorf("warnings: %q", warns)
	}
	if diff := cmp.Diff(Default(), c, cmp.FilterPath(func(p cmp.Path) bool {
		return p.String() == "PluginAttr"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("the template's config (-defaults +template):\n%s", diff)
	}
	if len(c.PluginAttr) != 1 || c.PluginAttr["prometheus"] == nil {
		t.Errorf("plugin_attr: %v, want prometheus only", c.PluginAttr)
	}

	var keys []string
	for _, s := range settings {
		keys = append(keys, s.key)
	}
	// plugin_attr is written as plugin_attr.prometheus's keys.
	want := slices.DeleteFunc(Keys(), func(k string) bool { return k == "plugin_attr" })
	slices.Sort(keys)
	if diff := cmp.Diff(want, keys); diff != "" {
		t.Errorf("the template's keys (-read by the loader +in the template):\n%s", diff)
	}
	if len(Keys()) < 80 {
		t.Errorf("Keys lists %d keys: the loader's sections were not walked", len(Keys()))
	}
	text := string(tmpl)
	for _, s := range settings {
		leaf := s.key[strings.LastIndexByte(s.key, '.')+1:]
		prefix := "\n" + strings.Repeat("  ", strings.Count(s.key, "."))
		if s.off {
			prefix += "# "
		}
		if !strings.Contains(text, prefix+leaf+":") {
			t.Errorf("%s: no %q line in the template", s.key, prefix[1:]+leaf+":")
		}
	}
}

// TestTemplateCommentedKeys: each key the template leaves commented out,
// written with the template's example value, is read (not an unknown
// key), or refused by an error naming it.
func TestTemplateCommentedKeys(t *testing.T) {
	for _, s := range settings {
		if !s.off {
			continue
		}
		path := strings.Split(s.key, ".")
		var b strings.Builder
		for i, p := range path[:len(path)-1] {
			b.WriteString(strings.Repeat("  ", i) + p + ":\n")
		}
		in := strings.Repeat("  ", len(path)-1)
		lines := strings.Split(string(Template()), "\n")
		for i, l := range lines {
			if strings.HasPrefix(l, in+"# "+path[len(path)-1]+":") {
				b.WriteString(in + strings.TrimPrefix(l, in+"# ") + "\n")
				for _, more := range lines[i+1:] {
					if !strings.HasPrefix(more, in+"#   ") {
						break
					}
					b.WriteString(in + strings.TrimPrefix(more, in+"# ") + "\n")
				}
				break
			}
		}
		if !strings.Contains(b.String(), "\n"+in+path[len(path)-1]+":") {
			t.Errorf("%s: not found commented out in the template", s.key)
			continue
		}
		_, warns, err := Parse([]byte(b.String()), "conf/config.yaml")
		if err != nil && !strings.Contains(err.Error(), s.key) {
			t.Errorf("%s, uncommented:\n%s\n%v, which does not name it", s.key, b.String(), err)
		}
		for _, w := range warns {
			if strings.Contains(w, ": unknown key ") {
				t.Errorf("%s, uncommented:\n%s\nwarns %q", s.key, b.String(), w)
			}
		}
	}
}

// TestRender: a config.yaml setting keys the template writes and keys it
// comments out comes back from Render as a config.yaml that loads to the
// same configuration; its secrets are written "<hidden>".
func TestRender(t *testing.T) {
	src := `apisix:
  node_listen:
    - ip: 127.0.0.1
      port: 8080
  id: node-7
  dns_resolver: [1.1.1.1]
  ssl:
    enable: false
    fallback_sni: a.example.com
nginx_config:
  worker_processes: 3
  http:
    keepalive_timeout: 75s
    client_max_body_size: 1m
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
  etcd:
    host: [http://127.0.0.1:2379]
    watch_timeout: 20
discovery:
  dns:
    servers: [127.0.0.1:8600]
plugin_attr:
  prometheus:
    export_addr:
      port: 9099
    default_buckets: [5, 50]
    metrics:
      http_status:
        extra_labels:
          - upstream_addr: $upstream_addr
`
	c, _, err := Parse([]byte(src), "conf/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out := Render(c)
	back, _, err := Parse(out, "conf/config.yaml")
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	if diff := cmp.Diff(c, back, cmp.FilterPath(func(p cmp.Path) bool {
		return p.String() == "PluginAttr"
	}, cmp.Ignore())); diff != "" {
		t.Errorf("Render's config.yaml loads otherwise (-config +rendered):\n%s\n%s", diff, out)
	}

	c, _, err = Parse([]byte("deployment:\n  etcd:\n    host: [https://etcd:2379]\n    password: p4ss\n  admin:\n    admin_key:\n      - name: admin\n        key: k3y-of-mine\n        role: admin\n"+
		"apisix:\n  data_encryption:\n    keyring: [abcdefghijklmnop]\n"), "conf/config.yaml")
	if err != nil {
		t.Fatal(err)
	}
	out = Render(c)
	for _, secret := range []string{"p4ss", "k3y-of-mine", "abcdefghijklmnop"} {
		if strings.Contains(string(out), secret) {
			t.Errorf("Render shows %q:\n%s", secret, out)
		}
	}
	if n := strings.Count(string(out), hiddenValue); n != 3 {
		t.Errorf("%d values hidden, want 3:\n%s", n, out)
	}
}
