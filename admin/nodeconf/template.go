package nodeconf

//go:generate go test -count=1 -run TestConfigDoc -update

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"coregate/admin/keyring"

	"go.yaml.in/yaml/v3"
)

// setting is one key of Template: its dotted key, what it does, and its
// default read from a Config (Default's). off writes it commented out: a
// key that, written, means more than its default (deployment.etcd.host
// names an external etcd), is refused or reported when set, or has no
// value to write (an example is shown instead).
type setting struct {
	key string
	doc string
	val func(c *Config) any
	off bool
}

// example is the value a key commented out shows when the
// configuration has none of its own: an APISIX key coregate refuses when
// set, or one whose default is to be unset.
type example struct{ v any }

// ex is a key whose value a Config does not keep (refused when set, read
// and dropped): the template shows v.
func ex(v any) func(*Config) any { return func(*Config) any { return example{v} } }

// fixed is a key whose only value coregate accepts is v (the others are
// refused), which a Config does not keep.
func fixed(v any) func(*Config) any { return func(*Config) any { return v } }

// nginxFlag writes an nginx flag as APISIX's template does: "on" or "off".
func nginxFlag(on bool) string {
	if on {
		return "on"
	}
	return "off"
}

// or is get's value, or example v where it is the zero value (not set).
func or(get func(c *Config) any, v any) func(*Config) any {
	return func(c *Config) any {
		got := get(c)
		if rv := reflect.ValueOf(got); !rv.IsValid() || rv.IsZero() || (rv.Kind() == reflect.Slice || rv.Kind() == reflect.Map) && rv.Len() == 0 {
			return example{v}
		}
		return got
	}
}

// nginxTime writes d in nginx's time syntax: hours, or seconds, or
// milliseconds, as APISIX writes its defaults.
func nginxTime(d time.Duration) string {
	switch {
	case d%time.Hour == 0 && d > 0:
		return fmt.Sprintf("%dh", d/time.Hour)
	case d%time.Second == 0:
		return fmt.Sprintf("%ds", d/time.Second)
	}
	return fmt.Sprintf("%dms", d/time.Millisecond)
}

// keyringValue is apisix.data_encryption.keyring: APISIX's keys, which
// are public, or as many "<hidden>" as the keyring has keys; [] for none.
func keyringValue(c *Config) any {
	k := c.APISIX.DataEncryption.Keyring
	switch {
	case k == nil:
		return []string{}
	case reflect.DeepEqual(k, defaultKeyring):
		return keyring.Default
	}
	hidden := make([]string, k.Len())
	for i := range hidden {
		hidden[i] = hiddenValue
	}
	return hidden
}

// hiddenValue stands for a secret in Render's output.
const hiddenValue = "<hidden>"

// listens writes a listen list: ports, or {ip, port} where an IP is set.
func listens(ls []Listen) any {
	var ports []int
	var full []map[string]any
	for _, l := range ls {
		ports = append(ports, l.Port)
		full = append(full, map[string]any{"ip": l.IP, "port": l.Port})
	}
	for _, l := range ls {
		if l.IP != "" {
			return full
		}
	}
	return ports
}

// settings are Template's keys, in its order: every key Keys lists.
var settings = []setting{
	{"apisix.node_listen", "HTTP listeners: ports, or {ip, port}", func(c *Config) any { return listens(c.APISIX.NodeListen) }, false},
	{"apisix.enable_server_tokens", "the Server header says APISIX/<version> (false: APISIX)", func(c *Config) any { return c.APISIX.EnableServerTokens }, false},
	{"apisix.router.http", "radixtree_host_uri (hosts, then paths) or radixtree_uri (paths only)", func(c *Config) any { return c.APISIX.RouterHTTP }, false},
	{"apisix.enable_admin", "serve the Admin API (never on a data plane)", func(c *Config) any { return c.APISIX.EnableAdmin }, false},
	{"apisix.enable_control", "serve the Control API", func(c *Config) any { return c.APISIX.EnableControl }, false},
	{"apisix.control.ip", "", func(c *Config) any { return c.APISIX.Control.IP }, false},
	{"apisix.control.port", "", func(c *Config) any { return c.APISIX.Control.Port }, false},
	{"apisix.control.router", "read and ignored: no plugin has a control API with parameters in its paths", ex("radixtree_uri"), true},
	{"apisix.id", "the node's id; default: a random one, kept in apisix.uid beside config.yaml", or(func(c *Config) any { return c.APISIX.ID }, "my-node"), true},
	{"apisix.pid_file", "the supervisor's pid file, locked while it runs (coregate -s reads it); relative to this file's directory", func(c *Config) any { return c.APISIX.PIDFile }, false},
	{"apisix.show_upstream_status_in_response_header", "X-APISIX-Upstream-Status on every answer, not only 5xx", func(c *Config) any { return c.APISIX.ShowUpstreamStatusInResponseHeader }, false},
	{"apisix.normalize_uri_like_servlet", "match paths as a Java servlet container maps them (\";\" parameters removed)", func(c *Config) any { return c.APISIX.NormalizeURILikeServlet }, false},
	{"apisix.delete_uri_tail_slash", "not supported: true is refused", fixed(false), false},
	{"apisix.trusted_addresses", "not supported: refused when set", ex([]string{"10.0.0.0/8"}), true},
	{"apisix.lua_module_hook", "not supported: refused when set", ex("my_hook"), true},
	{"apisix.dns_resolver", "name servers for upstream host names, \"ip\" or \"ip:port\"; default: the system resolver", or(func(c *Config) any { return c.APISIX.DNSResolver }, []string{"127.0.0.53"}), true},
	{"apisix.dns_resolver_valid", "seconds a name's addresses are kept whatever their TTL (0: their TTL)", func(c *Config) any { return int(c.APISIX.DNSResolverValid / time.Second) }, false},
	{"apisix.resolver_timeout", "seconds one lookup may take", func(c *Config) any { return int(c.APISIX.ResolverTimeout / time.Second) }, false},
	{"apisix.ssl.enable", "serve HTTPS with the ssls objects' certificates", func(c *Config) any { return c.APISIX.SSL.Enable }, false},
	{"apisix.ssl.listen", "HTTPS listeners: ports, or {ip, port}", func(c *Config) any { return listens(c.APISIX.SSL.Listen) }, false},
	{"apisix.ssl.ssl_protocols", "TLSv1.2, TLSv1.3 or both", func(c *Config) any { return c.APISIX.SSL.Protocols }, false},
	{"apisix.ssl.ssl_ciphers", "OpenSSL's names, \":\"-separated", func(c *Config) any { return c.APISIX.SSL.Ciphers }, false},
	{"apisix.ssl.ssl_session_tickets", "", func(c *Config) any { return c.APISIX.SSL.SessionTickets }, false},
	{"apisix.ssl.fallback_sni", "the server name whose certificate a handshake without SNI gets; default: none", or(func(c *Config) any { return c.APISIX.SSL.FallbackSNI }, "example.com"), true},
	{"apisix.ssl.ssl_trusted_certificate", "CAs trusted as a client (etcd over https): \"system\" and PEM files, comma-separated", func(c *Config) any { return c.APISIX.SSLTrustedCertificate }, false},
	{"apisix.data_encryption.enable_encrypt_fields", "store the plugins' secret fields encrypted (etcd)", func(c *Config) any { return c.APISIX.DataEncryption.EnableEncryptFields }, false},
	{"apisix.data_encryption.keyring", "keys of 16 or 32 characters, the first one encrypting; [] stores in clear", keyringValue, false},
	{"apisix.lru.secret.ttl", "seconds a value read from a secret manager is kept", func(c *Config) any { return int(c.APISIX.SecretTTL / time.Second) }, false},
	{"apisix.lru.secret.neg_ttl", "seconds a failure to read one is kept", func(c *Config) any { return int(c.APISIX.SecretNegTTL / time.Second) }, false},

	{"nginx_config.user", "not supported: refused when set (start coregate as that user)", ex("nobody"), true},
	{"nginx_config.worker_processes", "auto: one worker per CPU", func(c *Config) any {
		if c.NginxConfig.WorkerProcesses == 0 {
			return "auto"
		}
		return c.NginxConfig.WorkerProcesses
	}, false},
	{"nginx_config.error_log", "the processes' log file, relative to this file's directory; default: standard error (APISIX's is logs/error.log)", or(func(c *Config) any { return c.NginxConfig.ErrorLog }, "logs/error.log"), true},
	{"nginx_config.error_log_level", "debug, info, notice, warn, error, crit, alert or emerg", func(c *Config) any { return c.NginxConfig.ErrorLogLevel }, false},
	{"nginx_config.event.worker_connections", "", func(c *Config) any { return c.NginxConfig.WorkerConnections }, false},
	{"nginx_config.main_configuration_snippet", "the snippets: not supported, refused when set", ex("..."), true},
	{"nginx_config.http_configuration_snippet", "", ex("..."), true},
	{"nginx_config.http_server_configuration_snippet", "", ex("..."), true},
	{"nginx_config.http_server_location_configuration_snippet", "", ex("..."), true},
	{"nginx_config.http_admin_configuration_snippet", "", ex("..."), true},
	{"nginx_config.http_end_configuration_snippet", "", ex("..."), true},
	{"nginx_config.http.enable_access_log", "", func(c *Config) any { return c.NginxConfig.HTTP.EnableAccessLog }, false},
	{"nginx_config.http.access_log", "relative to this file's directory", func(c *Config) any { return c.NginxConfig.HTTP.AccessLog }, false},
	{"nginx_config.http.access_log_format", "nginx's log_format", func(c *Config) any { return c.NginxConfig.HTTP.AccessLogFormat }, false},
	{"nginx_config.http.access_log_format_escape", "default, json or none", func(c *Config) any { return c.NginxConfig.HTTP.AccessLogFormatEscape }, false},
	{"nginx_config.http.access_log_buffer", "bytes", func(c *Config) any { return c.NginxConfig.HTTP.AccessLogBuffer }, false},
	{"nginx_config.http.keepalive_timeout", "", func(c *Config) any { return nginxTime(c.NginxConfig.HTTP.KeepaliveTimeout) }, false},
	{"nginx_config.http.keepalive_requests", "", func(c *Config) any { return c.NginxConfig.HTTP.KeepaliveRequests }, false},
	{"nginx_config.http.keepalive_time", "", func(c *Config) any { return nginxTime(c.NginxConfig.HTTP.KeepaliveTime) }, false},
	{"nginx_config.http.client_header_timeout", "", func(c *Config) any { return nginxTime(c.NginxConfig.HTTP.ClientHeaderTimeout) }, false},
	{"nginx_config.http.client_body_timeout", "", func(c *Config) any { return nginxTime(c.NginxConfig.HTTP.ClientBodyTimeout) }, false},
	{"nginx_config.http.send_timeout", "", func(c *Config) any { return nginxTime(c.NginxConfig.HTTP.SendTimeout) }, false},
	{"nginx_config.http.client_max_body_size", "bytes, or nginx's size syntax (\"1m\"); 0 is unlimited", func(c *Config) any { return c.NginxConfig.HTTP.ClientMaxBodySize }, false},
	{"nginx_config.http.underscores_in_headers", "off drops the request's fields with \"_\" in their names before the plugins and the upstream see them", func(c *Config) any { return nginxFlag(c.NginxConfig.HTTP.UnderscoresInHeaders) }, false},
	{"nginx_config.http.real_ip_header", "real_ip_*: coregate takes the client address from the connection only; refused unless real_ip_from is []", func(c *Config) any { return c.NginxConfig.HTTP.RealIPHeader }, true},
	{"nginx_config.http.real_ip_from", "", func(c *Config) any { return c.NginxConfig.HTTP.RealIPFrom }, true},
	{"nginx_config.http.real_ip_recursive", "", ex("off"), true},
	{"nginx_config.http.upstream.keepalive", "idle connections kept per upstream without a keepalive_pool of its own", func(c *Config) any { return c.NginxConfig.HTTP.Upstream.Keepalive }, false},
	{"nginx_config.http.upstream.keepalive_requests", "", func(c *Config) any { return c.NginxConfig.HTTP.Upstream.KeepaliveRequests }, false},
	{"nginx_config.http.upstream.keepalive_timeout", "", func(c *Config) any { return nginxTime(c.NginxConfig.HTTP.Upstream.KeepaliveTimeout) }, false},

	{"deployment.role", "traditional, data_plane or control_plane", func(c *Config) any { return c.Deployment.Role }, false},
	{"deployment.role_traditional.config_provider", "etcd or yaml", func(c *Config) any { return c.Deployment.RoleTraditional.ConfigProvider }, false},
	{"deployment.role_data_plane.config_provider", "yaml (apisix.yaml beside this file), json or etcd; required on a data plane", or(func(c *Config) any { return c.Deployment.RoleDataPlane.ConfigProvider }, "yaml"), true},
	{"deployment.role_control_plane.config_provider", "", or(func(c *Config) any { return c.Deployment.RoleControlPlane.ConfigProvider }, "etcd"), true},
	{"deployment.admin.admin_key_required", "", func(c *Config) any { return c.Deployment.Admin.AdminKeyRequired }, false},
	{"deployment.admin.admin_key", "key \"\": one is generated at the first start and kept in admin-keys.json", func(c *Config) any {
		var out []map[string]string
		for _, k := range c.Deployment.Admin.AdminKey {
			out = append(out, map[string]string{"name": k.Name, "key": k.Key, "role": k.Role})
		}
		return out
	}, false},
	{"deployment.admin.enable_admin_cors", "", func(c *Config) any { return c.Deployment.Admin.EnableAdminCORS }, false},
	{"deployment.admin.enable_admin_ui", "no dashboard is served yet: written true, it is reported", func(c *Config) any { return c.Deployment.Admin.EnableAdminUI }, true},
	{"deployment.admin.allow_admin", "addresses or CIDRs the Admin API answers", func(c *Config) any { return c.Deployment.Admin.AllowAdmin }, false},
	{"deployment.admin.admin_listen.ip", "", func(c *Config) any { return c.Deployment.Admin.AdminListen.IP }, false},
	{"deployment.admin.admin_listen.port", "", func(c *Config) any { return c.Deployment.Admin.AdminListen.Port }, false},
	{"deployment.admin.admin_api_version", "", func(c *Config) any { return c.Deployment.Admin.AdminAPIVersion }, false},
	{"deployment.admin.https_admin", "not supported: true is refused", fixed(false), false},
	{"deployment.etcd.host", "an external etcd cluster; not written, the node runs an etcd of its own, its data beside this file",
		func(c *Config) any { return c.Deployment.Etcd.Host }, true},
	{"deployment.etcd.prefix", "", func(c *Config) any { return c.Deployment.Etcd.Prefix }, false},
	{"deployment.etcd.timeout", "seconds", func(c *Config) any { return c.Deployment.Etcd.Timeout }, false},
	{"deployment.etcd.watch_timeout", "read, not applied yet", func(c *Config) any { return c.Deployment.Etcd.WatchTimeout }, true},
	{"deployment.etcd.startup_retry", "read, not applied yet", func(c *Config) any { return c.Deployment.Etcd.StartupRetry }, true},
	{"deployment.etcd.user", "", or(func(c *Config) any { return c.Deployment.Etcd.User }, "root"), true},
	{"deployment.etcd.password", "", or(func(c *Config) any { return c.Deployment.Etcd.Password }, "secret"), true},
	{"deployment.etcd.tls.cert", "a client certificate and its key, PEM files", or(func(c *Config) any { return c.Deployment.Etcd.TLS.Cert }, "/path/to/cert.pem"), true},
	{"deployment.etcd.tls.key", "", or(func(c *Config) any { return c.Deployment.Etcd.TLS.Key }, "/path/to/key.pem"), true},
	{"deployment.etcd.tls.sni", "", or(func(c *Config) any { return c.Deployment.Etcd.TLS.SNI }, "etcd.example.com"), true},
	{"deployment.etcd.tls.verify", "", func(c *Config) any { return c.Deployment.Etcd.TLS.Verify }, false},

	{"discovery.dns.servers", "name servers of the upstreams with discovery_type dns", or(func(c *Config) any { return c.DiscoveryDNSServers }, []string{"127.0.0.1:8600"}), true},

	{"plugins", "the plugins enabled (run order comes from their priorities)", func(c *Config) any { return c.Plugins }, false},

	{"plugin_attr.prometheus.enable_export_server", "plugin_attr: each plugin's settings; prometheus' are the node's metrics server", func(c *Config) any { return c.Prometheus.EnableExportServer }, false},
	{"plugin_attr.prometheus.export_addr.ip", "", func(c *Config) any { return c.Prometheus.ExportAddr.IP }, false},
	{"plugin_attr.prometheus.export_addr.port", "", func(c *Config) any { return c.Prometheus.ExportAddr.Port }, false},
	{"plugin_attr.prometheus.export_uri", "", func(c *Config) any { return c.Prometheus.ExportURI }, false},
	{"plugin_attr.prometheus.metric_prefix", "", func(c *Config) any { return c.Prometheus.MetricPrefix }, false},
	{"plugin_attr.prometheus.default_buckets", "apisix_http_latency's buckets, milliseconds; default: 1 ms to 60 s", or(func(c *Config) any { return c.Prometheus.DefaultBuckets }, []float64{1, 10, 100, 1000, 10000, 60000}), true},
	{"plugin_attr.prometheus.metrics", "labels added to a metric, each a variable's value", or(func(c *Config) any {
		m := map[string]any{}
		for metric, ls := range c.Prometheus.ExtraLabels {
			var labels []map[string]string
			for _, l := range ls {
				labels = append(labels, map[string]string{l.Name: "$" + l.Var})
			}
			m[metric] = map[string]any{"extra_labels": labels}
		}
		return m
	}, map[string]any{"http_status": map[string]any{"extra_labels": []map[string]string{{"upstream_addr": "$upstream_addr"}}}}), true},
}

// Template is config.yaml as `coregate init` writes it: every key
// coregate reads (Keys) with its default (Default's), each under a
// comment saying what it does; the keys that, written, would mean more
// than their default (an external etcd, a data plane's provider), or
// that have none, commented out with an example. It loads as Default
// does, plugin_attr.prometheus written out. Safe for concurrent use.
func Template() []byte {
	return render(Default(), "# config.yaml: every key coregate reads, with its default (coregate init).\n"+
		"# Keys commented out are not set: written, each means what its comment says.\n"+
		"# coregate -t checks this file; errors name its line and key.\n", false)
}

// Render is c as a config.yaml, every key Template has, those c sets
// where the template comments them out written (coregate -T): what the
// node runs with, whatever config.yaml left to the defaults. Secrets (the
// Admin API's keys, etcd's password, a keyring of its own) are written
// "<hidden>". Safe for concurrent use.
func Render(c *Config) []byte {
	return render(c, "# the configuration in effect (coregate -T): config.yaml with the defaults of what it leaves out.\n", true)
}

// written tells, for a key commented out in the template, whether c sets
// it: its value is not the default's, or as here, writing it means more.
var written = map[string]func(c *Config) bool{
	"deployment.etcd.host": func(c *Config) bool { return c.Deployment.Etcd.External },
}

// hide makes v, the value of key, fit to print (Render).
func hide(key string, v any) any {
	switch key {
	case "deployment.etcd.password":
		if v != "" {
			return hiddenValue
		}
	case "deployment.admin.admin_key":
		keys := v.([]map[string]string)
		for _, k := range keys {
			if k["key"] != "" {
				k["key"] = hiddenValue
			}
		}
	}
	return v
}

func render(c *Config, header string, effective bool) []byte {
	def := Default()
	var b strings.Builder
	b.WriteString(header)
	var open []string // the sections of the key written last, outermost first
	for _, s := range settings {
		path := strings.Split(s.key, ".")
		parents, leaf := path[:len(path)-1], path[len(path)-1]
		if len(open) == 0 || len(parents) == 0 || parents[0] != open[0] {
			b.WriteByte('\n') // a blank line between the top-level keys
			open = nil
		}
		kept := 0
		for kept < len(open) && kept < len(parents) && open[kept] == parents[kept] {
			kept++
		}
		open = open[:kept]
		for _, p := range parents[kept:] {
			fmt.Fprintf(&b, "%s%s:\n", strings.Repeat("  ", len(open)), p)
			open = append(open, p)
		}
		indent := strings.Repeat("  ", len(parents))
		if s.doc != "" {
			fmt.Fprintf(&b, "%s# %s\n", indent, s.doc)
		}
		val := s.val(c)
		off := s.off
		if e, ok := val.(example); ok {
			val, off = e.v, true
		} else if off && effective {
			if w := written[s.key]; w != nil {
				off = !w(c)
			} else {
				off = reflect.DeepEqual(val, s.val(def))
			}
		}
		if effective {
			val = hide(s.key, val)
		}
		lead := indent
		if off {
			lead += "# "
		}
		var v strings.Builder
		enc := yaml.NewEncoder(&v)
		enc.SetIndent(2)
		if err := enc.Encode(val); err != nil {
			panic(fmt.Sprintf("nodeconf: template: %s: %v", s.key, err))
		}
		text := strings.TrimSuffix(v.String(), "\n")
		if k := reflect.ValueOf(val).Kind(); k != reflect.Slice && k != reflect.Map {
			fmt.Fprintf(&b, "%s%s: %s\n", lead, leaf, text)
			continue
		}
		fmt.Fprintf(&b, "%s%s:\n", lead, leaf)
		for _, l := range strings.Split(text, "\n") {
			fmt.Fprintf(&b, "%s  %s\n", lead, l)
		}
	}
	return []byte(b.String())
}
