package nodeconf

import (
	"coregate/admin/keyring"
	"coregate/admin/spec"
	"encoding/json"
	"fmt"
	"math"
	"net/netip"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"
)

// Config is a node's conf/config.yaml: APISIX's keys with APISIX's
// defaults (apisix/cli/config.lua) for everything not written. It is read
// once at start; treat it as read-only afterwards.
type Config struct {
	APISIX      APISIXConfig
	NginxConfig NginxConfig
	Deployment  DeploymentConfig
	// Plugins is the enabled plugin list (APISIX's default list when
	// unset); run order comes from plugin priorities, not from this list.
	Plugins []string
	// PluginAttr is plugin_attr as written: plugin name → its settings as
	// JSON. Each plugin applies its own defaults.
	PluginAttr map[string]json.RawMessage
	// Prometheus is plugin_attr.prometheus as the node itself reads it
	// (the export server), with APISIX's defaults.
	Prometheus PrometheusAttr
	// DiscoveryDNSServers is discovery.dns.servers: the name servers
	// upstreams with discovery_type dns find their nodes with, "ip" or
	// "ip:port" (worker.Config.DiscoveryDNS). Other discoveries are
	// reported, not supported yet.
	DiscoveryDNSServers []string
	// Dir is the directory config.yaml was read from; the standalone file
	// (apisix.yaml / apisix.json) lives there.
	Dir string
}

// APISIXConfig is the apisix section.
type APISIXConfig struct {
	NodeListen         []Listen // default [{Port: 9080}]
	EnableServerTokens bool     // default true
	RouterHTTP         string   // radixtree_host_uri (default) or radixtree_uri
	EnableAdmin        bool     // default true; false on a data plane
	EnableControl      bool     // default true
	// Control is apisix.control's ip and port: where the Control API is
	// served when EnableControl is set; default 127.0.0.1:9090.
	Control                            Listen
	ShowUpstreamStatusInResponseHeader bool
	// ID is apisix.id: the node's id when no conf/apisix.uid was kept
	// beside config.yaml yet ("" for a new random one).
	ID string
	// PIDFile is apisix.pid_file, coregate's own key: the file the
	// supervisor writes its pid to and holds locked while it runs, which
	// `coregate -s` reads (APISIX's is nginx's logs/nginx.pid under its
	// prefix); relative to the directory of config.yaml (PIDFilePath);
	// default coregate.pid there, beside the node's other files
	// (apisix.uid, config-cache.json), so that logs/ holds logs only.
	PIDFile string
	// NormalizeURILikeServlet is apisix.normalize_uri_like_servlet: routes
	// match the path as a Java servlet container maps it, its segments'
	// ";" parameters removed (worker.Config.NormalizeURILikeServlet).
	NormalizeURILikeServlet bool
	// DNSResolver is apisix.dns_resolver: the name servers upstream node
	// host names are resolved with, "ip" or "ip:port"; empty means the
	// system resolver. DNSResolverValid (dns_resolver_valid), when not
	// zero, is how long a name's addresses are kept whatever their TTL;
	// ResolverTimeout (resolver_timeout, default 5 s) bounds one lookup
	// (worker.Config.DNS).
	DNSResolver      []string
	DNSResolverValid time.Duration
	ResolverTimeout  time.Duration
	// SSLTrustedCertificate is apisix.ssl.ssl_trusted_certificate: the CAs
	// the node trusts as a TLS client (etcd over https), a comma-separated
	// list of "system" (the system's store) and PEM files; default "system".
	SSLTrustedCertificate string
	// SSL is apisix.ssl: the HTTPS listeners and their TLS settings.
	SSL SSL
	// DataEncryption is apisix.data_encryption; default
	// enable_encrypt_fields true with APISIX's keyring (keyring.Default).
	DataEncryption DataEncryption
	// SecretTTL and SecretNegTTL are apisix.lru.secret.ttl and neg_ttl:
	// how long a value read from a secret manager, and a failure to read
	// one, are kept before the manager is asked again (the secret
	// Resolver's TTL and NegTTL); default 300 s and 60 s, as APISIX's.
	SecretTTL, SecretNegTTL time.Duration
}

// DataEncryption is apisix.data_encryption: what is kept encrypted at
// rest, as APISIX keeps it. With a Keyring, SSL objects' private keys are
// stored encrypted; with EnableEncryptFields too, so are the fields each
// plugin names secret (its schema's encrypt_fields), where the node's
// configuration comes from etcd. Values are decrypted where they are
// used: a value stored in clear stays readable.
type DataEncryption struct {
	EnableEncryptFields bool
	// Keyring is nil when keyring is null or empty (or data_encryption
	// is null): everything is stored in clear, knowingly.
	Keyring *keyring.Keyring
}

// FieldsKeyring is the keyring that encrypts plugins' encrypt_fields on
// a node whose configuration comes from provider: nil (in clear) unless
// EnableEncryptFields is set and provider is etcd, as APISIX's
// enable_gde.
func (d *DataEncryption) FieldsKeyring(provider Provider) *keyring.Keyring {
	if !d.EnableEncryptFields || provider.Kind != "etcd" {
		return nil
	}
	return d.Keyring
}

// SSL is apisix.ssl, but ssl_trusted_certificate
// (APISIXConfig.SSLTrustedCertificate): where the node serves HTTPS, with
// the certificates of the ssls objects.
type SSL struct {
	Enable bool     // default true
	Listen []Listen // default [{Port: 9443}]
	// Protocols is ssl_protocols, e.g. "TLSv1.2 TLSv1.3" (the default).
	Protocols string
	// Ciphers is ssl_ciphers, OpenSSL's names joined by ":" (APISIX's
	// list by default).
	Ciphers string
	// SessionTickets is ssl_session_tickets (default false).
	SessionTickets bool
	// FallbackSNI is fallback_sni: the server name whose certificate a
	// handshake without SNI gets; "" means none.
	FallbackSNI string
}

// DefaultSSLCiphers is APISIX's apisix.ssl.ssl_ciphers.
const DefaultSSLCiphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:" +
	"ECDHE-ECDSA-AES256-GCM-SHA384:ECDHE-RSA-AES256-GCM-SHA384:" +
	"ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:" +
	"DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"

// Listen is an address to listen on; IP "" means every address.
type Listen struct {
	IP   string
	Port int
}

// Addr is the listen address "ip:port" (":port" for every address).
func (l Listen) Addr() string {
	ip := l.IP
	if strings.IndexByte(ip, ':') >= 0 {
		ip = "[" + ip + "]"
	}
	return ip + ":" + strconv.Itoa(l.Port)
}

// PIDFilePath is the pid file: PIDFile as it is when absolute, else
// relative to dir (the directory of config.yaml).
func (a *APISIXConfig) PIDFilePath(dir string) string {
	if filepath.IsAbs(a.PIDFile) || dir == "" {
		return a.PIDFile
	}
	return filepath.Join(dir, a.PIDFile)
}

// DefaultPIDFile is apisix.pid_file's default, relative to the directory
// of config.yaml.
const DefaultPIDFile = "coregate.pid"

// NginxConfig is the nginx_config section.
type NginxConfig struct {
	WorkerProcesses int // 0 means auto (one per CPU); default auto
	// ErrorLog is nginx's error_log: the file the node's processes log
	// to, relative to the directory of config.yaml (ErrorLogPath); "" or
	// "stderr" (the default, where APISIX's is logs/error.log) is
	// standard error, for systemd's journal.
	ErrorLog          string
	ErrorLogLevel     string // default warn
	WorkerConnections int    // event.worker_connections, default 10620
	HTTP              NginxHTTP
}

// ErrorLogPath is the error log's file, relative to dir (the directory of
// config.yaml) unless absolute; "" for standard error.
func (g *NginxConfig) ErrorLogPath(dir string) string {
	if g.ErrorLog == "" || g.ErrorLog == "stderr" {
		return ""
	}
	if filepath.IsAbs(g.ErrorLog) || dir == "" {
		return g.ErrorLog
	}
	return filepath.Join(dir, g.ErrorLog)
}

// NginxHTTP is nginx_config.http.
type NginxHTTP struct {
	EnableAccessLog bool // default true
	// AccessLog is the access log's file, relative to the directory of
	// config.yaml (AccessLogPath); default logs/access.log.
	AccessLog string
	// AccessLogFormat is nginx's log_format (default APISIX's, with
	// $apisix_request_id); AccessLogFormatEscape its escape= (default,
	// json or none); AccessLogBuffer the buffer size in bytes (16384).
	AccessLogFormat       string
	AccessLogFormatEscape string
	AccessLogBuffer       int64
	KeepaliveTimeout      time.Duration // default 60 s
	ClientHeaderTimeout   time.Duration // default 60 s
	ClientBodyTimeout     time.Duration // default 60 s
	SendTimeout           time.Duration // default 10 s
	ClientMaxBodySize     int64         // bytes; 0 (default) is unlimited
	// UnderscoresInHeaders is underscores_in_headers (default on, as
	// APISIX writes it): off drops the request's fields whose names
	// have a "_", as nginx does with ignore_invalid_headers on.
	UnderscoresInHeaders bool
	Upstream             NginxUpstream
	// RealIPHeader and RealIPFrom are real_ip_header and real_ip_from as
	// read; coregate takes no client address from a header, and refuses
	// a config.yaml that asks it to (see the package doc).
	RealIPHeader string   // default X-Real-IP
	RealIPFrom   []string // default [127.0.0.1, unix:]
	// KeepaliveRequests and KeepaliveTime are nginx's keepalive_requests
	// and keepalive_time, which APISIX leaves at nginx's defaults (1000 and
	// 1 h): a client connection closes after its KeepaliveRequests-th
	// request, or after the first request that starts KeepaliveTime or
	// more after it was opened. As in nginx, a KeepaliveTime of 0, like a
	// KeepaliveTimeout of 0, leaves one request per connection.
	KeepaliveRequests int
	KeepaliveTime     time.Duration
}

// DefaultAccessLogFormat is APISIX's nginx_config.http.access_log_format.
const DefaultAccessLogFormat = `$remote_addr - $remote_user [$time_local] $http_host "$request" $status $body_bytes_sent $request_time "$http_referer" "$http_user_agent" $upstream_addr $upstream_status $upstream_response_time "$upstream_scheme://$upstream_host$upstream_uri" "$apisix_request_id"`

// AccessLogPath is the access log's file: AccessLog as it is when
// absolute, else relative to dir (the directory of config.yaml).
func (h *NginxHTTP) AccessLogPath(dir string) string {
	if filepath.IsAbs(h.AccessLog) || dir == "" {
		return h.AccessLog
	}
	return filepath.Join(dir, h.AccessLog)
}

// NginxUpstream is nginx_config.http.upstream: the keep-alive pool used
// when an upstream has no keepalive_pool of its own.
type NginxUpstream struct {
	Keepalive         int           // default 320
	KeepaliveRequests int           // default 1000
	KeepaliveTimeout  time.Duration // default 60 s
}

// PrometheusAttr is plugin_attr.prometheus: where the supervisor serves
// the metrics every worker writes.
type PrometheusAttr struct {
	EnableExportServer bool   // default true
	ExportAddr         Listen // default 127.0.0.1:9091; ip "" is 127.0.0.1
	ExportURI          string // default /apisix/prometheus/metrics
	// MetricPrefix replaces apisix_ at the head of the APISIX metric
	// names the export server serves (default apisix_).
	MetricPrefix string
	// DefaultBuckets are apisix_http_latency's buckets, in milliseconds,
	// increasing; nil for APISIX's (1 ms to 60 s). The prometheus plugin
	// reads them from PluginAttr.
	DefaultBuckets []float64
	// ExtraLabels are metrics.<metric>.extra_labels, by metric
	// (http_status, http_latency, bandwidth): labels added after APISIX's,
	// each the value of a variable.
	ExtraLabels map[string][]ExtraLabel
}

// ExtraLabel is one of plugin_attr.prometheus.metrics.<metric>.extra_labels:
// {name: $var}.
type ExtraLabel struct {
	Name string
	Var  string // without its "$"
}

// builtinLabels are the labels of the metrics that take extra labels
// (exporter.lua's metric_label_map), which an extra label may not repeat.
var builtinLabels = map[string][]string{
	"http_status": {"code", "route", "matched_uri", "matched_host", "service", "consumer", "node",
		"request_type", "request_llm_model", "llm_model", "response_source"},
	"http_latency": {"type", "route", "service", "consumer", "node", "request_type", "request_llm_model", "llm_model", "le"},
	"bandwidth":    {"type", "route", "service", "consumer", "node", "request_type", "request_llm_model", "llm_model"},
}

var labelName = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)

// DeploymentConfig is the deployment section.
type DeploymentConfig struct {
	Role             string // traditional (default), data_plane, control_plane
	RoleTraditional  RoleConfig
	RoleDataPlane    RoleConfig
	RoleControlPlane RoleConfig
	Admin            AdminConfig
	Etcd             EtcdConfig
}

// RoleConfig is deployment.role_<role>.
type RoleConfig struct {
	ConfigProvider string
}

// AdminConfig is deployment.admin.
type AdminConfig struct {
	AdminKeyRequired bool // default true
	AdminKey         []AdminKey
	EnableAdminCORS  bool     // default true
	EnableAdminUI    bool     // default true
	AllowAdmin       []string // default [127.0.0.0/24]
	AdminListen      Listen   // default 0.0.0.0:9180
	AdminAPIVersion  string   // default v3
}

// AdminKey is one deployment.admin.admin_key entry. An empty Key means
// "generate one" (APISIX writes the generated key back).
type AdminKey struct {
	Name string
	Key  string
	Role string // admin or viewer
}

// EtcdConfig is deployment.etcd.
type EtcdConfig struct {
	// Host is the etcd cluster's client URLs (default
	// [http://127.0.0.1:2379]). Written, it names an external cluster;
	// left out, the node starts an etcd of its own inside its process
	// (External false), with its data beside config.yaml.
	Host         []string
	External     bool   // deployment.etcd.host is written
	Prefix       string // default /apisix
	Timeout      int    // seconds, default 30
	WatchTimeout int    // seconds, default 50
	StartupRetry int    // default 2
	User         string
	Password     string
	TLS          EtcdTLS
}

// EtcdTLS is deployment.etcd.tls.
type EtcdTLS struct {
	Cert   string
	Key    string
	SNI    string
	Verify bool // default true
	// TrustedCA is apisix.ssl.ssl_trusted_certificate (APISIX verifies
	// etcd's certificate against it), copied here when config.yaml is read.
	TrustedCA string
}

// Provider says where a node's routes, services and upstreams come from.
type Provider struct {
	Kind string // "etcd", "yaml" or "json"
	// File is the standalone file a file-driven data plane reads
	// (apisix.yaml or apisix.json beside config.yaml); empty otherwise,
	// including for a traditional node with the yaml provider, whose
	// configuration comes through the Admin API.
	File string
}

// Provider tells the configuration source of the node's role.
func (c *Config) Provider() Provider {
	switch c.Deployment.Role {
	case "data_plane":
		switch k := c.Deployment.RoleDataPlane.ConfigProvider; k {
		case "yaml":
			return Provider{Kind: k, File: filepath.Join(c.Dir, "apisix.yaml")}
		case "json":
			return Provider{Kind: k, File: filepath.Join(c.Dir, "apisix.json")}
		default:
			return Provider{Kind: k}
		}
	case "control_plane":
		return Provider{Kind: "etcd"}
	}
	return Provider{Kind: c.Deployment.RoleTraditional.ConfigProvider}
}

// ServerHeader is the Server response header value: "APISIX/<version>", or
// "APISIX" when enable_server_tokens is false.
func (c *Config) ServerHeader(version string) string {
	if c.APISIX.EnableServerTokens {
		return "APISIX/" + version
	}
	return "APISIX"
}

// Ports are the TCP ports the node itself listens on by its
// configuration: node_listen, the Admin API's when it is enabled, the
// Prometheus export server's and the Control API's when they are. Anything the node opens on a
// port of its own choosing (the embedded etcd) keeps clear of them.
func (c *Config) Ports() []int {
	var ps []int
	for _, l := range c.APISIX.NodeListen {
		ps = append(ps, l.Port)
	}
	if c.APISIX.SSL.Enable {
		for _, l := range c.APISIX.SSL.Listen {
			ps = append(ps, l.Port)
		}
	}
	if c.APISIX.EnableAdmin {
		ps = append(ps, c.Deployment.Admin.AdminListen.Port)
	}
	if c.Prometheus.EnableExportServer {
		ps = append(ps, c.Prometheus.ExportAddr.Port)
	}
	if c.APISIX.EnableControl {
		ps = append(ps, c.APISIX.Control.Port)
	}
	return ps
}

// WorkerCount is the number of workers: worker_processes, or for auto the
// number of CPUs this process may run on (Workers).
func (c *Config) WorkerCount() int {
	return Workers(c.NginxConfig.WorkerProcesses, runtime.NumCPU())
}

// Workers is what worker_processes n means on a node whose workers may run
// on cpus CPUs: n, or for auto (0) one worker per CPU. It is the one
// reading of auto; the supervisor applies it to the CPUs it pins workers
// to.
func Workers(n, cpus int) int {
	if n > 0 {
		return n
	}
	return max(cpus, 1)
}

// defaultPlugins is APISIX's enabled plugin list when config.yaml has none.
var defaultPlugins = []string{
	"real-ip", "ai", "client-control", "proxy-control", "request-id", "zipkin",
	"ext-plugin-pre-req", "fault-injection", "mocking", "serverless-pre-function",
	"cors", "ip-restriction", "ua-restriction", "referer-restriction", "csrf",
	"uri-blocker", "request-validation", "chaitin-waf", "multi-auth",
	"openid-connect", "cas-auth", "authz-casbin", "authz-casdoor", "wolf-rbac",
	"ldap-auth", "hmac-auth", "basic-auth", "jwt-auth", "jwe-decrypt", "key-auth",
	"consumer-restriction", "attach-consumer-label", "forward-auth", "opa",
	"authz-keycloak", "proxy-cache", "body-transformer", "ai-prompt-template",
	"ai-prompt-decorator", "ai-prompt-guard", "ai-rag", "ai-rate-limiting",
	"ai-proxy-multi", "ai-proxy", "ai-aws-content-moderation",
	"ai-aliyun-content-moderation", "proxy-mirror", "proxy-rewrite", "workflow",
	"api-breaker", "limit-conn", "limit-count", "limit-req", "gzip",
	"traffic-split", "redirect", "response-rewrite", "mcp-bridge", "degraphql",
	"kafka-proxy", "grpc-transcode", "grpc-web", "http-dubbo", "public-api",
	"prometheus", "datadog", "etcd-logger", "lago", "loki-logger",
	"elasticsearch-logger", "echo", "loggly", "http-logger", "splunk-hec-logging",
	"skywalking-logger", "google-cloud-logging", "sls-logger", "tcp-logger",
	"kafka-logger", "rocketmq-logger", "syslog", "udp-logger", "file-logger",
	"clickhouse-logger", "tencent-cloud-cls", "inspect", "example-plugin",
	"aws-lambda", "azure-functions", "openwhisk", "openfunction",
	"serverless-post-function", "ext-plugin-post-req", "ext-plugin-post-resp",
	"ai-request-rewrite",
}

// defaultKeyring is keyring.Default, parsed once.
var defaultKeyring = func() *keyring.Keyring {
	k, err := keyring.Parse(keyring.Default)
	if err != nil {
		panic(err)
	}
	return k
}()

// Default is the configuration of a node whose config.yaml is
// empty: APISIX's defaults. Dir is "conf".
func Default() *Config {
	return &Config{
		APISIX: APISIXConfig{
			NodeListen:            []Listen{{Port: 9080}},
			EnableServerTokens:    true,
			SSLTrustedCertificate: "system",
			ResolverTimeout:       5 * time.Second,
			SecretTTL:             300 * time.Second,
			SecretNegTTL:          60 * time.Second,
			SSL: SSL{
				Enable:    true,
				Listen:    []Listen{{Port: 9443}},
				Protocols: "TLSv1.2 TLSv1.3",
				Ciphers:   DefaultSSLCiphers,
			},
			RouterHTTP:     "radixtree_host_uri",
			PIDFile:        DefaultPIDFile,
			EnableAdmin:    true,
			EnableControl:  true,
			Control:        Listen{IP: "127.0.0.1", Port: 9090},
			DataEncryption: DataEncryption{EnableEncryptFields: true, Keyring: defaultKeyring},
		},
		NginxConfig: NginxConfig{
			ErrorLogLevel:     "warn",
			WorkerConnections: 10620,
			HTTP: NginxHTTP{
				EnableAccessLog:       true,
				AccessLog:             "logs/access.log",
				AccessLogFormat:       DefaultAccessLogFormat,
				AccessLogFormatEscape: "default",
				AccessLogBuffer:       16384,
				UnderscoresInHeaders:  true,
				KeepaliveTimeout:      60 * time.Second,
				KeepaliveRequests:     1000,
				KeepaliveTime:         time.Hour,
				ClientHeaderTimeout:   60 * time.Second,
				ClientBodyTimeout:     60 * time.Second,
				SendTimeout:           10 * time.Second,
				Upstream: NginxUpstream{
					Keepalive:         spec.DefaultKeepaliveSize,
					KeepaliveRequests: spec.DefaultKeepaliveRequests,
					KeepaliveTimeout:  spec.DefaultKeepaliveIdle,
				},
				RealIPHeader: "X-Real-IP",
				RealIPFrom:   []string{"127.0.0.1", "unix:"},
			},
		},
		Deployment: DeploymentConfig{
			Role:            "traditional",
			RoleTraditional: RoleConfig{ConfigProvider: "etcd"},
			Admin: AdminConfig{
				AdminKeyRequired: true,
				AdminKey:         []AdminKey{{Name: "admin", Role: "admin"}},
				EnableAdminCORS:  true,
				EnableAdminUI:    true,
				AllowAdmin:       []string{"127.0.0.0/24"},
				AdminListen:      Listen{IP: "0.0.0.0", Port: 9180},
				AdminAPIVersion:  "v3",
			},
			Etcd: EtcdConfig{
				Host:         []string{"http://127.0.0.1:2379"},
				Prefix:       "/apisix",
				Timeout:      30,
				WatchTimeout: 50,
				StartupRetry: 2,
				TLS:          EtcdTLS{Verify: true, TrustedCA: "system"},
			},
		},
		Plugins: slices.Clone(defaultPlugins),
		Prometheus: PrometheusAttr{
			EnableExportServer: true,
			ExportAddr:         Listen{IP: "127.0.0.1", Port: 9091},
			ExportURI:          "/apisix/prometheus/metrics",
			MetricPrefix:       "apisix_",
		},
		Dir: "conf",
	}
}

// Load reads config.yaml at path: ${{VAR}} references are
// resolved from the environment, written keys override APISIX's defaults.
// Warnings list every key that is not used, each "PATH:LINE: " and then
// "unknown key apisix.foo.bar"
// for keys APISIX does not have either, "not supported yet: <key>" for
// APISIX keys coregate does not implement yet; and the configurations
// APISIX warns about at start (AdminKeyBypassed). A value of the wrong
// type, and an APISIX key coregate does not implement whose value,
// ignored, would weaken security or lose data (the package doc lists
// them), is a *NodeConfigError naming its key.
func Load(path string) (*Config, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, fmt.Errorf("spec: reading node config: %w", err)
	}
	return Parse(data, path)
}

// Parse is Load for a config.yaml already read; path
// names it in errors and gives Dir.
func Parse(data []byte, path string) (*Config, []string, error) {
	c := Default()
	c.Dir = filepath.Dir(path)
	p := &cfgParser{file: path, c: c}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil {
		return nil, nil, syntaxError(path, err)
	}
	if err := spec.ResolveEnv(&doc, os.LookupEnv); err != nil {
		return nil, nil, &NodeConfigError{File: path, Msg: err.Error()}
	}
	if len(doc.Content) > 0 {
		if err := p.walk("", doc.Content[0], p.top()); err != nil {
			return nil, nil, p.located(err)
		}
	}
	if err := p.finish(); err != nil {
		return nil, nil, p.located(err)
	}
	return c, p.warnings, nil
}

// yamlLine is the head of the YAML library's syntax errors.
var yamlLine = regexp.MustCompile(`^yaml: line (\d+): `)

// syntaxError is a config.yaml that does not parse, its line taken out of
// the YAML library's message.
func syntaxError(path string, err error) error {
	e := &NodeConfigError{File: path, Msg: err.Error()}
	if m := yamlLine.FindStringSubmatch(e.Msg); m != nil {
		e.Line, _ = strconv.Atoi(m[1])
		e.Msg = "yaml: " + e.Msg[len(m[0]):]
	}
	return e
}

// located gives err, a *NodeConfigError naming a key, the line the key
// is written on (its list item's, for "key[i]"), or its nearest written
// parent's.
func (p *cfgParser) located(err error) error {
	e, ok := err.(*NodeConfigError)
	if !ok || e.Line > 0 {
		return err
	}
	e.Line = p.lineOf(e.Key)
	return e
}

type cfgParser struct {
	file     string
	c        *Config
	warnings []string
	// realIP is the first of nginx_config.http's real_ip_* keys written,
	// "" if none is (finish).
	realIP string
	// lines are the lines the keys read are written on, by dotted key,
	// list items as "key[i]" (located).
	lines map[string]int
	// keys, when not nil, makes walk list the keys of its sections
	// instead of reading a document (Keys); walks counts its calls.
	keys  *[]string
	walks int
}

// at notes the line of key, written at n.
func (p *cfgParser) at(key string, n *yaml.Node) {
	if p.lines == nil {
		p.lines = map[string]int{}
	}
	p.lines[key] = n.Line
}

// handler reads the value of one key; a nil handler marks an APISIX key
// that is not supported yet.
type handler func(key string, n *yaml.Node) error

type section map[string]handler

func unsupported(keys ...string) section {
	s := make(section, len(keys))
	for _, k := range keys {
		s[k] = nil
	}
	return s
}

func (s section) with(more section) section {
	for k, h := range more {
		s[k] = h
	}
	return s
}

func join(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func isNull(n *yaml.Node) bool {
	return n == nil || n.Kind == yaml.ScalarNode && n.ShortTag() == "!!null"
}

func (p *cfgParser) errf(key, format string, args ...any) error {
	return &NodeConfigError{File: p.file, Key: key, Msg: fmt.Sprintf(format, args...)}
}

// notYet reports an APISIX key coregate does not implement and can
// ignore.
func (p *cfgParser) notYet(key string) {
	p.warn(key, "not supported yet: "+key)
}

// warn adds a warning about key: "FILE:LINE: msg", the line key is
// written on (or its nearest written parent's; none when neither is).
func (p *cfgParser) warn(key, msg string) {
	if l := p.lineOf(key); l > 0 {
		p.warnings = append(p.warnings, fmt.Sprintf("%s:%d: %s", p.file, l, msg))
		return
	}
	p.warnings = append(p.warnings, p.file+": "+msg)
}

// lineOf is the line key is written on, or its nearest written
// parent's ("a.b[2].c", then "a.b[2]", "a.b", "a"); 0 when none is.
func (p *cfgParser) lineOf(key string) int {
	for key != "" {
		if l, ok := p.lines[key]; ok {
			return l
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return 0
}

// refused is the error for an APISIX key coregate does not implement
// whose value, ignored, would weaken security or lose data (the package
// doc lists them): harm is what ignoring it would do, fix what to write
// instead.
func (p *cfgParser) refused(key, harm, fix string) error {
	return p.errf(key, "not supported, and ignoring it would %s: %s", harm, fix)
}

// refuseTrue refuses true (refused); false asks for what coregate does.
func (p *cfgParser) refuseTrue(harm, fix string) handler {
	return func(key string, n *yaml.Node) error {
		var v bool
		if err := p.boolean(&v)(key, n); err != nil {
			return err
		}
		if v {
			return p.refused(key, harm, fix)
		}
		return nil
	}
}

// refuseSet refuses any string but the empty one (refused), null
// included in what is accepted.
func (p *cfgParser) refuseSet(harm, fix string) handler {
	return func(key string, n *yaml.Node) error {
		if isNull(n) {
			return nil
		}
		var v string
		if err := p.str(&v)(key, n); err != nil {
			return err
		}
		if v != "" {
			return p.refused(key, harm, fix)
		}
		return nil
	}
}

// The nginx_config snippets are nginx directives, which coregate does not
// run and whose effect it cannot tell.
const (
	snippetHarm = "skip the nginx directives it holds, and whatever access rules, limits or headers they enforce"
	snippetFix  = "remove it, and configure what it does through routes, plugins or global rules"
)

// describe shows a value in "got …" messages.
func describe(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		if n.ShortTag() == "!!str" {
			return fmt.Sprintf("%q", n.Value)
		}
		return n.Value
	}
	return "?"
}

func (p *cfgParser) walk(prefix string, n *yaml.Node, s section) error {
	p.walks++
	if p.keys != nil {
		p.list(prefix, s)
		return nil
	}
	n = spec.Unalias(n)
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return p.errf(prefix, "want a mapping, got %s", describe(n))
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := spec.Unalias(n.Content[i]), n.Content[i+1]
		key := join(prefix, k.Value)
		p.at(key, k)
		h, known := s[k.Value]
		switch {
		case !known:
			p.unknown(key, v)
		case h == nil:
			p.notYet(key)
		default:
			if err := h(key, spec.Unalias(v)); err != nil {
				return err
			}
		}
	}
	return nil
}

// Keys are the keys config.yaml may set that coregate reads, dotted
// ("nginx_config.http.keepalive_timeout"), sorted: each section's keys
// whose values are not sections themselves. A list of mappings
// (apisix.node_listen, deployment.admin.admin_key) is one key, and so
// is plugin_attr.<plugin> for every plugin but prometheus, whose
// settings the node reads itself. APISIX's keys coregate does not
// implement are not among them.
func Keys() []string {
	var keys []string
	p := &cfgParser{file: "config.yaml", c: Default(), keys: &keys}
	p.list("", p.top())
	p.list("plugin_attr.prometheus", p.prometheus())
	slices.Sort(keys)
	return slices.Compact(keys)
}

// list is walk's work for Keys: each key of s with a handler is called
// with an empty mapping; one that walks a section of its own has its
// keys listed that way, the others are leaves.
func (p *cfgParser) list(prefix string, s section) {
	empty := &yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	for k, h := range s {
		if h == nil {
			continue
		}
		key := join(prefix, k)
		before := p.walks
		_ = h(key, empty) // a leaf's handler refuses the mapping
		if p.walks == before {
			*p.keys = append(*p.keys, key)
		}
	}
}

// unknown warns about every leaf under an unknown key.
func (p *cfgParser) unknown(key string, v *yaml.Node) {
	v = spec.Unalias(v)
	if v != nil && v.Kind == yaml.MappingNode && len(v.Content) > 0 {
		for i := 0; i+1 < len(v.Content); i += 2 {
			k := spec.Unalias(v.Content[i])
			p.at(key+"."+k.Value, k)
			p.unknown(key+"."+k.Value, v.Content[i+1])
		}
		return
	}
	p.warn(key, "unknown key "+key)
}

func (p *cfgParser) boolean(dst *bool) handler {
	return func(key string, n *yaml.Node) error {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!bool" {
			return p.errf(key, "want true or false, got %s", describe(n))
		}
		return n.Decode(dst)
	}
}

func (p *cfgParser) integer(dst *int, minV, maxV int) handler {
	return func(key string, n *yaml.Node) error {
		var v int
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil || v < minV || v > maxV {
			return p.errf(key, "want an integer from %d to %d, got %s", minV, maxV, describe(n))
		}
		*dst = v
		return nil
	}
}

// integerNotYet is integer for a key that is read but not applied yet:
// written, it is reported.
func (p *cfgParser) integerNotYet(dst *int, minV, maxV int) handler {
	read := p.integer(dst, minV, maxV)
	return func(key string, n *yaml.Node) error {
		if err := read(key, n); err != nil {
			return err
		}
		p.notYet(key)
		return nil
	}
}

// onOff reads an nginx flag: "on" or "off", or YAML's true or false.
func (p *cfgParser) onOff(key string, n *yaml.Node) (bool, error) {
	if n.Kind == yaml.ScalarNode {
		switch {
		case n.ShortTag() == "!!bool":
			var v bool
			err := n.Decode(&v)
			return v, err
		case n.ShortTag() == "!!str" && (n.Value == "on" || n.Value == "off"):
			return n.Value == "on", nil
		}
	}
	return false, p.errf(key, `want "on" or "off", got %s`, describe(n))
}

// wroteRealIP notes that a real_ip_* key is written (finish).
func (p *cfgParser) wroteRealIP(key string) {
	if p.realIP == "" {
		p.realIP = key
	}
}

func (p *cfgParser) str(dst *string) handler {
	return func(key string, n *yaml.Node) error {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" {
			return p.errf(key, "want a string, got %s", describe(n))
		}
		*dst = n.Value
		return nil
	}
}

func (p *cfgParser) enum(dst *string, vals ...string) handler {
	return func(key string, n *yaml.Node) error {
		if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!str" || !slices.Contains(vals, n.Value) {
			return p.errf(key, "want one of %s, got %s", strings.Join(vals, ", "), describe(n))
		}
		*dst = n.Value
		return nil
	}
}

// strList reads a list of strings; check, when set, vets each item.
func (p *cfgParser) strList(dst *[]string, check func(string) bool, want string) handler {
	return func(key string, n *yaml.Node) error {
		if n.Kind != yaml.SequenceNode {
			return p.errf(key, "want a list of %s, got %s", want, describe(n))
		}
		out := make([]string, 0, len(n.Content))
		for i, e := range n.Content {
			e = spec.Unalias(e)
			p.at(fmt.Sprintf("%s[%d]", key, i), e)
			if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!str" || check != nil && !check(e.Value) {
				return p.errf(fmt.Sprintf("%s[%d]", key, i), "want %s, got %s", want, describe(e))
			}
			out = append(out, e.Value)
		}
		*dst = out
		return nil
	}
}

// duration reads nginx time syntax; a bare integer is seconds.
func (p *cfgParser) duration(dst *time.Duration) handler {
	return func(key string, n *yaml.Node) error {
		if n.Kind == yaml.ScalarNode {
			switch n.ShortTag() {
			case "!!int":
				var v int64
				if n.Decode(&v) == nil && v >= 0 && v <= int64(time.Duration(1<<62)/time.Second) {
					*dst = time.Duration(v) * time.Second
					return nil
				}
			case "!!str":
				d, err := ParseNginxDuration(n.Value)
				if err == nil {
					*dst = d
					return nil
				}
			}
		}
		return p.errf(key, `want an nginx time such as "60s", got %s`, describe(n))
	}
}

// size reads nginx size syntax; a bare integer is bytes.
func (p *cfgParser) size(dst *int64) handler {
	return func(key string, n *yaml.Node) error {
		if n.Kind == yaml.ScalarNode {
			switch n.ShortTag() {
			case "!!int":
				var v int64
				if n.Decode(&v) == nil && v >= 0 {
					*dst = v
					return nil
				}
			case "!!str":
				s, err := ParseNginxSize(n.Value)
				if err == nil {
					*dst = s
					return nil
				}
			}
		}
		return p.errf(key, `want an nginx size such as "0" or "1m", got %s`, describe(n))
	}
}

// seconds reads a whole number of seconds, at least minV (APISIX's
// integer keys of seconds).
func (p *cfgParser) seconds(dst *time.Duration, minV int) handler {
	return func(key string, n *yaml.Node) error {
		var v int
		if err := p.integer(&v, minV, 1<<31-1)(key, n); err != nil {
			return err
		}
		*dst = time.Duration(v) * time.Second
		return nil
	}
}

// validDNSServer tells whether s is a name server's address: an IP
// address, with a port or not ("[v6]:port").
func validDNSServer(s string) bool {
	if _, err := netip.ParseAddrPort(s); err == nil {
		return true
	}
	_, err := netip.ParseAddr(s)
	return err == nil
}

func validAddrOrPrefix(s string) bool { return spec.ValidIPOrCIDR(s) }

func (p *cfgParser) top() section {
	c := p.c
	return unsupported("stream_plugins", "graphql", "ext-plugin", "wasm", "xrpc", "etcd").with(section{
		"discovery":    func(k string, n *yaml.Node) error { return p.walk(k, n, p.discovery()) },
		"apisix":       func(k string, n *yaml.Node) error { return p.walk(k, n, p.apisix()) },
		"nginx_config": func(k string, n *yaml.Node) error { return p.walk(k, n, p.nginx()) },
		"deployment":   func(k string, n *yaml.Node) error { return p.walk(k, n, p.deployment()) },
		"plugins":      p.strList(&c.Plugins, nil, "plugin names"),
		"plugin_attr":  p.pluginAttr,
	})
}

// discovery is the discovery section: dns's servers are read; the
// other discoveries, and dns's resolv_conf and order, are reported.
func (p *cfgParser) discovery() section {
	return unsupported("consul", "consul_kv", "nacos", "eureka", "kubernetes", "tars").with(section{
		"dns": func(k string, n *yaml.Node) error {
			return p.walk(k, n, unsupported("resolv_conf", "order").with(section{
				"servers": func(k string, n *yaml.Node) error {
					if err := p.strList(&p.c.DiscoveryDNSServers, validDNSServer, `a name server's address, "ip" or "ip:port"`)(k, n); err != nil {
						return err
					}
					if len(p.c.DiscoveryDNSServers) == 0 {
						return p.errf(k, "want at least one name server")
					}
					return nil
				},
			}))
		},
	})
}

func (p *cfgParser) apisix() section {
	a := &p.c.APISIX
	return unsupported(
		"enable_dev_mode", "enable_reuseport", "enable_ipv6", "enable_http2",
		"extra_lua_path", "extra_lua_cpath", "proxy_cache",
		"proxy_mode", "enable_resolv_search_opt",
		"disable_sync_configuration_during_start", "worker_startup_time_threshold",
		"events",
		"stream_proxy", "proxy_protocol", "status",
		"tracing", "admin_key", "allow_admin", "port_admin", "enable_admin_cors",
		"admin_listen", "https_admin", "admin_api_mtls", "config_center",
		"match_uri_encoded_slash", "max_post_args_readable_size", "disable_upstream_healthcheck",
	).with(section{
		"node_listen":          p.nodeListen,
		"enable_server_tokens": p.boolean(&a.EnableServerTokens),
		"ssl":                  func(k string, n *yaml.Node) error { return p.walk(k, n, p.ssl()) },
		"router": func(k string, n *yaml.Node) error {
			return p.walk(k, n, unsupported("ssl").with(section{
				"http": func(k string, n *yaml.Node) error {
					if n.Kind == yaml.ScalarNode && n.Value == "radixtree_uri_with_parameter" {
						return p.errf(k, "not supported yet: radixtree_uri_with_parameter")
					}
					return p.enum(&a.RouterHTTP, "radixtree_host_uri", "radixtree_uri")(k, n)
				},
			}))
		},
		"dns_resolver_valid": p.seconds(&a.DNSResolverValid, 0),
		"resolver_timeout":   p.seconds(&a.ResolverTimeout, 1),
		"dns_resolver": func(k string, n *yaml.Node) error {
			if err := p.strList(&a.DNSResolver, validDNSServer, `a name server's address, "ip" or "ip:port"`)(k, n); err != nil {
				return err
			}
			if len(a.DNSResolver) == 0 {
				return p.errf(k, "want at least one name server")
			}
			return nil
		},
		"enable_admin":   p.boolean(&a.EnableAdmin),
		"enable_control": p.boolean(&a.EnableControl),
		"control": func(k string, n *yaml.Node) error {
			var router string
			err := p.walk(k, n, section{
				"ip":   p.str(&a.Control.IP),
				"port": p.integer(&a.Control.Port, 1, 65535),
				// Parameters in paths only matter to plugins' own control
				// APIs, which coregate's plugins have none of.
				"router": p.enum(&router, "radixtree_uri", "radixtree_uri_with_parameter"),
			})
			if a.Control.IP == "" {
				a.Control.IP = "127.0.0.1"
			}
			return err
		},
		"id": p.str(&a.ID),
		"pid_file": func(k string, n *yaml.Node) error {
			if err := p.str(&a.PIDFile)(k, n); err != nil {
				return err
			}
			if a.PIDFile == "" {
				return p.errf(k, "want a file name, got %s", describe(n))
			}
			return nil
		},
		"show_upstream_status_in_response_header": p.boolean(&a.ShowUpstreamStatusInResponseHeader),
		"normalize_uri_like_servlet":              p.boolean(&a.NormalizeURILikeServlet),
		"delete_uri_tail_slash": p.refuseTrue(
			`route a path ending in "/" apart from the path without it, "/a/" missing the route that guards "/a"`,
			"set it to false"),
		"trusted_addresses": func(k string, n *yaml.Node) error {
			if isNull(n) {
				return nil
			}
			return p.refused(k, "pass the X-Forwarded-For of clients outside them to the upstream as sent, where APISIX drops it",
				"remove it")
		},
		"data_encryption": p.dataEncryption,
		// The caches are kept per reference, as many as the
		// configuration holds: count and neg_count are not read.
		"lru": func(k string, n *yaml.Node) error {
			return p.walk(k, n, section{
				"secret": func(k string, n *yaml.Node) error {
					return p.walk(k, n, unsupported("count", "neg_count").with(section{
						"ttl":     p.seconds(&a.SecretTTL, 1),
						"neg_ttl": p.seconds(&a.SecretNegTTL, 1),
					}))
				},
			})
		},
		"lua_module_hook": p.refuseSet(
			"skip the Lua hook it names, and whatever it enforces",
			"remove it"),
	})
}

// ssl is apisix.ssl's section.
func (p *cfgParser) ssl() section {
	a := &p.c.APISIX
	l := &a.SSL
	return unsupported(
		"ssl_trusted_combined_path", "key_encrypt_salt", "ssl_session_cache",
		"ssl_session_timeout",
	).with(section{
		"enable": p.boolean(&l.Enable),
		"listen": func(k string, n *yaml.Node) error {
			out, err := p.listenList(k, n, 9443, func(k string, v bool) error {
				return p.errf(k, "port level enable_http2 in ssl.listen is deprecated from APISIX 3.9, "+
					"use apisix.enable_http2 (HTTP/2 is not supported yet)")
			})
			l.Listen = out
			return err
		},
		"ssl_protocols": func(k string, n *yaml.Node) error {
			if err := p.str(&l.Protocols)(k, n); err != nil {
				return err
			}
			f := strings.Fields(l.Protocols)
			if len(f) == 0 {
				return p.errf(k, "want TLSv1.2, TLSv1.3 or both, got %s", describe(n))
			}
			for _, v := range f {
				switch v {
				case "TLSv1.2", "TLSv1.3":
				case "SSLv2", "SSLv3", "TLSv1", "TLSv1.1":
					return p.refused(k, "serve a protocol version this gateway does not implement ("+v+
						") with the versions it has", "list TLSv1.2 and TLSv1.3 only")
				default:
					return p.errf(k, "unknown protocol %q: want TLSv1.2, TLSv1.3 or both", v)
				}
			}
			return nil
		},
		"ssl_ciphers":             p.str(&l.Ciphers),
		"ssl_session_tickets":     p.boolean(&l.SessionTickets),
		"fallback_sni":            p.str(&l.FallbackSNI),
		"ssl_trusted_certificate": p.str(&a.SSLTrustedCertificate),
	})
}

// dataEncryption reads apisix.data_encryption, with APISIX's defaults
// for what is not written (enable_encrypt_fields true, APISIX's keyring).
// null, or a keyring null or empty, stores everything in clear.
func (p *cfgParser) dataEncryption(key string, n *yaml.Node) error {
	d := &p.c.APISIX.DataEncryption
	if isNull(n) {
		d.Keyring = nil
		return nil
	}
	return p.walk(key, n, section{
		"enable_encrypt_fields": p.boolean(&d.EnableEncryptFields),
		"keyring":               p.keyring(&d.Keyring),
	})
}

// keyring reads a keyring: a key, or a list of keys, the first one
// encrypting; each 16 or 32 characters (AES-128 or AES-256), as APISIX's
// schema wants them. null and [] are no keyring.
func (p *cfgParser) keyring(dst **keyring.Keyring) handler {
	const want = "a key of 16 or 32 characters"
	return func(key string, n *yaml.Node) error {
		var keys []string
		str := func(k string, e *yaml.Node) error {
			e = spec.Unalias(e)
			if e.Kind != yaml.ScalarNode || e.ShortTag() != "!!str" || len(e.Value) != 16 && len(e.Value) != 32 {
				return p.errf(k, "want %s, got %s", want, describe(e))
			}
			keys = append(keys, e.Value)
			return nil
		}
		switch {
		case isNull(n):
		case n.Kind == yaml.SequenceNode:
			for i, e := range n.Content {
				if err := str(fmt.Sprintf("%s[%d]", key, i), e); err != nil {
					return err
				}
			}
		default:
			if err := str(key, n); err != nil {
				return p.errf(key, "want %s or a list of them, got %s", want, describe(n))
			}
		}
		if len(keys) == 0 {
			*dst = nil
			return nil
		}
		k, err := keyring.Parse(keys)
		if err != nil {
			return p.errf(key, "%v", err)
		}
		*dst = k
		return nil
	}
}

// nodeListen reads apisix.node_listen: a port, a list of ports, or a list
// of {ip, port, enable_http2}.
func (p *cfgParser) nodeListen(key string, n *yaml.Node) error {
	out, err := p.listenList(key, n, 0, func(k string, v bool) error {
		if v {
			p.notYet(k)
		}
		return nil
	})
	if err != nil {
		return err
	}
	p.c.APISIX.NodeListen = out
	return nil
}

// listenList reads a listen list: a port, a list of ports, or a list of
// {ip, port, enable_http2, enable_http3}; port is defPort where an entry
// leaves it out (0: it must be written). http2 is told of an
// enable_http2 written.
func (p *cfgParser) listenList(key string, n *yaml.Node, defPort int, http2 func(k string, v bool) error) ([]Listen, error) {
	port := func(k string, n *yaml.Node) (int, error) {
		var v int
		err := p.integer(&v, 1, 65535)(k, n)
		return v, err
	}
	if n.Kind == yaml.ScalarNode {
		v, err := port(key, n)
		if err != nil {
			return nil, err
		}
		return []Listen{{Port: v}}, nil
	}
	if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
		return nil, p.errf(key, "want a port, a list of ports or a list of {ip, port}, got %s", describe(n))
	}
	var out []Listen
	for i, e := range n.Content {
		e = spec.Unalias(e)
		ek := fmt.Sprintf("%s[%d]", key, i)
		if e.Kind == yaml.ScalarNode {
			v, err := port(ek, e)
			if err != nil {
				return nil, err
			}
			out = append(out, Listen{Port: v})
			continue
		}
		l := Listen{Port: defPort}
		err := p.walk(ek, e, section{
			"ip": func(k string, n *yaml.Node) error {
				if err := p.str(&l.IP)(k, n); err != nil {
					return err
				}
				if _, ok := spec.ParseIP([]byte(l.IP)); !ok {
					return p.errf(k, "want an IP address, got %s", describe(n))
				}
				return nil
			},
			"port": p.integer(&l.Port, 1, 65535),
			"enable_http2": func(k string, n *yaml.Node) error {
				var v bool
				if err := p.boolean(&v)(k, n); err != nil {
					return err
				}
				return http2(k, v)
			},
			"enable_http3": func(k string, n *yaml.Node) error {
				var v bool
				if err := p.boolean(&v)(k, n); err != nil {
					return err
				}
				if v {
					p.notYet(k)
				}
				return nil
			},
		})
		if err != nil {
			return nil, err
		}
		if e.Kind != yaml.MappingNode || l.Port == 0 {
			return nil, p.errf(ek, "want a port or {ip, port}, got %s", describe(e))
		}
		out = append(out, l)
	}
	return out, nil
}

func (p *cfgParser) nginx() section {
	g := &p.c.NginxConfig
	h := &g.HTTP
	return unsupported(
		"enable_cpu_affinity", "worker_rlimit_nofile", "worker_shutdown_timeout",
		"max_pending_timers", "max_running_timers", "meta", "stream",
		"stream_configuration_snippet", "envs",
	).with(section{
		"main_configuration_snippet":                 p.refuseSet(snippetHarm, snippetFix),
		"http_configuration_snippet":                 p.refuseSet(snippetHarm, snippetFix),
		"http_server_configuration_snippet":          p.refuseSet(snippetHarm, snippetFix),
		"http_server_location_configuration_snippet": p.refuseSet(snippetHarm, snippetFix),
		"http_admin_configuration_snippet":           p.refuseSet(snippetHarm, snippetFix),
		"http_end_configuration_snippet":             p.refuseSet(snippetHarm, snippetFix),
		"user": p.refuseSet("leave the workers running as the user that started coregate, not as this one",
			"start coregate as that user (systemd's User=, for one) and remove the key"),
		"worker_processes": func(k string, n *yaml.Node) error {
			if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!str" && n.Value == "auto" {
				g.WorkerProcesses = 0
				return nil
			}
			var v int
			if n.Kind != yaml.ScalarNode || n.ShortTag() != "!!int" || n.Decode(&v) != nil || v < 1 || v > 1024 {
				return p.errf(k, `want "auto" or an integer from 1 to 1024, got %s`, describe(n))
			}
			g.WorkerProcesses = v
			return nil
		},
		"error_log":       p.str(&g.ErrorLog),
		"error_log_level": p.enum(&g.ErrorLogLevel, "debug", "info", "notice", "warn", "error", "crit", "alert", "emerg"),
		"event": func(k string, n *yaml.Node) error {
			return p.walk(k, n, section{"worker_connections": p.integer(&g.WorkerConnections, 1, 1<<24)})
		},
		"http": func(k string, n *yaml.Node) error {
			return p.walk(k, n, unsupported(
				"proxy_ssl_server_name", "charset",
				"variables_hash_max_size", "lua_shared_dict", "custom_lua_shared_dict",
			).with(section{
				"underscores_in_headers": func(k string, n *yaml.Node) error {
					on, err := p.onOff(k, n)
					h.UnderscoresInHeaders = on
					return err
				},
				"real_ip_recursive": func(k string, n *yaml.Node) error {
					p.wroteRealIP(k)
					_, err := p.onOff(k, n)
					return err
				},
				"enable_access_log":        p.boolean(&h.EnableAccessLog),
				"access_log":               p.str(&h.AccessLog),
				"access_log_format":        p.str(&h.AccessLogFormat),
				"access_log_format_escape": p.enum(&h.AccessLogFormatEscape, "default", "json", "none"),
				"access_log_buffer":        p.size(&h.AccessLogBuffer),
				"keepalive_timeout":        p.duration(&h.KeepaliveTimeout),
				"keepalive_requests":       p.integer(&h.KeepaliveRequests, 1, 1<<30),
				"keepalive_time":           p.duration(&h.KeepaliveTime),
				"client_header_timeout":    p.duration(&h.ClientHeaderTimeout),
				"client_body_timeout":      p.duration(&h.ClientBodyTimeout),
				"send_timeout":             p.duration(&h.SendTimeout),
				"client_max_body_size":     p.size(&h.ClientMaxBodySize),
				"real_ip_header": func(k string, n *yaml.Node) error {
					p.wroteRealIP(k)
					return p.str(&h.RealIPHeader)(k, n)
				},
				"real_ip_from": func(k string, n *yaml.Node) error {
					p.wroteRealIP(k)
					return p.strList(&h.RealIPFrom, func(s string) bool {
						return s == "unix:" || validAddrOrPrefix(s)
					}, `IP addresses, CIDRs or "unix:"`)(k, n)
				},
				"upstream": func(k string, n *yaml.Node) error {
					return p.walk(k, n, section{
						"keepalive":          p.integer(&h.Upstream.Keepalive, 1, 1<<24),
						"keepalive_requests": p.integer(&h.Upstream.KeepaliveRequests, 1, 1<<30),
						"keepalive_timeout":  p.duration(&h.Upstream.KeepaliveTimeout),
					})
				},
			}))
		},
	})
}

func (p *cfgParser) deployment() section {
	d := &p.c.Deployment
	role := func(dst *RoleConfig, providers ...string) handler {
		return func(k string, n *yaml.Node) error {
			return p.walk(k, n, section{"config_provider": p.enum(&dst.ConfigProvider, providers...)})
		}
	}
	return unsupported("fallback_cp", "certs").with(section{
		"role":               p.enum(&d.Role, "traditional", "data_plane", "control_plane"),
		"role_traditional":   role(&d.RoleTraditional, "etcd", "yaml"),
		"role_data_plane":    role(&d.RoleDataPlane, "yaml", "json", "etcd"),
		"role_control_plane": role(&d.RoleControlPlane, "etcd"),
		"admin":              func(k string, n *yaml.Node) error { return p.walk(k, n, p.admin()) },
		"etcd":               func(k string, n *yaml.Node) error { return p.walk(k, n, p.etcd()) },
	})
}

func (p *cfgParser) admin() section {
	a := &p.c.Deployment.Admin
	return unsupported("admin_api_mtls").with(section{
		"https_admin": p.refuseTrue("serve the Admin API over plain HTTP, its keys readable on the wire",
			"set it to false, and keep admin_listen on loopback or put a TLS proxy in front"),
		"admin_key_required": p.boolean(&a.AdminKeyRequired),
		"enable_admin_cors":  p.boolean(&a.EnableAdminCORS),
		"enable_admin_ui": func(k string, n *yaml.Node) error {
			if err := p.boolean(&a.EnableAdminUI)(k, n); err != nil {
				return err
			}
			if a.EnableAdminUI {
				p.notYet(k) // no dashboard served
			}
			return nil
		},
		"allow_admin":       p.strList(&a.AllowAdmin, validAddrOrPrefix, "IP addresses or CIDRs"),
		"admin_api_version": p.enum(&a.AdminAPIVersion, "v3"),
		"admin_listen": func(k string, n *yaml.Node) error {
			return p.walk(k, n, section{
				"ip":   p.str(&a.AdminListen.IP),
				"port": p.integer(&a.AdminListen.Port, 1, 65535),
			})
		},
		"admin_key": func(k string, n *yaml.Node) error {
			if isNull(n) {
				a.AdminKey = nil
				return nil
			}
			if n.Kind != yaml.SequenceNode {
				return p.errf(k, "want a list of {name, key, role}, got %s", describe(n))
			}
			keys := make([]AdminKey, len(n.Content))
			for i, e := range n.Content {
				ak := &keys[i]
				err := p.walk(fmt.Sprintf("%s[%d]", k, i), e, section{
					"name": p.str(&ak.Name),
					"key": func(k string, n *yaml.Node) error {
						if isNull(n) {
							return nil
						}
						return p.str(&ak.Key)(k, n)
					},
					"role": p.enum(&ak.Role, "admin", "viewer"),
				})
				if err != nil {
					return err
				}
			}
			a.AdminKey = keys
			return nil
		},
	})
}

func (p *cfgParser) etcd() section {
	e := &p.c.Deployment.Etcd
	return unsupported("resync_delay", "health_check_timeout", "startup_retry_interval").with(section{
		"host": func(k string, n *yaml.Node) error {
			e.External = true
			if n.Kind == yaml.ScalarNode {
				var s string
				if err := p.str(&s)(k, n); err != nil {
					return err
				}
				e.Host = []string{s}
				return nil
			}
			return p.strList(&e.Host, nil, "etcd URLs")(k, n)
		},
		"prefix":        p.str(&e.Prefix),
		"timeout":       p.integer(&e.Timeout, 1, 3600),
		"watch_timeout": p.integerNotYet(&e.WatchTimeout, 1, 3600),
		"startup_retry": p.integerNotYet(&e.StartupRetry, 0, 1000),
		"user":          p.str(&e.User),
		"password":      p.str(&e.Password),
		"tls": func(k string, n *yaml.Node) error {
			return p.walk(k, n, section{
				"cert":   p.str(&e.TLS.Cert),
				"key":    p.str(&e.TLS.Key),
				"sni":    p.str(&e.TLS.SNI),
				"verify": p.boolean(&e.TLS.Verify),
			})
		},
	})
}

func (p *cfgParser) pluginAttr(key string, n *yaml.Node) error {
	if isNull(n) {
		return nil
	}
	if n.Kind != yaml.MappingNode {
		return p.errf(key, "want a mapping of plugin name to settings, got %s", describe(n))
	}
	attrs := make(map[string]json.RawMessage, len(n.Content)/2)
	for i := 0; i+1 < len(n.Content); i += 2 {
		name := spec.Unalias(n.Content[i]).Value
		v := spec.Unalias(n.Content[i+1])
		if v.Kind != yaml.MappingNode {
			return p.errf(key+"."+name, "want a mapping, got %s", describe(v))
		}
		b, err := spec.YAMLToJSON(v)
		if err != nil {
			return p.errf(key+"."+name, "%v", err)
		}
		attrs[name] = b
		if name == "prometheus" {
			if err := p.walk(key+"."+name, v, p.prometheus()); err != nil {
				return err
			}
		}
	}
	p.c.PluginAttr = attrs
	return nil
}

// metricName is what a Prometheus metric name is.
var metricName = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)

// prometheus reads plugin_attr.prometheus.
func (p *cfgParser) prometheus() section {
	a := &p.c.Prometheus
	return unsupported("prefer_name").with(section{
		"enable_export_server": p.boolean(&a.EnableExportServer),
		"metrics": func(k string, n *yaml.Node) error {
			if isNull(n) {
				return nil
			}
			if n.Kind != yaml.MappingNode {
				return p.errf(k, "want a mapping of metric name to settings, got %s", describe(n))
			}
			for i := 0; i+1 < len(n.Content); i += 2 {
				metric := spec.Unalias(n.Content[i]).Value
				if builtinLabels[metric] == nil {
					p.notYet(k + "." + metric)
					continue
				}
				if err := p.walk(k+"."+metric, n.Content[i+1], p.metricAttr(metric)); err != nil {
					return err
				}
			}
			return nil
		},
		"metric_prefix": func(k string, n *yaml.Node) error {
			if err := p.str(&a.MetricPrefix)(k, n); err != nil {
				return err
			}
			if !metricName.MatchString(a.MetricPrefix + "x") {
				return p.errf(k, "want the start of a Prometheus metric name ([a-zA-Z_:][a-zA-Z0-9_:]*), got %s", describe(n))
			}
			return nil
		},
		"default_buckets": func(k string, n *yaml.Node) error {
			if n.Kind != yaml.SequenceNode || len(n.Content) == 0 {
				return p.errf(k, "want a list of numbers, got %s", describe(n))
			}
			b := make([]float64, len(n.Content))
			for i, e := range n.Content {
				e = spec.Unalias(e)
				tag := e.ShortTag()
				if e.Kind != yaml.ScalarNode || tag != "!!int" && tag != "!!float" || e.Decode(&b[i]) != nil ||
					math.IsInf(b[i], 0) || math.IsNaN(b[i]) {
					return p.errf(fmt.Sprintf("%s[%d]", k, i), "want a number, got %s", describe(e))
				}
				if i > 0 && b[i] <= b[i-1] {
					return p.errf(fmt.Sprintf("%s[%d]", k, i), "want buckets in increasing order, got %s after %v", describe(e), b[i-1])
				}
			}
			a.DefaultBuckets = b
			return nil
		},
		"export_uri": func(k string, n *yaml.Node) error {
			if err := p.str(&a.ExportURI)(k, n); err != nil {
				return err
			}
			if !strings.HasPrefix(a.ExportURI, "/") {
				return p.errf(k, `want a path beginning with "/", got %s`, describe(n))
			}
			return nil
		},
		"export_addr": func(k string, n *yaml.Node) error {
			err := p.walk(k, n, section{
				"ip":   p.str(&a.ExportAddr.IP),
				"port": p.integer(&a.ExportAddr.Port, 1, 65535),
			})
			if a.ExportAddr.IP == "" {
				a.ExportAddr.IP = "127.0.0.1"
			}
			return err
		},
	})
}

// metricAttr reads plugin_attr.prometheus.metrics.<metric>.
func (p *cfgParser) metricAttr(metric string) section {
	a := &p.c.Prometheus
	return section{
		"expire": func(k string, n *yaml.Node) error {
			var v int
			if err := p.integer(&v, 0, math.MaxInt32)(k, n); err != nil {
				return err
			}
			if v != 0 {
				p.notYet(k)
			}
			return nil
		},
		"extra_labels": func(k string, n *yaml.Node) error {
			if isNull(n) {
				return nil
			}
			if n.Kind != yaml.SequenceNode {
				return p.errf(k, "want a list of {name: $variable}, got %s", describe(n))
			}
			seen := map[string]bool{}
			for _, l := range builtinLabels[metric] {
				seen[l] = true
			}
			var out []ExtraLabel
			for i, e := range n.Content {
				e = spec.Unalias(e)
				ik := fmt.Sprintf("%s[%d]", k, i)
				if e.Kind != yaml.MappingNode || len(e.Content) != 2 {
					return p.errf(ik, "want {name: $variable}, got %s", describe(e))
				}
				name, v := spec.Unalias(e.Content[0]).Value, spec.Unalias(e.Content[1])
				if !labelName.MatchString(name) || strings.HasPrefix(name, "__") {
					return p.errf(ik, "want a Prometheus label name, got %q", name)
				}
				if seen[name] {
					return p.errf(ik, "label %q is already a label of %s", name, metric)
				}
				seen[name] = true
				if v.Kind != yaml.ScalarNode || v.ShortTag() != "!!str" || len(v.Value) < 2 || v.Value[0] != '$' {
					return p.errf(ik+"."+name, "want a $variable, got %s", describe(v))
				}
				out = append(out, ExtraLabel{Name: name, Var: v.Value[1:]})
			}
			if a.ExtraLabels == nil {
				a.ExtraLabels = map[string][]ExtraLabel{}
			}
			a.ExtraLabels[metric] = out
			return nil
		},
	}
}

// finish applies what depends on several keys.
func (p *cfgParser) finish() error {
	d := &p.c.Deployment
	if d.Role == "data_plane" {
		if d.RoleDataPlane.ConfigProvider == "" {
			return p.errf("deployment.role_data_plane.config_provider", "required when deployment.role is data_plane")
		}
		// A data plane serves no Admin API (APISIX forces this too).
		p.c.APISIX.EnableAdmin = false
	}
	if d.Role == "control_plane" && d.RoleControlPlane.ConfigProvider == "" {
		d.RoleControlPlane.ConfigProvider = "etcd"
	}
	if d.Role == "traditional" && d.RoleTraditional.ConfigProvider == "" {
		d.RoleTraditional.ConfigProvider = "etcd"
	}
	d.Etcd.TLS.TrustedCA = p.c.APISIX.SSLTrustedCertificate
	// nginx's realip module takes the client address from real_ip_header
	// for connections from real_ip_from; with no address there it does
	// nothing, which is what coregate does.
	if p.realIP != "" && len(p.c.NginxConfig.HTTP.RealIPFrom) > 0 {
		return p.refused(p.realIP,
			"leave the client address the connection's, so that every client behind a proxy in real_ip_from "+
				"has the proxy's address in remote_addrs, ipmatch and the limits keyed on remote_addr",
			"remove the real_ip_* keys, or write real_ip_from: [] to say no proxy is trusted")
	}
	if p.c.APISIX.EnableAdmin && !d.Admin.AdminKeyRequired {
		p.warn("deployment.admin.admin_key_required", AdminKeyBypassed)
	}
	if err := p.controlPort(); err != nil {
		return err
	}
	if ssl := &p.c.APISIX.SSL; ssl.Enable {
		// A port is served over HTTP or over TLS, not both: a worker tells
		// its TLS connections by the port they arrived on (as APISIX's
		// cli refuses a port two listen lists share).
		for i, l := range ssl.Listen {
			for _, h := range p.c.APISIX.NodeListen {
				if h.Port == l.Port {
					return p.errf(fmt.Sprintf("apisix.ssl.listen[%d]", i),
						"https listen port %d conflicts with http", l.Port)
				}
			}
		}
	}
	return nil
}

// controlPort refuses a Control API port another of the node's listeners
// has, with APISIX's words (apisix/cli/ops.lua).
func (p *cfgParser) controlPort() error {
	a := &p.c.APISIX
	if !a.EnableControl {
		return nil
	}
	port := a.Control.Port
	var other string
	switch {
	case a.EnableAdmin && p.c.Deployment.Admin.AdminListen.Port == port:
		other = "admin port"
	case p.c.Prometheus.EnableExportServer && p.c.Prometheus.ExportAddr.Port == port:
		other = "prometheus port"
	case slices.ContainsFunc(a.NodeListen, func(l Listen) bool { return l.Port == port }):
		other = "http listen port"
	case a.SSL.Enable && slices.ContainsFunc(a.SSL.Listen, func(l Listen) bool { return l.Port == port }):
		other = "https listen port"
	default:
		return nil
	}
	return p.errf("apisix.control.port", "control port %d conflicts with %s", port, other)
}

// AdminKeyBypassed is the warning for deployment.admin.admin_key_required
// false while the Admin API is served: APISIX's, word for word, as its
// command line prints it at start and its Admin API logs it at warn
// (apisix/cli/ops.lua, apisix/admin/init.lua), so that whoever looks for
// it in APISIX's logs finds it in coregate's.
const AdminKeyBypassed = "Admin key is bypassed! If you are deploying APISIX in a production environment, " +
	"please enable `admin_key_required` and set a secure admin key!"
