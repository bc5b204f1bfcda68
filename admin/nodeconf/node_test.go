package nodeconf

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/keyring"
)

func parseNode(t *testing.T, src string) (*Config, []string, error) {
	t.Helper()
	c, warns, err := Parse([]byte(src), "conf/config.yaml")
	for i, w := range warns {
		// What the warnings say of the keys; TestNodeConfigErrorLines
		// checks their "file:line: ".
		rest, ok := strings.CutPrefix(withoutLine(w), "conf/config.yaml: ")
		if !ok {
			t.Errorf("warning %q does not name the file", w)
		}
		warns[i] = rest
	}
	return c, warns, err
}

func TestNodeConfigDefaults(t *testing.T) {
	for _, src := range []string{"", "# only a comment\n", "apisix:\n"} {
		c, warns, err := parseNode(t, src)
		if err != nil {
			t.Fatalf("%q: %v", src, err)
		}
		if len(warns) != 0 {
			t.Errorf("%q: warnings %v", src, warns)
		}
		if diff := cmp.Diff(Default(), c); diff != "" {
			t.Errorf("%q: defaults (-want +got):\n%s", src, diff)
		}
	}
	c := Default()
	checks := []struct {
		name      string
		got, want any
	}{
		{"node_listen", c.APISIX.NodeListen, []Listen{{Port: 9080}}},
		{"router", c.APISIX.RouterHTTP, "radixtree_host_uri"},
		{"worker_processes auto", c.NginxConfig.WorkerProcesses, 0},
		{"worker_connections", c.NginxConfig.WorkerConnections, 10620},
		{"keepalive_timeout", c.NginxConfig.HTTP.KeepaliveTimeout, 60 * time.Second},
		{"keepalive_requests", c.NginxConfig.HTTP.KeepaliveRequests, 1000},
		{"keepalive_time", c.NginxConfig.HTTP.KeepaliveTime, time.Hour},
		{"send_timeout", c.NginxConfig.HTTP.SendTimeout, 10 * time.Second},
		{"upstream keepalive", c.NginxConfig.HTTP.Upstream, NginxUpstream{320, 1000, 60 * time.Second}},
		{"role", c.Deployment.Role, "traditional"},
		{"provider", c.Provider(), Provider{Kind: "etcd"}},
		{"admin listen", c.Deployment.Admin.AdminListen.Addr(), "0.0.0.0:9180"},
		{"etcd", c.Deployment.Etcd.Host, []string{"http://127.0.0.1:2379"}},
		{"etcd embedded", c.Deployment.Etcd.External, false},
		{"server header", c.ServerHeader("3.18.0"), "APISIX/3.18.0"},
		{"workers", c.WorkerCount(), runtime.NumCPU()},
		{"plugins", len(c.Plugins) > 50, true},
	}
	for _, ck := range checks {
		if diff := cmp.Diff(ck.want, ck.got); diff != "" {
			t.Errorf("default %s (-want +got):\n%s", ck.name, diff)
		}
	}
}

func TestNodeConfigKeys(t *testing.T) {
	src := `
apisix:
  node_listen:
    - 9080
    - ip: 127.0.0.1
      port: 9081
    - port: 9082
      enable_http2: true
  enable_server_tokens: false
  router:
    http: radixtree_uri
  enable_admin: false
  enable_control: false
  show_upstream_status_in_response_header: true
  normalize_uri_like_servlet: true
  pid_file: /run/coregate.pid
  ssl:
    ssl_trusted_certificate: system, /etc/coregate/ca.pem
    listen:
      - port: 8443
      - ip: 127.0.0.1
        port: 8444
    ssl_protocols: TLSv1.3
    ssl_ciphers: ECDHE-ECDSA-AES128-GCM-SHA256
    ssl_session_tickets: true
    fallback_sni: a.example.com
  data_encryption:
    enable_encrypt_fields: false
    keyring:
      - 0123456789abcdef0123456789abcdef
      - qeddd145sfvddff3
  lru:
    secret:
      ttl: 120
      neg_ttl: 10
nginx_config:
  worker_processes: 4
  error_log_level: info
  event:
    worker_connections: 2048
  http:
    enable_access_log: false
    keepalive_timeout: 75s
    keepalive_requests: 50
    keepalive_time: 10m
    client_header_timeout: 30
    client_body_timeout: 1m
    send_timeout: 500ms
    client_max_body_size: 1m
    real_ip_header: X-Forwarded-For
    real_ip_from: []
    underscores_in_headers: "on"
    upstream:
      keepalive: 64
      keepalive_requests: 100
      keepalive_timeout: 30s
deployment:
  role: traditional
  role_traditional:
    config_provider: yaml
  admin:
    admin_key_required: false
    admin_key:
      - name: admin
        key: edd1c9f034335f136f87ad84b625c8f1
        role: admin
      - name: viewer
        key: 4054f7cf07e344346cd3f287985e76a2
        role: viewer
    enable_admin_cors: false
    allow_admin: [0.0.0.0/0]
    admin_listen:
      ip: 127.0.0.1
      port: 19180
  etcd:
    host: http://etcd:2379
    prefix: /gw
    timeout: 5
    user: root
    password: secret
    tls:
      verify: false
plugins:
  - limit-count
  - prometheus
plugin_attr:
  prometheus:
    export_addr:
      ip: 0.0.0.0
      port: 9092
`
	c, warns, err := parseNode(t, src)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"not supported yet: apisix.node_listen[2].enable_http2"}, warns); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	want := Default()
	want.Dir = "conf"
	want.APISIX = APISIXConfig{
		NodeListen:                         []Listen{{Port: 9080}, {IP: "127.0.0.1", Port: 9081}, {Port: 9082}},
		RouterHTTP:                         "radixtree_uri",
		ShowUpstreamStatusInResponseHeader: true,
		NormalizeURILikeServlet:            true,
		PIDFile:                            "/run/coregate.pid",
		Control:                            Listen{IP: "127.0.0.1", Port: 9090},
		SSLTrustedCertificate:              "system, /etc/coregate/ca.pem",
		ResolverTimeout:                    5 * time.Second,
		SSL: SSL{
			Enable:         true,
			Listen:         []Listen{{Port: 8443}, {IP: "127.0.0.1", Port: 8444}},
			Protocols:      "TLSv1.3",
			Ciphers:        "ECDHE-ECDSA-AES128-GCM-SHA256",
			SessionTickets: true,
			FallbackSNI:    "a.example.com",
		},
		DataEncryption: DataEncryption{Keyring: mustKeyring(t, "0123456789abcdef0123456789abcdef", "qeddd145sfvddff3")},
		SecretTTL:      120 * time.Second,
		SecretNegTTL:   10 * time.Second,
	}
	want.NginxConfig = NginxConfig{
		WorkerProcesses:   4,
		ErrorLogLevel:     "info",
		WorkerConnections: 2048,
		HTTP: NginxHTTP{
			AccessLog:             "logs/access.log",
			AccessLogFormat:       DefaultAccessLogFormat,
			AccessLogFormatEscape: "default",
			AccessLogBuffer:       16384,
			KeepaliveTimeout:      75 * time.Second,
			ClientHeaderTimeout:   30 * time.Second,
			ClientBodyTimeout:     time.Minute,
			SendTimeout:           500 * time.Millisecond,
			ClientMaxBodySize:     1 << 20,
			UnderscoresInHeaders:  true,
			Upstream:              NginxUpstream{64, 100, 30 * time.Second},
			RealIPHeader:          "X-Forwarded-For",
			RealIPFrom:            []string{},
			KeepaliveRequests:     50,
			KeepaliveTime:         10 * time.Minute,
		},
	}
	want.Deployment.RoleTraditional.ConfigProvider = "yaml"
	want.Deployment.Admin = AdminConfig{
		AdminKey: []AdminKey{
			{Name: "admin", Key: "edd1c9f034335f136f87ad84b625c8f1", Role: "admin"},
			{Name: "viewer", Key: "4054f7cf07e344346cd3f287985e76a2", Role: "viewer"},
		},
		EnableAdminUI:   true,
		AllowAdmin:      []string{"0.0.0.0/0"},
		AdminListen:     Listen{IP: "127.0.0.1", Port: 19180},
		AdminAPIVersion: "v3",
	}
	want.Deployment.Etcd = EtcdConfig{Host: []string{"http://etcd:2379"}, External: true, Prefix: "/gw", Timeout: 5, WatchTimeout: 50, StartupRetry: 2, User: "root", Password: "secret",
		TLS: EtcdTLS{TrustedCA: "system, /etc/coregate/ca.pem"}}
	want.Plugins = []string{"limit-count", "prometheus"}
	want.PluginAttr = map[string]json.RawMessage{"prometheus": json.RawMessage(`{"export_addr":{"ip":"0.0.0.0","port":9092}}`)}
	want.Prometheus.ExportAddr = Listen{IP: "0.0.0.0", Port: 9092}
	if diff := cmp.Diff(want, c); diff != "" {
		t.Errorf("config (-want +got):\n%s", diff)
	}
	if got := c.ServerHeader("3.18.0"); got != "APISIX" {
		t.Errorf("ServerHeader = %q, want APISIX", got)
	}
	if got := c.Provider(); got != (Provider{Kind: "yaml"}) {
		t.Errorf("Provider = %+v, want yaml without a file (API-driven)", got)
	}
	if got := c.WorkerCount(); got != 4 {
		t.Errorf("WorkerCount = %d, want 4", got)
	}
}

func TestNodeConfigWarnings(t *testing.T) {
	src := `
apisix:
  foo:
    bar: 1
    baz: [1]
  enable_ipv6: false
  ssl:
    enable: true
  router:
    ssl: radixtree_sni
  enable_control: true
  match_uri_encoded_slash: true
nginx_config:
  http:
    lua_shared_dict:
      x: 1m
    typo: 1
  stream: {}
  stream_configuration_snippet: "server {}"
deployment:
  admin:
    enable_admin_ui: true
    admin_api_mtls:
      admin_ssl_cert: a.pem
  etcd:
    resync_delay: 5
    watch_timeout: 50
    startup_retry: 2
stream_plugins: [mqtt-proxy]
whatever: 1
`
	_, warns, err := parseNode(t, src)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"unknown key apisix.foo.bar",
		"unknown key apisix.foo.baz",
		"not supported yet: apisix.enable_ipv6",
		"not supported yet: apisix.router.ssl",
		"not supported yet: apisix.match_uri_encoded_slash",
		"not supported yet: nginx_config.http.lua_shared_dict",
		"unknown key nginx_config.http.typo",
		"not supported yet: nginx_config.stream",
		"not supported yet: nginx_config.stream_configuration_snippet",
		"not supported yet: deployment.admin.enable_admin_ui",
		"not supported yet: deployment.admin.admin_api_mtls",
		"not supported yet: deployment.etcd.resync_delay",
		"not supported yet: deployment.etcd.watch_timeout",
		"not supported yet: deployment.etcd.startup_retry",
		"not supported yet: stream_plugins",
		"unknown key whatever",
	}
	if diff := cmp.Diff(want, warns); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
}

func TestNodeConfigWorkerProcesses(t *testing.T) {
	tests := []struct {
		val  string
		want int
		err  string
	}{
		{"auto", 0, ""},
		{"1", 1, ""},
		{"16", 16, ""},
		{"0", 0, `nodeconf: conf/config.yaml: nginx_config.worker_processes: want "auto" or an integer from 1 to 1024, got 0`},
		{"-2", 0, `nodeconf: conf/config.yaml: nginx_config.worker_processes: want "auto" or an integer from 1 to 1024, got -2`},
		{`"4"`, 0, `nodeconf: conf/config.yaml: nginx_config.worker_processes: want "auto" or an integer from 1 to 1024, got "4"`},
		{"automatic", 0, `nodeconf: conf/config.yaml: nginx_config.worker_processes: want "auto" or an integer from 1 to 1024, got "automatic"`},
		{"1.5", 0, `nodeconf: conf/config.yaml: nginx_config.worker_processes: want "auto" or an integer from 1 to 1024, got 1.5`},
		{"[1]", 0, `nodeconf: conf/config.yaml: nginx_config.worker_processes: want "auto" or an integer from 1 to 1024, got a list`},
	}
	for _, tc := range tests {
		c, _, err := parseNode(t, "nginx_config:\n  worker_processes: "+tc.val+"\n")
		if diff := cmp.Diff(tc.err, errText(err)); diff != "" {
			t.Errorf("%s: error (-want +got):\n%s", tc.val, diff)
			continue
		}
		if err != nil {
			if !errors.Is(err, ErrNodeConfig) {
				t.Errorf("%s: error does not match ErrNodeConfig", tc.val)
			}
			continue
		}
		if c.NginxConfig.WorkerProcesses != tc.want {
			t.Errorf("%s: WorkerProcesses = %d, want %d", tc.val, c.NginxConfig.WorkerProcesses, tc.want)
		}
	}
}

func TestNodeConfigTypeErrors(t *testing.T) {
	tests := []struct{ src, want string }{
		{"apisix: 1", `apisix: want a mapping, got 1`},
		{"apisix:\n  enable_admin: yes please", `apisix.enable_admin: want true or false, got "yes please"`},
		{"apisix:\n  node_listen: 0", `apisix.node_listen: want an integer from 1 to 65535, got 0`},
		{"apisix:\n  node_listen: [9080, 70000]", `apisix.node_listen[1]: want an integer from 1 to 65535, got 70000`},
		{"apisix:\n  node_listen: [{ip: 1.2.3.4}]", `apisix.node_listen[0]: want a port or {ip, port}, got a mapping`},
		{"apisix:\n  node_listen: [{ip: nope, port: 1}]", `apisix.node_listen[0].ip: want an IP address, got "nope"`},
		{"apisix:\n  node_listen: \"9080\"", `apisix.node_listen: want an integer from 1 to 65535, got "9080"`},
		{"apisix:\n  router:\n    http: radixtree_uri_with_parameter", `apisix.router.http: not supported yet: radixtree_uri_with_parameter`},
		{"apisix:\n  router:\n    http: radix", `apisix.router.http: want one of radixtree_host_uri, radixtree_uri, got "radix"`},
		{"nginx_config:\n  error_log_level: loud", `nginx_config.error_log_level: want one of debug, info, notice, warn, error, crit, alert, emerg, got "loud"`},
		{"nginx_config:\n  http:\n    keepalive_timeout: 60x", `nginx_config.http.keepalive_timeout: want an nginx time such as "60s", got "60x"`},
		{"nginx_config:\n  http:\n    keepalive_requests: 0", `nginx_config.http.keepalive_requests: want an integer from 1 to 1073741824, got 0`},
		{"nginx_config:\n  http:\n    client_max_body_size: 1q", `nginx_config.http.client_max_body_size: want an nginx size such as "0" or "1m", got "1q"`},
		{"nginx_config:\n  http:\n    real_ip_from: [nope]", `nginx_config.http.real_ip_from[0]: want IP addresses, CIDRs or "unix:", got "nope"`},
		{"deployment:\n  role: edge", `deployment.role: want one of traditional, data_plane, control_plane, got "edge"`},
		{"deployment:\n  role: data_plane", `deployment.role_data_plane.config_provider: required when deployment.role is data_plane`},
		{"deployment:\n  role_data_plane:\n    config_provider: consul", `deployment.role_data_plane.config_provider: want one of yaml, json, etcd, got "consul"`},
		{"deployment:\n  admin:\n    admin_key:\n      - name: a\n        role: root", `deployment.admin.admin_key[0].role: want one of admin, viewer, got "root"`},
		{"deployment:\n  etcd:\n    timeout: soon", `deployment.etcd.timeout: want an integer from 1 to 3600, got "soon"`},
		{"plugins: limit-count", `plugins: want a list of plugin names, got "limit-count"`},
		{"plugin_attr:\n  prometheus: 1", `plugin_attr.prometheus: want a mapping, got 1`},
		{"apisix: [", ``},
	}
	for _, tc := range tests {
		_, _, err := parseNode(t, tc.src)
		if err == nil {
			t.Errorf("%q: no error", tc.src)
			continue
		}
		if tc.want == "" {
			if !errors.Is(err, ErrNodeConfig) {
				t.Errorf("%q: %v does not match ErrNodeConfig", tc.src, err)
			}
			continue
		}
		if diff := cmp.Diff("nodeconf: conf/config.yaml: "+tc.want, errText(err)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.src, diff)
		}
	}
}

func TestNodeConfigProvider(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		src  string
		want Provider
	}{
		{"deployment:\n  role: data_plane\n  role_data_plane:\n    config_provider: yaml\n", Provider{"yaml", filepath.Join(dir, "apisix.yaml")}},
		{"deployment:\n  role: data_plane\n  role_data_plane:\n    config_provider: json\n", Provider{"json", filepath.Join(dir, "apisix.json")}},
		{"deployment:\n  role: data_plane\n  role_data_plane:\n    config_provider: etcd\n", Provider{"etcd", ""}},
		{"deployment:\n  role: control_plane\n", Provider{"etcd", ""}},
		{"deployment:\n  role: traditional\n", Provider{"etcd", ""}},
	}
	for i, tc := range tests {
		path := filepath.Join(dir, "config.yaml")
		if err := os.WriteFile(path, []byte(tc.src), 0o644); err != nil {
			t.Fatal(err)
		}
		c, _, err := Load(path)
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		if got := c.Provider(); got != tc.want {
			t.Errorf("case %d: Provider = %+v, want %+v", i, got, tc.want)
		}
		if c.Deployment.Role == "data_plane" && c.APISIX.EnableAdmin {
			t.Errorf("case %d: a data plane must not serve the Admin API", i)
		}
	}
	if _, _, err := Load(filepath.Join(dir, "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

func TestNodeConfigEnv(t *testing.T) {
	t.Setenv("CG_TEST_PORT", "9100")
	t.Setenv("CG_TEST_WORKERS", "3")
	src := "apisix:\n  node_listen: ${{CG_TEST_PORT}}\nnginx_config:\n  worker_processes: \"${{CG_TEST_WORKERS}}\"\n" +
		"deployment:\n  etcd:\n    host: [\"http://${{CG_TEST_UNSET_HOST:=localhost}}:2379\"]\n"
	c, _, err := parseNode(t, src)
	if err != nil {
		t.Fatal(err)
	}
	got := []any{c.APISIX.NodeListen, c.NginxConfig.WorkerProcesses, c.Deployment.Etcd.Host}
	want := []any{[]Listen{{Port: 9100}}, 3, []string{"http://localhost:2379"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	_, _, err = parseNode(t, "apisix:\n  node_listen: ${{CG_TEST_SURELY_UNSET}}\n")
	if !errors.Is(err, ErrNodeConfig) || errText(err) != "nodeconf: conf/config.yaml: failed to handle configuration: can't find environment variable CG_TEST_SURELY_UNSET" {
		t.Errorf("unset variable: %v", err)
	}
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return withoutLine(err.Error())
}

// withoutLine takes the line number out of an error's text
// ("conf/config.yaml:3: key" → "conf/config.yaml: key"), for the tests
// of what it says of the key; TestNodeConfigErrorLines checks the lines.
func withoutLine(s string) string { return fileLine.ReplaceAllString(s, "$1: ") }

var fileLine = regexp.MustCompile(`(config\.yaml):\d+: `)

// TestNodeConfigIPZone: config.yaml's addresses take no IPv6 zone, as
// routes' remote_addrs do not.
func TestNodeConfigIPZone(t *testing.T) {
	for _, src := range []string{
		"nginx_config:\n  http:\n    real_ip_from: [\"fe80::1%eth0\"]\n",
		"deployment:\n  admin:\n    allow_admin: [\"fe80::1%eth0\"]\n",
		"apisix:\n  node_listen:\n    - ip: \"fe80::1%eth0\"\n      port: 9080\n",
	} {
		// The error is the address's, not one about the key as a whole.
		if _, _, err := parseNode(t, src); !strings.Contains(errText(err), "[0]") {
			t.Errorf("accepted a zone (%v):\n%s", err, src)
		}
	}
}

func TestWorkers(t *testing.T) {
	for _, tc := range []struct{ n, cpus, want int }{{4, 2, 4}, {0, 6, 6}, {0, 1, 1}, {1, 8, 1}} {
		if got := Workers(tc.n, tc.cpus); got != tc.want {
			t.Errorf("Workers(%d, %d) = %d, want %d", tc.n, tc.cpus, got, tc.want)
		}
	}
}

func TestNodeConfigPrometheus(t *testing.T) {
	c, _, err := parseNode(t, "")
	if err != nil {
		t.Fatal(err)
	}
	want := PrometheusAttr{EnableExportServer: true, ExportAddr: Listen{IP: "127.0.0.1", Port: 9091}, ExportURI: "/apisix/prometheus/metrics",
		MetricPrefix: "apisix_"}
	if diff := cmp.Diff(want, c.Prometheus); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	c, warns, err := parseNode(t, `
plugin_attr:
  prometheus:
    enable_export_server: false
    export_uri: /m
    metric_prefix: gw_
    default_buckets: [10, 50.5, 100]
    metrics:
      http_status:
        expire: 0
        extra_labels:
          - upstream_addr: $upstream_addr
          - uri: $uri
      http_latency:
        expire: 60
      upstream_status:
        expire: 0
    export_addr:
      port: 9100
    colour: blue
`)
	if err != nil {
		t.Fatal(err)
	}
	want = PrometheusAttr{ExportAddr: Listen{IP: "127.0.0.1", Port: 9100}, ExportURI: "/m", MetricPrefix: "gw_",
		DefaultBuckets: []float64{10, 50.5, 100},
		ExtraLabels:    map[string][]ExtraLabel{"http_status": {{"upstream_addr", "upstream_addr"}, {"uri", "uri"}}}}
	if diff := cmp.Diff(want, c.Prometheus); diff != "" {
		t.Errorf("written (-want +got):\n%s", diff)
	}
	wantWarns := []string{"not supported yet: plugin_attr.prometheus.metrics.http_latency.expire",
		"not supported yet: plugin_attr.prometheus.metrics.upstream_status", "unknown key plugin_attr.prometheus.colour"}
	if diff := cmp.Diff(wantWarns, warns); diff != "" {
		t.Errorf("warnings (-want +got):\n%s", diff)
	}
	if got := c.Prometheus.ExportAddr.Addr(); got != "127.0.0.1:9100" {
		t.Errorf("Addr = %q", got)
	}

	for _, tc := range []struct{ src, key string }{
		{"plugin_attr:\n  prometheus:\n    enable_export_server: yes please\n", "plugin_attr.prometheus.enable_export_server"},
		{"plugin_attr:\n  prometheus:\n    export_addr:\n      port: 70000\n", "plugin_attr.prometheus.export_addr.port"},
		{"plugin_attr:\n  prometheus:\n    export_addr: 9091\n", "plugin_attr.prometheus.export_addr"},
		{"plugin_attr:\n  prometheus:\n    export_uri: metrics\n", "plugin_attr.prometheus.export_uri"},
		{"plugin_attr:\n  prometheus:\n    metric_prefix: 9gw\n", "plugin_attr.prometheus.metric_prefix"},
		{"plugin_attr:\n  prometheus:\n    default_buckets: [10, 5]\n", "plugin_attr.prometheus.default_buckets[1]"},
		{"plugin_attr:\n  prometheus:\n    default_buckets: [10, x]\n", "plugin_attr.prometheus.default_buckets[1]"},
		{"plugin_attr:\n  prometheus:\n    default_buckets: []\n", "plugin_attr.prometheus.default_buckets"},
		{"plugin_attr:\n  prometheus:\n    metrics:\n      bandwidth:\n        extra_labels:\n          - node: $upstream_addr\n", "plugin_attr.prometheus.metrics.bandwidth.extra_labels[0]"},
		{"plugin_attr:\n  prometheus:\n    metrics:\n      http_latency:\n        extra_labels:\n          - le: $uri\n", "plugin_attr.prometheus.metrics.http_latency.extra_labels[0]"},
		{"plugin_attr:\n  prometheus:\n    metrics:\n      http_status:\n        extra_labels:\n          - a-b: $uri\n", "plugin_attr.prometheus.metrics.http_status.extra_labels[0]"},
		{"plugin_attr:\n  prometheus:\n    metrics:\n      http_status:\n        extra_labels:\n          - a: uri\n", "plugin_attr.prometheus.metrics.http_status.extra_labels[0].a"},
		{"plugin_attr:\n  prometheus:\n    metrics:\n      http_status:\n        extra_labels: $uri\n", "plugin_attr.prometheus.metrics.http_status.extra_labels"},
		{"plugin_attr:\n  prometheus:\n    metrics:\n      http_status:\n        expire: -1\n", "plugin_attr.prometheus.metrics.http_status.expire"},
	} {
		_, _, err := parseNode(t, tc.src)
		var ne *NodeConfigError
		if !errors.As(err, &ne) || ne.Key != tc.key {
			t.Errorf("%q: error %v, want one naming %s", tc.src, err, tc.key)
		}
	}
}

// TestNodeConfigAccessLog reads the access log's keys, and their
// defaults when unset.
func TestNodeConfigAccessLog(t *testing.T) {
	c, warns, err := parseNode(t, "nginx_config:\n  worker_processes: 1\n")
	if err != nil || len(warns) != 0 {
		t.Fatal(err, warns)
	}
	h := c.NginxConfig.HTTP
	if !h.EnableAccessLog || h.AccessLog != "logs/access.log" || h.AccessLogFormat != DefaultAccessLogFormat ||
		h.AccessLogFormatEscape != "default" || h.AccessLogBuffer != 16384 {
		t.Errorf("defaults %+v", h)
	}
	if got := h.AccessLogPath("/etc/gw"); got != "/etc/gw/logs/access.log" {
		t.Errorf("AccessLogPath: %q", got)
	}
	c, warns, err = parseNode(t, `
nginx_config:
  http:
    enable_access_log: false
    access_log: /var/log/gw.log
    access_log_format: '$remote_addr $status'
    access_log_format_escape: json
    access_log_buffer: 64k
`)
	if err != nil || len(warns) != 0 {
		t.Fatal(err, warns)
	}
	h = c.NginxConfig.HTTP
	if h.EnableAccessLog || h.AccessLog != "/var/log/gw.log" || h.AccessLogFormat != "$remote_addr $status" ||
		h.AccessLogFormatEscape != "json" || h.AccessLogBuffer != 64<<10 {
		t.Errorf("read %+v", h)
	}
	if got := h.AccessLogPath("/etc/gw"); got != "/var/log/gw.log" {
		t.Errorf("AccessLogPath: %q", got)
	}
	if _, _, err := parseNode(t, "nginx_config:\n  http:\n    access_log_format_escape: xml\n"); err == nil ||
		!strings.Contains(err.Error(), "nginx_config.http.access_log_format_escape: want one of default, json, none") {
		t.Errorf("escape xml: %v", err)
	}
}

func TestNodeConfigPorts(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want []int
	}{
		{"", []int{9080, 9443, 9180, 9091, 9090}},
		{"apisix:\n  node_listen: [40001, 40002]\n  ssl:\n    enable: false\ndeployment:\n  admin:\n    admin_listen:\n      port: 40003\n" +
			"plugin_attr:\n  prometheus:\n    export_addr:\n      port: 40004\n", []int{40001, 40002, 40003, 40004, 9090}},
		{"deployment:\n  role: data_plane\n  role_data_plane:\n    config_provider: yaml\n" +
			"plugin_attr:\n  prometheus:\n    enable_export_server: false\n", []int{9080, 9443, 9090}},
		{"apisix:\n  enable_control: false\n  ssl:\n    enable: false\n", []int{9080, 9180, 9091}},
		{"apisix:\n  control:\n    port: 40005\n", []int{9080, 9443, 9180, 9091, 40005}},
	} {
		c, _, err := parseNode(t, tc.src)
		if err != nil {
			t.Fatalf("%q: %v", tc.src, err)
		}
		if d := cmp.Diff(tc.want, c.Ports()); d != "" {
			t.Errorf("%q: Ports (-want +got):\n%s", tc.src, d)
		}
	}
}

// TestNodeConfigSSL: apisix.ssl's listen lists and settings, and what is
// refused in them.
func TestNodeConfigSSL(t *testing.T) {
	c, _, err := parseNode(t, "apisix:\n  ssl:\n    listen: [8443, {ip: \"::1\"}]\n")
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]Listen{{Port: 8443}, {IP: "::1", Port: 9443}}, c.APISIX.SSL.Listen); d != "" {
		t.Errorf("listen (-want +got):\n%s", d)
	}
	if !c.APISIX.SSL.Enable || c.APISIX.SSL.Protocols != "TLSv1.2 TLSv1.3" || c.APISIX.SSL.Ciphers != DefaultSSLCiphers {
		t.Errorf("defaults: %+v", c.APISIX.SSL)
	}
	for _, tc := range []struct{ src, want string }{
		{"apisix:\n  ssl:\n    listen:\n      - port: 9443\n        enable_http2: true\n",
			"apisix.ssl.listen[0].enable_http2: port level enable_http2 in ssl.listen is deprecated from APISIX 3.9, use apisix.enable_http2 (HTTP/2 is not supported yet)"},
		{"apisix:\n  node_listen: 9443\n",
			"apisix.ssl.listen[0]: https listen port 9443 conflicts with http"},
		{"apisix:\n  ssl:\n    ssl_protocols: TLSv1.1 TLSv1.2\n",
			"apisix.ssl.ssl_protocols: not supported, and ignoring it would serve a protocol version this gateway does not implement (TLSv1.1) with the versions it has: list TLSv1.2 and TLSv1.3 only"},
		{"apisix:\n  ssl:\n    ssl_protocols: TLSv2\n",
			`apisix.ssl.ssl_protocols: unknown protocol "TLSv2": want TLSv1.2, TLSv1.3 or both`},
	} {
		_, _, err := parseNode(t, tc.src)
		if got := errText(err); got != "nodeconf: conf/config.yaml: "+tc.want {
			t.Errorf("%q: got %q, want %q", tc.src, got, tc.want)
		}
	}
	// node_listen on 9443 is fine with TLS off.
	if _, _, err := parseNode(t, "apisix:\n  node_listen: 9443\n  ssl:\n    enable: false\n"); err != nil {
		t.Error(err)
	}
}

// TestNodeConfigRefused: each APISIX key coregate does not implement
// whose value, ignored, would weaken security or lose data (the package
// doc's list) stops the start, with an error naming the key and the file
// that matches ErrNodeConfig.
func TestNodeConfigRefused(t *testing.T) {
	const realIPHarm = `leave the client address the connection's, so that every client behind a proxy in real_ip_from ` +
		`has the proxy's address in remote_addrs, ipmatch and the limits keyed on remote_addr: ` +
		`remove the real_ip_* keys, or write real_ip_from: [] to say no proxy is trusted`
	const snippet = `skip the nginx directives it holds, and whatever access rules, limits or headers they enforce: ` +
		`remove it, and configure what it does through routes, plugins or global rules`
	tests := []struct{ src, key, why string }{
		{"apisix:\n  delete_uri_tail_slash: true", "apisix.delete_uri_tail_slash",
			`route a path ending in "/" apart from the path without it, "/a/" missing the route that guards "/a": set it to false`},
		{"apisix:\n  trusted_addresses: [10.0.0.0/8]", "apisix.trusted_addresses",
			`pass the X-Forwarded-For of clients outside them to the upstream as sent, where APISIX drops it: remove it`},
		{"apisix:\n  lua_module_hook: my_hook", "apisix.lua_module_hook",
			`skip the Lua hook it names, and whatever it enforces: remove it`},
		{"nginx_config:\n  user: nobody", "nginx_config.user",
			`leave the workers running as the user that started coregate, not as this one: start coregate as that user (systemd's User=, for one) and remove the key`},
		{"nginx_config:\n  main_configuration_snippet: load_module x.so;", "nginx_config.main_configuration_snippet", snippet},
		{"nginx_config:\n  http_configuration_snippet: limit_req_zone x;", "nginx_config.http_configuration_snippet", snippet},
		{"nginx_config:\n  http_server_configuration_snippet: deny all;", "nginx_config.http_server_configuration_snippet", snippet},
		{"nginx_config:\n  http_server_location_configuration_snippet: deny 10.0.0.0/8;", "nginx_config.http_server_location_configuration_snippet", snippet},
		{"nginx_config:\n  http_admin_configuration_snippet: auth_basic on;", "nginx_config.http_admin_configuration_snippet", snippet},
		{"nginx_config:\n  http_end_configuration_snippet: |\n    server { listen 80; }", "nginx_config.http_end_configuration_snippet", snippet},
		{"nginx_config:\n  http:\n    real_ip_from: [10.0.0.0/8]", "nginx_config.http.real_ip_from", realIPHarm},
		// APISIX's default real_ip_from (127.0.0.1 and unix:) applies.
		{"nginx_config:\n  http:\n    real_ip_header: X-Forwarded-For", "nginx_config.http.real_ip_header", realIPHarm},
		{"nginx_config:\n  http:\n    real_ip_recursive: \"on\"\n    real_ip_from: [\"unix:\"]", "nginx_config.http.real_ip_recursive", realIPHarm},
		{"deployment:\n  admin:\n    https_admin: true", "deployment.admin.https_admin",
			`serve the Admin API over plain HTTP, its keys readable on the wire: set it to false, and keep admin_listen on loopback or put a TLS proxy in front`},
	}
	for _, tc := range tests {
		_, _, err := parseNode(t, tc.src+"\n")
		want := "nodeconf: conf/config.yaml: " + tc.key + ": not supported, and ignoring it would " + tc.why
		if diff := cmp.Diff(want, errText(err)); diff != "" {
			t.Errorf("%s: error (-want +got):\n%s", tc.key, diff)
		}
		if !errors.Is(err, ErrNodeConfig) {
			t.Errorf("%s: error does not match ErrNodeConfig", tc.key)
		}
	}
}

// TestNodeConfigUnderscoresInHeaders: underscores_in_headers is on
// unless written off, as APISIX's default; both spellings of each are
// read, with no warning.
func TestNodeConfigUnderscoresInHeaders(t *testing.T) {
	for _, tc := range []struct {
		src  string
		want bool
	}{
		{"", true},
		{"nginx_config:\n  http:\n    underscores_in_headers: \"on\"", true},
		{"nginx_config:\n  http:\n    underscores_in_headers: true", true},
		{"nginx_config:\n  http:\n    underscores_in_headers: \"off\"", false},
		{"nginx_config:\n  http:\n    underscores_in_headers: false", false},
	} {
		c, warns, err := parseNode(t, tc.src+"\n")
		if err != nil || len(warns) != 0 || c.NginxConfig.HTTP.UnderscoresInHeaders != tc.want {
			t.Errorf("%q: error %v, warnings %v, underscores_in_headers %v, want %v", tc.src, err, warns, c != nil && c.NginxConfig.HTTP.UnderscoresInHeaders, tc.want)
		}
	}
}

// TestNodeConfigRefusedKeysAccepted: the values of those keys that ask
// for nothing coregate does not do start the node, with no warning.
func TestNodeConfigRefusedKeysAccepted(t *testing.T) {
	for _, src := range []string{
		"apisix:\n  delete_uri_tail_slash: false",
		"apisix:\n  trusted_addresses: null",
		"apisix:\n  data_encryption: null",
		"apisix:\n  data_encryption:\n    enable_encrypt_fields: true\n    keyring: null",
		"apisix:\n  data_encryption:\n    keyring: []",
		"apisix:\n  lua_module_hook: \"\"",
		"nginx_config:\n  user: \"\"",
		"nginx_config:\n  main_configuration_snippet: \"\"\n  http_configuration_snippet: \"\"\n" +
			"  http_server_configuration_snippet: \"\"\n  http_server_location_configuration_snippet: \"\"\n" +
			"  http_admin_configuration_snippet: \"\"\n  http_end_configuration_snippet: null",
		"nginx_config:\n  http:\n    underscores_in_headers: \"on\"",
		"nginx_config:\n  http:\n    underscores_in_headers: true",
		"nginx_config:\n  http:\n    real_ip_header: X-Forwarded-For\n    real_ip_recursive: \"on\"\n    real_ip_from: []",
		"deployment:\n  admin:\n    https_admin: false",
	} {
		_, warns, err := parseNode(t, src+"\n")
		if err != nil || len(warns) != 0 {
			t.Errorf("%s:\nerror %v, warnings %v", src, err, warns)
		}
	}
	for _, tc := range []struct{ src, want string }{
		{"nginx_config:\n  http:\n    underscores_in_headers: maybe", `nginx_config.http.underscores_in_headers: want "on" or "off", got "maybe"`},
		{"nginx_config:\n  user: [a]", `nginx_config.user: want a string, got a list`},
		{"apisix:\n  delete_uri_tail_slash: 1", `apisix.delete_uri_tail_slash: want true or false, got 1`},
		{"apisix:\n  data_encryption: 1", `apisix.data_encryption: want a mapping, got 1`},
	} {
		_, _, err := parseNode(t, tc.src+"\n")
		if diff := cmp.Diff("nodeconf: conf/config.yaml: "+tc.want, errText(err)); diff != "" {
			t.Errorf("%s: error (-want +got):\n%s", tc.src, diff)
		}
	}
}

// TestNodeConfigAdminKeyBypassed: admin_key_required false while the
// Admin API is served is reported in APISIX's words, whatever allow_admin
// says, as APISIX reports it; not when the node serves no Admin API.
func TestNodeConfigAdminKeyBypassed(t *testing.T) {
	for _, tc := range []struct {
		src  string
		warn bool
	}{
		{"deployment:\n  admin:\n    admin_key_required: false\n    allow_admin: [0.0.0.0/0]", true},
		{"deployment:\n  admin:\n    admin_key_required: false", true},
		{"deployment:\n  admin:\n    admin_key_required: true\n    allow_admin: [0.0.0.0/0]", false},
		{"apisix:\n  enable_admin: false\ndeployment:\n  admin:\n    admin_key_required: false", false},
		{"deployment:\n  role: data_plane\n  role_data_plane:\n    config_provider: yaml\n  admin:\n    admin_key_required: false", false},
	} {
		_, warns, err := parseNode(t, tc.src+"\n")
		if err != nil {
			t.Fatalf("%s: %v", tc.src, err)
		}
		var want []string
		if tc.warn {
			want = []string{"Admin key is bypassed! If you are deploying APISIX in a production environment, " +
				"please enable `admin_key_required` and set a secure admin key!"}
		}
		if diff := cmp.Diff(want, warns); diff != "" {
			t.Errorf("%s: warnings (-want +got):\n%s", tc.src, diff)
		}
	}
}

func mustKeyring(t *testing.T, keys ...string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(keys)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestNodeConfigDataEncryption: apisix.data_encryption as APISIX reads it,
// its defaults (enable_encrypt_fields, APISIX's keyring) for what is not
// written; null, or a keyring null or empty, stores in clear.
func TestNodeConfigDataEncryption(t *testing.T) {
	apisixDefault := mustKeyring(t, keyring.Default...)
	tests := []struct {
		src  string
		want DataEncryption
	}{
		{"", DataEncryption{EnableEncryptFields: true, Keyring: apisixDefault}},
		{"apisix:\n  data_encryption:\n    enable_encrypt_fields: false",
			DataEncryption{Keyring: apisixDefault}},
		{"apisix:\n  data_encryption:\n    enable_encrypt_fields: true\n    keyring: [qeddd145sfvddff3]",
			DataEncryption{EnableEncryptFields: true, Keyring: mustKeyring(t, "qeddd145sfvddff3")}},
		{"apisix:\n  data_encryption:\n    keyring: qeddd145sfvddff3qeddd145sfvddff3",
			DataEncryption{EnableEncryptFields: true, Keyring: mustKeyring(t, "qeddd145sfvddff3qeddd145sfvddff3")}},
		// A rotation: the new key first, the old one kept to read.
		{"apisix:\n  data_encryption:\n    keyring:\n      - 0123456789abcdef\n      - qeddd145sfvddff3",
			DataEncryption{EnableEncryptFields: true, Keyring: mustKeyring(t, "0123456789abcdef", "qeddd145sfvddff3")}},
		{"apisix:\n  data_encryption: null", DataEncryption{EnableEncryptFields: true}},
		{"apisix:\n  data_encryption:\n    keyring: null", DataEncryption{EnableEncryptFields: true}},
		{"apisix:\n  data_encryption:\n    enable_encrypt_fields: false\n    keyring: []", DataEncryption{}},
	}
	for _, tc := range tests {
		c, warns, err := parseNode(t, tc.src+"\n")
		if err != nil || len(warns) != 0 {
			t.Errorf("%q: error %v, warnings %v", tc.src, err, warns)
			continue
		}
		if diff := cmp.Diff(tc.want, c.APISIX.DataEncryption); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.src, diff)
		}
	}

	bad := []struct{ src, want string }{
		{"apisix:\n  data_encryption:\n    keyring: short",
			`apisix.data_encryption.keyring: want a key of 16 or 32 characters or a list of them, got "short"`},
		{"apisix:\n  data_encryption:\n    keyring: [qeddd145sfvddff3, 0123456789abcdef0]",
			`apisix.data_encryption.keyring[1]: want a key of 16 or 32 characters, got "0123456789abcdef0"`},
		{"apisix:\n  data_encryption:\n    keyring: [1234567890123456]",
			`apisix.data_encryption.keyring[0]: want a key of 16 or 32 characters, got 1234567890123456`},
		{"apisix:\n  data_encryption:\n    keyring: {a: b}",
			`apisix.data_encryption.keyring: want a key of 16 or 32 characters or a list of them, got a mapping`},
		{"apisix:\n  data_encryption:\n    enable_encrypt_fields: yes please",
			`apisix.data_encryption.enable_encrypt_fields: want true or false, got "yes please"`},
	}
	for _, tc := range bad {
		_, _, err := parseNode(t, tc.src+"\n")
		if want := "nodeconf: conf/config.yaml: " + tc.want; errText(err) != want || !errors.Is(err, ErrNodeConfig) {
			t.Errorf("%q:\nerror %v\nwant  %s", tc.src, err, want)
		}
	}
}

// TestDataEncryptionFieldsKeyring: plugins' fields are encrypted where
// the configuration comes from etcd and enable_encrypt_fields is set, as
// APISIX's enable_gde; SSL keys wherever a keyring is.
func TestDataEncryptionFieldsKeyring(t *testing.T) {
	k := mustKeyring(t, keyring.Default...)
	on := DataEncryption{EnableEncryptFields: true, Keyring: k}
	if on.FieldsKeyring(Provider{Kind: "etcd"}) != k {
		t.Error("etcd, enabled: no keyring")
	}
	if on.FieldsKeyring(Provider{Kind: "yaml"}) != nil {
		t.Error("yaml: a keyring")
	}
	off := DataEncryption{Keyring: k}
	if off.FieldsKeyring(Provider{Kind: "etcd"}) != nil {
		t.Error("etcd, disabled: a keyring")
	}
}

// TestNodeConfigControl: apisix.enable_control, control and id, and the
// ports the Control API may not share, refused in APISIX's words.
func TestNodeConfigControl(t *testing.T) {
	c, warns, err := parseNode(t, "")
	if err != nil || len(warns) > 0 {
		t.Fatalf("err %v, warnings %v", err, warns)
	}
	if !c.APISIX.EnableControl || c.APISIX.Control != (Listen{IP: "127.0.0.1", Port: 9090}) || c.APISIX.ID != "" {
		t.Errorf("defaults: enable_control %v, control %+v, id %q", c.APISIX.EnableControl, c.APISIX.Control, c.APISIX.ID)
	}
	c, warns, err = parseNode(t, "apisix:\n  id: edge-1\n  enable_control: true\n  control:\n    ip: 0.0.0.0\n    port: 19090\n    router: radixtree_uri_with_parameter\n")
	if err != nil || len(warns) > 0 {
		t.Fatalf("err %v, warnings %v", err, warns)
	}
	if c.APISIX.Control != (Listen{IP: "0.0.0.0", Port: 19090}) || c.APISIX.ID != "edge-1" {
		t.Errorf("control %+v, id %q", c.APISIX.Control, c.APISIX.ID)
	}
	if c, _, _ = parseNode(t, "apisix:\n  control:\n    port: 19090\n"); c.APISIX.Control.IP != "127.0.0.1" {
		t.Errorf("control ip %q, want 127.0.0.1 when only the port is written", c.APISIX.Control.IP)
	}
	// Where the control port is another listener's, and where it is not
	// served (or the other is not), nothing is refused.
	for _, tc := range []struct{ src, want string }{
		{"apisix:\n  control:\n    port: 9180\n", "apisix.control.port: control port 9180 conflicts with admin port"},
		{"apisix:\n  control:\n    port: 9091\n", "apisix.control.port: control port 9091 conflicts with prometheus port"},
		{"apisix:\n  node_listen: [9090]\n", "apisix.control.port: control port 9090 conflicts with http listen port"},
		{"apisix:\n  ssl:\n    listen: [9090]\n", "apisix.control.port: control port 9090 conflicts with https listen port"},
		{"apisix:\n  control:\n    port: 0\n", "apisix.control.port: want an integer from 1 to 65535"},
		{"apisix:\n  control:\n    router: radixtree_host_uri\n", "apisix.control.router: want one of radixtree_uri, radixtree_uri_with_parameter"},
		{"apisix:\n  enable_control: false\n  node_listen: [9090]\n", ""},
		{"apisix:\n  enable_admin: false\n  control:\n    port: 9180\n", ""},
		{"apisix:\n  ssl:\n    enable: false\n    listen: [9090]\n", ""},
	} {
		_, _, err := parseNode(t, tc.src)
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%q: %v", tc.src, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%q: err %v, want %q", tc.src, err, tc.want)
		}
	}
}

// TestNodeConfigSecretLRU: apisix.lru.secret's ttl and neg_ttl set how
// long secret values and failures are kept, 300 s and 60 s by default;
// count and neg_count are reported, not read; a ttl that is not a
// positive number of seconds is refused naming the key.
func TestNodeConfigSecretLRU(t *testing.T) {
	for _, tc := range []struct {
		src      string
		ttl, neg time.Duration
		warns    []string
	}{
		{"", 300 * time.Second, 60 * time.Second, nil},
		{"apisix:\n  lru:\n", 300 * time.Second, 60 * time.Second, nil},
		{"apisix:\n  lru:\n    secret:\n      ttl: 30\n", 30 * time.Second, 60 * time.Second, nil},
		{"apisix:\n  lru:\n    secret:\n      neg_ttl: 5\n      count: 512\n      neg_count: 512\n", 300 * time.Second, 5 * time.Second,
			[]string{"not supported yet: apisix.lru.secret.count", "not supported yet: apisix.lru.secret.neg_count"}},
		{"apisix:\n  lru:\n    other: {}\n", 300 * time.Second, 60 * time.Second, []string{"unknown key apisix.lru.other"}},
	} {
		c, warns, err := parseNode(t, tc.src)
		if err != nil {
			t.Errorf("%q: %v", tc.src, err)
			continue
		}
		if c.APISIX.SecretTTL != tc.ttl || c.APISIX.SecretNegTTL != tc.neg || !slices.Equal(warns, tc.warns) {
			t.Errorf("%q: ttl %v neg_ttl %v warnings %q, want %v %v %q", tc.src, c.APISIX.SecretTTL, c.APISIX.SecretNegTTL, warns, tc.ttl, tc.neg, tc.warns)
		}
	}
	for _, src := range []string{
		"apisix:\n  lru:\n    secret:\n      ttl: 0\n",
		"apisix:\n  lru:\n    secret:\n      neg_ttl: -1\n",
		"apisix:\n  lru:\n    secret:\n      ttl: soon\n",
	} {
		if _, _, err := parseNode(t, src); err == nil || !strings.Contains(err.Error(), "apisix.lru.secret.") {
			t.Errorf("%q: %v", src, err)
		}
	}
}

// TestNodeConfigErrorLines: an error, and a warning, names the file and the line the key
// is written on (a list item's own line; a key a check made after the
// whole file was read wants, not written, at its written parent's), and a file that does not parse the
// line the YAML library found it on; and apisix.pid_file, relative to
// config.yaml or not, and never empty.
func TestNodeConfigErrorLines(t *testing.T) {
	for _, tc := range []struct{ src, want string }{
		{"apisix:\n  enable_admin: false\nnginx_config:\n  worker_processes: many\n",
			`nodeconf: conf/config.yaml:4: nginx_config.worker_processes: want "auto" or an integer from 1 to 1024, got "many"`},
		{"apisix:\n  dns_resolver:\n    - 1.1.1.1\n    - dns.example\n",
			`nodeconf: conf/config.yaml:4: apisix.dns_resolver[1]: want a name server's address, "ip" or "ip:port", got "dns.example"`},
		{"# a comment\ndeployment:\n  role: data_plane\n",
			`nodeconf: conf/config.yaml:2: deployment.role_data_plane.config_provider: required when deployment.role is data_plane`},
		{"apisix:\n  pid_file: \"\"\n", `nodeconf: conf/config.yaml:2: apisix.pid_file: want a file name, got ""`},
		{"apisix:\n  enable_admin: true\n   bad: indent\n", `nodeconf: conf/config.yaml:3: yaml: mapping values are not allowed in this context`},
	} {
		_, _, err := parseNode(t, tc.src)
		var ne *NodeConfigError
		if !errors.As(err, &ne) || ne.Line == 0 {
			t.Errorf("%q: %v, want a *NodeConfigError with its line", tc.src, err)
		}
		if diff := cmp.Diff(tc.want, fmt.Sprint(err)); diff != "" {
			t.Errorf("%q (-want +got):\n%s", tc.src, diff)
		}
	}
	_, warns, err := Parse([]byte("apisix:\n  enable_admin: true\n  foo:\n    bar: 1\n  enable_ipv6: true\ndeployment:\n  admin:\n    admin_key_required: false\n"), "conf/config.yaml")
	if diff := cmp.Diff([]string{"conf/config.yaml:4: unknown key apisix.foo.bar", "conf/config.yaml:5: not supported yet: apisix.enable_ipv6",
		"conf/config.yaml:8: " + AdminKeyBypassed}, warns); err != nil || diff != "" {
		t.Errorf("warnings (-want +got):\n%s%v", diff, err)
	}
	c, _, err := parseNode(t, "apisix:\n  pid_file: run/cg.pid\n")
	if err != nil || c.APISIX.PIDFilePath(c.Dir) != "conf/run/cg.pid" {
		t.Errorf("a relative pid_file: %v %q", err, c.APISIX.PIDFilePath(c.Dir))
	}
	if d := Default(); d.APISIX.PIDFilePath(d.Dir) != "conf/coregate.pid" {
		t.Errorf("the default pid file: %q", d.APISIX.PIDFilePath(d.Dir))
	}
}
