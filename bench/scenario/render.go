package scenario

import (
	"fmt"
	"strings"

	"coregate/bench/certs"
)

// CoregateConfig renders coregate's config.yaml for s, in APISIX's shape:
// data plane, standalone YAML, listening on port with the given worker
// count. Upstream keep-alive connections serve s.KeepaliveRequests
// requests, as the nginx reference's do (keepalive_requests; unlimited in
// practice, 1e8, unless the scenario says otherwise); client connections
// are kept for 1e8 requests too, as nginx's (coregate's default is nginx's
// stock 1000), and the export server is off. The access log is on only in
// a scenario that measures it (AccessLog), written to logs/access.log
// beside config.yaml. A TLS scenario adds apisix.ssl: a listener on
// 127.0.0.1 at s.TLS.Port, TLS 1.3 only, session tickets as the scenario
// says; the others turn the TLS listener (APISIX's fixed 9443 by default)
// off: the nginx reference has none there.
func CoregateConfig(s Scenario, port, workers int) []byte {
	return fmt.Appendf(nil, `apisix:
  node_listen: [%d]
  enable_admin: false
  enable_control: false
%sdeployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
nginx_config:
  worker_processes: %d
  http:
    enable_access_log: %v
    keepalive_requests: 100000000
    upstream:
      keepalive_requests: %d
plugin_attr:
  prometheus:
    enable_export_server: false
`, port, s.coregateSSL(), workers, s.AccessLog, s.keepaliveRequests())
}

// coregateSSL is the apisix.ssl section: a TLS scenario's listener, or
// none.
func (s Scenario) coregateSSL() string {
	if s.TLS == nil {
		return "  ssl:\n    enable: false\n"
	}
	return fmt.Sprintf(`  ssl:
    enable: true
    listen:
      - ip: 127.0.0.1
        port: %d
    ssl_protocols: TLSv1.3
    ssl_session_tickets: %v
`, s.TLS.Port, s.TLS.Tickets)
}

// keepaliveRequests is the upstream keepalive_requests of both gateways.
func (s Scenario) keepaliveRequests() int {
	if s.KeepaliveRequests > 0 {
		return s.KeepaliveRequests
	}
	return 100000000
}

// CoregateRoutes renders the standalone apisix.yaml for s, proxying to
// upstream (host:port); it ends with the #END marker APISIX requires. The
// consumers have key-auth keys, or in a JWT scenario jwt-auth credentials
// with the key material WithJWTKey made (empty before it). A
// TLS scenario adds an ssls object with the certificate and key for
// certs.ServerName, and the CA clients must present a certificate of
// when the scenario verifies them.
func CoregateRoutes(s Scenario, upstream string) []byte {
	var b strings.Builder
	b.WriteString("routes:\n")
	for id := 1; id <= s.Routes; id++ {
		fmt.Fprintf(&b, "  - id: %d\n    uri: %s\n", id, URI(id, s.Routes))
		if s.Plugins != "" {
			fmt.Fprintf(&b, "    plugins: %s\n", s.PluginsJSON())
		}
		if s.Upstream && s.Balancer != "" {
			fmt.Fprintf(&b, "    upstream:\n      type: %s\n", s.Balancer)
			if s.Balancer == "chash" {
				b.WriteString("      hash_on: header\n      key: x-user\n")
			}
			fmt.Fprintf(&b, "      nodes:\n        \"%s\": 1\n        \"%s\": 1\n", upstream, s.Upstream2)
		} else if s.Upstream {
			fmt.Fprintf(&b, "    upstream:\n      type: roundrobin\n      nodes:\n        \"%s\": 1\n", upstream)
		}
	}
	if s.Consumers > 0 {
		b.WriteString("consumers:\n")
		for i := 1; i <= s.Consumers; i++ {
			fmt.Fprintf(&b, "  - username: user%d\n    plugins:\n", i)
			if j := s.JWT; j != nil {
				fmt.Fprintf(&b, "      jwt-auth:\n        key: user-key%d\n        algorithm: %s\n", i, j.Alg)
				if j.Alg == HS256 {
					fmt.Fprintf(&b, "        secret: %q\n", j.Secret)
				} else {
					fmt.Fprintf(&b, "        public_key: |\n%s", indent(j.PublicKeyPEM, 10))
				}
				continue
			}
			fmt.Fprintf(&b, "      key-auth:\n        key: user-key%d\n", i)
		}
	}
	if t := s.TLS; t != nil {
		fmt.Fprintf(&b, "ssls:\n  - id: 1\n    snis: [%q]\n    cert: |\n%s    key: |\n%s", certs.ServerName, indent(t.Files.CertPEM, 6), indent(t.Files.KeyPEM, 6))
		if t.MTLS {
			fmt.Fprintf(&b, "    client:\n      ca: |\n%s", indent(t.Files.CAPEM, 8))
		}
	}
	b.WriteString("#END\n")
	return []byte(b.String())
}

// NginxConfig renders the nginx reference for s: a reverse proxy with
// upstream keep-alive (keepalive 320, HTTP/1.1, Connection ""), access log
// off, the same route table as exact-match locations, all state under dir.
// A scenario with plugins gets nginx's nearest equivalent of each (see
// Equivalent): limit_req for limit-count, a map of the API keys with a 401
// for key-auth, return 200 for mocking, allow lines of the same CIDRs
// and deny all for ip-restriction, add_header of the same Access-Control-*
// headers (and Vary: Origin) for cors, the origin checked by a map as the
// plugin checks it, nothing for jwt-auth (nginx has no JWT: its row is
// nginx with no plugin); prometheus has none that counts
// per request (stub_status only counts connections), so nginx does
// nothing for it.
// Keep-alive requests towards clients are unlimited in practice, as the
// seeds' upstream configures them (keepalive_requests 1e8), and so are
// those towards the upstream unless s.KeepaliveRequests says otherwise. Like
// coregate's workers, nginx's are one per CPU of the gateway's mask
// (worker_cpu_affinity auto) on per-worker SO_REUSEPORT sockets, as
// APISIX's nginx template listens (reuseport): with several workers both
// sides then spread connections by the kernel's hash and neither moves a
// worker off a busy core.
func NginxConfig(s Scenario, dir string, port, workers int, upstream string) []byte {
	var b strings.Builder
	fmt.Fprintf(&b, `worker_processes %d;
worker_cpu_affinity auto;
daemon off;
master_process on;
pid %[2]s/nginx.pid;
error_log %[2]s/error.log warn;
worker_rlimit_nofile 20480;
events {
    worker_connections 10620;
    accept_mutex off;
}
http {
    %[6]s
    client_body_temp_path %[2]s/body;
    proxy_temp_path %[2]s/proxy;
    fastcgi_temp_path %[2]s/fastcgi;
    uwsgi_temp_path %[2]s/uwsgi;
    scgi_temp_path %[2]s/scgi;
    keepalive_requests 100000000;
    upstream backend {
        server %[3]s;
%[7]s        keepalive 320;
        keepalive_requests %[5]d;
    }
`, workers, dir, upstream, port, s.keepaliveRequests(), s.nginxAccessLog(dir), s.nginxUpstream2())
	limit, keys := s.HasPlugin("limit-count"), s.HasPlugin("key-auth")
	if limit {
		// limit-count's count per time_window as a rate nginx never
		// reaches: the bookkeeping without the rejections
		b.WriteString("    limit_req_zone $binary_remote_addr zone=limitcount:10m rate=16666666r/s;\n")
	}
	if keys {
		b.WriteString("    map $http_apikey $consumer {\n        default \"\";\n")
		for i := 1; i <= s.Consumers; i++ {
			fmt.Fprintf(&b, "        \"user-key%d\" user%d;\n", i, i)
		}
		b.WriteString("    }\n")
	}
	cors := s.HasPlugin("cors")
	if cors {
		// the origin when it is the allowed one, else "": nginx adds no
		// header whose value is empty
		fmt.Fprintf(&b, "    map $http_origin $cors_origin {\n        default \"\";\n        %q $http_origin;\n    }\n", corsOrigin)
		for _, h := range corsHeaders[1:] {
			fmt.Fprintf(&b, "    map $cors_origin $%s {\n        \"\" \"\";\n        default %q;\n    }\n", corsVar(h.name), h.value)
		}
	}
	fmt.Fprintf(&b, "    server {\n        listen 127.0.0.1:%d reuseport;\n", port)
	b.WriteString(s.nginxSSL())
	for id := 1; id <= s.Routes; id++ {
		fmt.Fprintf(&b, "        location = %s {\n", URI(id, s.Routes))
		if keys {
			b.WriteString("            if ($consumer = \"\") {\n                return 401;\n            }\n")
		}
		if limit {
			b.WriteString("            limit_req zone=limitcount burst=1000000 nodelay;\n")
		}
		if s.HasPlugin("ip-restriction") {
			for _, cidr := range ipWhitelist {
				fmt.Fprintf(&b, "            allow %s;\n", cidr)
			}
			b.WriteString("            deny all;\n")
		}
		if cors {
			b.WriteString("            add_header Vary Origin always;\n            add_header Access-Control-Allow-Origin $cors_origin always;\n")
			for _, h := range corsHeaders[1:] {
				fmt.Fprintf(&b, "            add_header %s $%s always;\n", h.name, corsVar(h.name))
			}
		}
		if s.HasPlugin("request-id") {
			// request-id's uuid: nginx's 128 random bits in hex, to the
			// upstream and the client.
			b.WriteString("            proxy_set_header X-Request-Id $request_id;\n            add_header X-Request-Id $request_id always;\n")
		}
		if s.HasPlugin("response-rewrite") {
			// response-rewrite's row: a header set, and every "5678" of
			// the upstream's text/plain body replaced.
			b.WriteString("            add_header X-Server-Id 3 always;\n            sub_filter '5678' 'abcd';\n" +
				"            sub_filter_once off;\n            sub_filter_types text/plain;\n")
		}
		if s.Upstream {
			b.WriteString("            proxy_pass http://backend;\n            proxy_http_version 1.1;\n            proxy_set_header Connection \"\";\n")
		} else {
			fmt.Fprintf(&b, "            default_type text/plain;\n            return 200 \"%s\";\n", mockBody)
		}
		b.WriteString("        }\n")
	}
	b.WriteString("    }\n}\n")
	return []byte(b.String())
}

// corsVar is the nginx variable holding a cors header's value for an
// allowed origin: cors_ and the name's lower case, '-' as '_'.
func corsVar(name string) string {
	return "cors_" + strings.ReplaceAll(strings.ToLower(strings.TrimPrefix(name, "Access-Control-")), "-", "_")
}

// nginxUpstream2 is the upstream block's lines for a balancer scenario's
// second node and its balancer (nginxBalancer), written before keepalive
// as nginx requires; "" in the others.
func (s Scenario) nginxUpstream2() string {
	if s.Balancer == "" {
		return ""
	}
	out := "        server " + s.Upstream2 + ";\n"
	if d := s.nginxBalancer(); d != "" {
		out += "        " + d + "\n"
	}
	return out
}

// nginxSSL is the server block's TLS listener and settings in a TLS
// scenario, "" in the others: the same certificate, key and protocol as
// coregate's; with tickets, a ticket key file of its own (nginx would
// otherwise make a key per worker at start, as coregate does); without,
// no tickets and no session cache, so that every handshake is a full one;
// with mTLS, the client certificate required and verified against the CA.
func (s Scenario) nginxSSL() string {
	t := s.TLS
	if t == nil {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "        listen 127.0.0.1:%d ssl reuseport;\n", t.Port)
	fmt.Fprintf(&b, "        ssl_certificate %s;\n        ssl_certificate_key %s;\n", t.Files.CertFile, t.Files.KeyFile)
	b.WriteString("        ssl_protocols TLSv1.3;\n        ssl_session_cache off;\n")
	if t.Tickets {
		fmt.Fprintf(&b, "        ssl_session_tickets on;\n        ssl_session_ticket_key %s;\n", t.Files.TicketKeyFile)
	} else {
		b.WriteString("        ssl_session_tickets off;\n")
	}
	if t.MTLS {
		fmt.Fprintf(&b, "        ssl_verify_client on;\n        ssl_client_certificate %s;\n", t.Files.CAFile)
	}
	return b.String()
}

// indent prefixes every line of text with n spaces, for a YAML block
// scalar.
func indent(text string, n int) string {
	pad := strings.Repeat(" ", n)
	var b strings.Builder
	for line := range strings.Lines(text) {
		b.WriteString(pad + line)
	}
	return b.String()
}

// nginxAccessLog is the nginx reference's access_log directive: off, or,
// in a scenario that measures it, APISIX's default format (less the
// variables nginx does not have) to a file, buffered as coregate's is
// (16 KiB, flushed within a second).
func (s Scenario) nginxAccessLog(dir string) string {
	if !s.AccessLog {
		return "access_log off;"
	}
	return `log_format apisix '$remote_addr - $remote_user [$time_local] $http_host "$request" $status $body_bytes_sent ` +
		`$request_time "$http_referer" "$http_user_agent" $upstream_addr $upstream_status $upstream_response_time';
    access_log ` + dir + `/access.log apisix buffer=16k flush=1s;`
}
