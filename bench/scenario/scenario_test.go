package scenario

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.yaml.in/yaml/v3"

	"coregate/admin/nodeconf"
	"coregate/bench/certs"
)

func TestSelect(t *testing.T) {
	all := Seeds(2, 10000)
	names := func(ss []Scenario) []string {
		var out []string
		for _, s := range ss {
			out = append(out, s.Name)
		}
		return out
	}
	tests := []struct {
		in   string
		want []string
		err  error
	}{
		{in: "default", want: []string{"no-plugin", "no-plugin-100", "routes-5000", "redial", "access-log", "mocking", "limit-count", "limit-count-100", "limit-count-redis", "limit-count-redis-sync",
			"limit-count-prometheus",
			"key-auth", "key-auth-100", "key-auth-limit-count", "key-auth-limit-count-100",
			"request-id", "jwt-auth-hs256", "jwt-auth-rs256", "ip-restriction", "cors", "response-rewrite",
			"tls-keepalive-ecdsa", "tls-keepalive-rsa", "tls-handshake-full", "tls-handshake-resumed", "tls-mtls", "tls-p99-under-handshakes",
			"balancer-roundrobin", "balancer-chash", "balancer-least_conn", "balancer-ewma",
			"scaling", "latency"}},
		{in: "routes-5000,mocking", want: []string{"routes-5000", "mocking"}},
		{in: "nope", err: ErrUnknown},
	}
	for _, tc := range tests {
		got, err := Select(all, tc.in)
		if !errors.Is(err, tc.err) {
			t.Errorf("Select(%q) error = %v, want %v", tc.in, err, tc.err)
			continue
		}
		if d := cmp.Diff(tc.want, names(got)); d != "" {
			t.Errorf("Select(%q) (-want +got):\n%s", tc.in, d)
		}
	}
	all2, _ := Select(all, "all")
	if len(all2) != len(all) {
		t.Errorf("all selects %d of %d", len(all2), len(all))
	}
	if d := cmp.Diff([]int{1, 2}, all[len(all)-2].Workers); d != "" {
		t.Errorf("scaling workers (-want +got):\n%s", d)
	}
}

func TestScalingCurve(t *testing.T) {
	for n, want := range map[int][]int{0: {1}, 1: {1}, 2: {1, 2}, 3: {1, 2, 3}, 6: {1, 2, 4, 6}, 8: {1, 2, 4, 8}, 16: {1, 2, 4, 8, 16}} {
		var s Scenario
		for _, x := range Seeds(n, 1000) {
			if x.Name == "scaling" {
				s = x
			}
		}
		if d := cmp.Diff(want, s.Workers); d != "" {
			t.Errorf("Seeds(%d) scaling workers (-want +got):\n%s", n, d)
		}
		for _, w := range s.Workers {
			if c := s.Load.ConnsFor(w); c != 16*w {
				t.Errorf("Seeds(%d): %d workers get %d connections, want %d", n, w, c, 16*w)
			}
		}
	}
	if c := (Load{Conns: 16}).ConnsFor(4); c != 16 {
		t.Errorf("a load not per worker opens %d connections at 4 workers, want 16", c)
	}
}

// apisixFile is the part of the standalone format the renderer writes.
type apisixFile struct {
	Routes []struct {
		ID       int            `yaml:"id"`
		URI      string         `yaml:"uri"`
		Plugins  map[string]any `yaml:"plugins"`
		Upstream *struct {
			Type   string         `yaml:"type"`
			HashOn string         `yaml:"hash_on"`
			Key    string         `yaml:"key"`
			Nodes  map[string]int `yaml:"nodes"`
		} `yaml:"upstream"`
	} `yaml:"routes"`
	Consumers []struct {
		Username string                       `yaml:"username"`
		Plugins  map[string]map[string]string `yaml:"plugins"`
	} `yaml:"consumers"`
}

func TestCoregateRoutes(t *testing.T) {
	for _, s := range Seeds(1, 1) {
		t.Run(s.Name, func(t *testing.T) {
			wantNodes := map[string]int{"127.0.0.1:1980": 1}
			if s.Balancer != "" {
				s.Upstream2 = "127.0.0.1:1981"
				wantNodes["127.0.0.1:1981"] = 1
			}
			out := CoregateRoutes(s, "127.0.0.1:1980")
			if !strings.HasSuffix(string(out), "\n#END\n") {
				t.Fatalf("does not end with #END")
			}
			var f apisixFile
			if err := yaml.Unmarshal(out, &f); err != nil {
				t.Fatal(err)
			}
			if len(f.Routes) != s.Routes || len(f.Consumers) != s.Consumers {
				t.Fatalf("%d routes, %d consumers; want %d, %d", len(f.Routes), len(f.Consumers), s.Routes, s.Consumers)
			}
			last := f.Routes[len(f.Routes)-1]
			if last.ID != s.Routes || last.URI != "/hello" {
				t.Errorf("last route id %d uri %s, want %d /hello", last.ID, last.URI, s.Routes)
			}
			if s.Upstream {
				if d := cmp.Diff(wantNodes, last.Upstream.Nodes); d != "" {
					t.Errorf("nodes (-want +got):\n%s", d)
				}
				want := s.Balancer
				if want == "" {
					want = "roundrobin"
				}
				if last.Upstream.Type != want {
					t.Errorf("upstream type %q, want %q", last.Upstream.Type, want)
				}
			} else if last.Upstream != nil {
				t.Errorf("upstream set for a no-upstream scenario")
			}
			if (s.Plugins == "") != (len(last.Plugins) == 0) {
				t.Errorf("plugins %v for %q", last.Plugins, s.Plugins)
			}
			uris := map[string]bool{}
			for _, r := range f.Routes {
				if uris[r.URI] {
					t.Fatalf("duplicate uri %s", r.URI)
				}
				uris[r.URI] = true
			}
		})
	}
}

func TestCoregateConfig(t *testing.T) {
	var c struct {
		Apisix struct {
			NodeListen  []int `yaml:"node_listen"`
			EnableAdmin bool  `yaml:"enable_admin"`
		} `yaml:"apisix"`
		Deployment struct {
			Role          string `yaml:"role"`
			RoleDataPlane struct {
				ConfigProvider string `yaml:"config_provider"`
			} `yaml:"role_data_plane"`
		} `yaml:"deployment"`
		Nginx struct {
			Workers int `yaml:"worker_processes"`
		} `yaml:"nginx_config"`
	}
	plain := Scenario{Name: "x", Routes: 1, Upstream: true}
	if err := yaml.Unmarshal(CoregateConfig(plain, 9080, 4), &c); err != nil {
		t.Fatal(err)
	}
	got := []any{c.Apisix.NodeListen, c.Apisix.EnableAdmin, c.Deployment.Role, c.Deployment.RoleDataPlane.ConfigProvider, c.Nginx.Workers}
	want := []any{[]int{9080}, false, "data_plane", "yaml", 4}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("(-want +got):\n%s", d)
	}
	// The gateway's own reading: no warnings, and the upstream keep-alive
	// as unlimited as the nginx reference's.
	// A scenario's keepalive_requests reaches both gateways.
	redial := plain
	redial.KeepaliveRequests = 1000
	for _, tc := range []struct {
		s    Scenario
		want int
	}{{plain, 100000000}, {redial, 1000}} {
		nc, warnings, err := nodeconf.Parse(CoregateConfig(tc.s, 9080, 4), "config.yaml")
		if err != nil || len(warnings) > 0 {
			t.Fatalf("coregate reads its config with %v, warnings %v", err, warnings)
		}
		// Plain HTTP on the one port, as the nginx reference: no TLS
		// listener (on a fixed port).
		if p := nc.Ports(); !slices.Equal(p, []int{9080}) {
			t.Errorf("coregate listens on %v, want [9080]", p)
		}
		if n := nc.NginxConfig.HTTP.Upstream.KeepaliveRequests; n != tc.want {
			t.Errorf("coregate upstream keepalive_requests = %d, want %d", n, tc.want)
		}
		// Client connections: as many requests as nginx's reference keeps.
		if n := nc.NginxConfig.HTTP.KeepaliveRequests; n != 100000000 {
			t.Errorf("coregate client keepalive_requests = %d, want 100000000", n)
		}
		conf := string(NginxConfig(tc.s, "/tmp/x", 8080, 1, "127.0.0.1:1980"))
		if want := fmt.Sprintf("keepalive 320;\n        keepalive_requests %d;\n", tc.want); !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q:\n%s", want, conf)
		}
	}
}

func TestNginxConfig(t *testing.T) {
	s := Seeds(1, 1)[1] // 100 routes
	conf := string(NginxConfig(s, "/tmp/x", 8080, 2, "127.0.0.1:1980"))
	for _, want := range []string{
		"worker_processes 2;", "worker_cpu_affinity auto;", "daemon off;", "pid /tmp/x/nginx.pid;", "listen 127.0.0.1:8080 reuseport;",
		"server 127.0.0.1:1980;", "keepalive 320;", "proxy_http_version 1.1;", `proxy_set_header Connection "";`,
		"access_log off;", "location = /hello {", "location = /hello99 {",
	} {
		if !strings.Contains(conf, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	if n := strings.Count(conf, "location = "); n != 100 {
		t.Errorf("%d locations, want 100", n)
	}
	if strings.Count(conf, "{") != strings.Count(conf, "}") {
		t.Error("unbalanced braces")
	}
	mocking, err := Select(Seeds(1, 1), "mocking")
	if err != nil {
		t.Fatal(err)
	}
	mock := string(NginxConfig(mocking[0], "/tmp/x", 8080, 1, ""))
	if !strings.Contains(mock, `return 200 "1234567890";`) || strings.Contains(mock, "proxy_pass") {
		t.Errorf("mocking scenario: nginx should answer itself:\n%s", mock)
	}
}

// TestNginxEquivalents: plugin scenarios give nginx the nearest job.
func TestNginxEquivalents(t *testing.T) {
	sc, err := Select(Seeds(1, 1), "key-auth-limit-count-100,limit-count,no-plugin")
	if err != nil {
		t.Fatal(err)
	}
	both := string(NginxConfig(sc[0], "/tmp/x", 8080, 1, "127.0.0.1:1980"))
	for _, want := range []string{"limit_req_zone $binary_remote_addr", "limit_req zone=limitcount", "map $http_apikey $consumer {",
		`"user-key100" user100;`, `if ($consumer = "") {`} {
		if !strings.Contains(both, want) {
			t.Errorf("key-auth + limit-count: nginx.conf lacks %q", want)
		}
	}
	if n := strings.Count(both, "limit_req zone="); n != 100 {
		t.Errorf("%d limit_req lines, want one per route", n)
	}
	if lc := string(NginxConfig(sc[1], "/tmp/x", 8080, 1, "127.0.0.1:1980")); strings.Contains(lc, "map $http_apikey") || !strings.Contains(lc, "limit_req zone=") {
		t.Errorf("limit-count: want limit_req only:\n%s", lc)
	}
	if plain := string(NginxConfig(sc[2], "/tmp/x", 8080, 1, "127.0.0.1:1980")); strings.Contains(plain, "limit_req") || strings.Contains(plain, "map ") {
		t.Errorf("no plugins: nginx does more than proxy:\n%s", plain)
	}
	if got := sc[0].Equivalent(); got != "map of API keys + limit_req" {
		t.Errorf("Equivalent = %q", got)
	}
}

// TestBalancerRows: the balancer rows give coregate the upstream type
// over both nodes (chash on the header the load sends) and nginx the
// nearest directive over the same two servers.
func TestBalancerRows(t *testing.T) {
	sc, err := Select(Seeds(1, 1), "balancer-roundrobin,balancer-chash,balancer-least_conn,balancer-ewma")
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []struct{ directive, equivalent string }{
		{"", ""},
		{"hash $http_x_user consistent;", "hash $http_x_user consistent"},
		{"least_conn;", "least_conn"},
		{"random two least_conn;", "random two least_conn"},
	} {
		s := sc[i]
		s.Upstream2 = "127.0.0.1:1981"
		conf := string(NginxConfig(s, "/tmp/x", 8080, 1, "127.0.0.1:1980"))
		if !strings.Contains(conf, "server 127.0.0.1:1980;\n        server 127.0.0.1:1981;\n") {
			t.Errorf("%s: nginx.conf lacks the two servers:\n%s", s.Name, conf)
		}
		for _, d := range []string{"hash ", "least_conn;"} {
			if strings.Contains(conf, d) != strings.Contains(want.directive, d) {
				t.Errorf("%s: nginx.conf has %q: %v, want %q", s.Name, d, strings.Contains(conf, d), want.directive)
			}
		}
		if got := s.Equivalent(); got != want.equivalent {
			t.Errorf("%s: Equivalent = %q, want %q", s.Name, got, want.equivalent)
		}
	}
	if chash := string(CoregateRoutes(sc[1], "127.0.0.1:1980")); !strings.Contains(chash, "hash_on: header\n      key: x-user\n") {
		t.Errorf("chash: apisix.yaml lacks hash_on and key:\n%s", chash)
	}
	if h := sc[1].Load.Header; h != "X-User: user-1\r\n" {
		t.Errorf("chash load header %q", h)
	}
}

// TestNginxAccepts has nginx itself check the rendered configuration.
func TestNginxAccepts(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx not installed")
		}
	}
	seeds := Seeds(1, 1)
	equiv, err := Select(seeds, "mocking,key-auth-limit-count-100,limit-count-prometheus,access-log,balancer-chash,balancer-least_conn,balancer-ewma,"+
		"jwt-auth-hs256,jwt-auth-rs256,ip-restriction,cors")
	if err != nil {
		t.Fatal(err)
	}
	for i := range equiv {
		equiv[i].Upstream2 = "127.0.0.1:2"
	}
	for _, s := range append([]Scenario{seeds[0], seeds[3]}, equiv...) {
		dir := t.TempDir()
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, NginxConfig(s, dir, 1, 1, "127.0.0.1:1"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "-t", "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
		if err != nil {
			t.Errorf("%s: nginx -t: %v\n%s", s.Name, err, out)
		}
	}
}

// tlsScenario returns the named TLS scenario with port and the files of a
// fresh certificate set under dir.
func tlsScenario(t *testing.T, name, dir string, port int) Scenario {
	t.Helper()
	ss, err := Select(Seeds(1, 1), name)
	if err != nil {
		t.Fatal(err)
	}
	set, err := certs.Write(dir)
	if err != nil {
		t.Fatal(err)
	}
	s := ss[0].WithTLSPort(port)
	p := set.Server[s.TLS.Key]
	s.TLS.Files = Files{CertFile: p.CertFile, KeyFile: p.KeyFile, CAFile: set.CAFile, CertPEM: p.CertPEM, KeyPEM: p.KeyPEM,
		CAPEM: set.CAPEM, TicketKeyFile: set.TicketKeyFile}
	return s
}

// TestTLSRender: coregate gets apisix.ssl with the TLS port, TLS 1.3 and
// the ticket setting, and an ssls object with the certificate, key and,
// for mTLS, the client CA, as APISIX's standalone file has them; nginx the
// same certificate on a listen ... ssl.
func TestTLSRender(t *testing.T) {
	dir := t.TempDir()
	s := tlsScenario(t, "tls-mtls", dir, 9443)
	var conf struct {
		Apisix struct {
			NodeListen []int `yaml:"node_listen"`
			SSL        struct {
				Enable bool `yaml:"enable"`
				Listen []struct {
					IP   string `yaml:"ip"`
					Port int    `yaml:"port"`
				} `yaml:"listen"`
				Protocols string `yaml:"ssl_protocols"`
				Tickets   bool   `yaml:"ssl_session_tickets"`
			} `yaml:"ssl"`
		} `yaml:"apisix"`
	}
	if err := yaml.Unmarshal(CoregateConfig(s, 9080, 1), &conf); err != nil {
		t.Fatal(err)
	}
	ssl := conf.Apisix.SSL
	if !ssl.Enable || len(ssl.Listen) != 1 || ssl.Listen[0].Port != 9443 || ssl.Listen[0].IP != "127.0.0.1" ||
		ssl.Protocols != "TLSv1.3" || ssl.Tickets || len(conf.Apisix.NodeListen) != 1 {
		t.Errorf("apisix.ssl: %+v", conf.Apisix)
	}
	var routes struct {
		Routes []map[string]any `yaml:"routes"`
		SSLs   []struct {
			SNIs   []string `yaml:"snis"`
			Cert   string   `yaml:"cert"`
			Key    string   `yaml:"key"`
			Client struct {
				CA string `yaml:"ca"`
			} `yaml:"client"`
		} `yaml:"ssls"`
	}
	if err := yaml.Unmarshal(CoregateRoutes(s, "127.0.0.1:1980"), &routes); err != nil {
		t.Fatal(err)
	}
	if len(routes.Routes) != 1 || len(routes.SSLs) != 1 {
		t.Fatalf("apisix.yaml: %d routes, %d ssls", len(routes.Routes), len(routes.SSLs))
	}
	got := routes.SSLs[0]
	if !slices.Equal(got.SNIs, []string{certs.ServerName}) || got.Cert != s.TLS.Files.CertPEM || got.Key != s.TLS.Files.KeyPEM ||
		got.Client.CA != s.TLS.Files.CAPEM {
		t.Errorf("ssls[0] is not the scenario's certificate, key and CA: %+v", got)
	}
	nginx := string(NginxConfig(s, dir, 9080, 1, "127.0.0.1:1980"))
	for _, want := range []string{"listen 127.0.0.1:9080 reuseport;", "listen 127.0.0.1:9443 ssl reuseport;",
		"ssl_certificate " + s.TLS.Files.CertFile + ";", "ssl_certificate_key " + s.TLS.Files.KeyFile + ";",
		"ssl_protocols TLSv1.3;", "ssl_session_tickets off;", "ssl_session_cache off;",
		"ssl_verify_client on;", "ssl_client_certificate " + s.TLS.Files.CAFile + ";"} {
		if !strings.Contains(nginx, want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	resumed := tlsScenario(t, "tls-handshake-resumed", t.TempDir(), 9443)
	if c := string(CoregateConfig(resumed, 9080, 1)); !strings.Contains(c, "ssl_session_tickets: true") {
		t.Errorf("resumed: coregate without tickets:\n%s", c)
	}
	n := string(NginxConfig(resumed, dir, 9080, 1, "127.0.0.1:1980"))
	if !strings.Contains(n, "ssl_session_tickets on;\n        ssl_session_ticket_key "+resumed.TLS.Files.TicketKeyFile+";") ||
		strings.Contains(n, "ssl_verify_client") {
		t.Errorf("resumed: nginx.conf:\n%s", n)
	}
	plain := string(NginxConfig(Seeds(1, 1)[0], dir, 9080, 1, "127.0.0.1:1980"))
	if strings.Contains(plain, "ssl") || !strings.Contains(string(CoregateConfig(Seeds(1, 1)[0], 9080, 1)), "ssl:\n    enable: false\n") ||
		strings.Contains(string(CoregateRoutes(Seeds(1, 1)[0], "127.0.0.1:1980")), "ssls") {
		t.Error("a plain scenario has TLS settings")
	}
	if s.TLS == resumed.TLS {
		t.Error("WithTLSPort shares the scenario's TLS settings")
	}
}

// TestNginxAcceptsTLS has nginx check every TLS scenario's configuration,
// with the files it names.
func TestNginxAcceptsTLS(t *testing.T) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx not installed")
		}
	}
	n := 0
	for _, seed := range Seeds(1, 1) {
		if seed.TLS == nil {
			continue
		}
		n++
		dir := t.TempDir()
		s := tlsScenario(t, seed.Name, dir, 2)
		conf := filepath.Join(dir, "nginx.conf")
		if err := os.WriteFile(conf, NginxConfig(s, dir, 1, 1, "127.0.0.1:1"), 0o644); err != nil {
			t.Fatal(err)
		}
		out, err := exec.Command(bin, "-t", "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log")).CombinedOutput()
		if err != nil {
			t.Errorf("%s: nginx -t: %v\n%s", s.Name, err, out)
		}
	}
	if n != 6 {
		t.Errorf("%d TLS scenarios, want 6", n)
	}
}

// TestNginxRequestID: the request-id row gives nginx $request_id both
// ways, and nginx takes the configuration.
func TestNginxRequestID(t *testing.T) {
	sc, err := Select(Seeds(1, 1), "request-id")
	if err != nil {
		t.Fatal(err)
	}
	s := sc[0]
	if s.Baseline != "no-plugin" || s.Equivalent() != "$request_id both ways" {
		t.Errorf("baseline %q, equivalent %q", s.Baseline, s.Equivalent())
	}
	conf := NginxConfig(s, "/tmp/x", 8080, 1, "127.0.0.1:1980")
	for _, want := range []string{"proxy_set_header X-Request-Id $request_id;", "add_header X-Request-Id $request_id always;", "proxy_pass http://backend;"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx not installed")
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, NginxConfig(s, dir, 1, 1, "127.0.0.1:1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-p", dir+"/", "-c", path, "-e", filepath.Join(dir, "error.log")).CombinedOutput(); err != nil {
		t.Errorf("nginx -t: %v\n%s", err, out)
	}
}

// TestNginxResponseRewrite: the response-rewrite row gives nginx
// add_header and sub_filter on the body, and nginx takes the
// configuration.
func TestNginxResponseRewrite(t *testing.T) {
	sc, err := Select(Seeds(1, 1), "response-rewrite")
	if err != nil {
		t.Fatal(err)
	}
	s := sc[0]
	if s.Baseline != "no-plugin" || s.Equivalent() != "add_header + sub_filter" {
		t.Errorf("baseline %q, equivalent %q", s.Baseline, s.Equivalent())
	}
	conf := NginxConfig(s, "/tmp/x", 8080, 1, "127.0.0.1:1980")
	for _, want := range []string{"add_header X-Server-Id 3 always;", "sub_filter '5678' 'abcd';", "sub_filter_once off;", "sub_filter_types text/plain;", "proxy_pass http://backend;"} {
		if !strings.Contains(string(conf), want) {
			t.Errorf("nginx.conf lacks %q", want)
		}
	}
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if bin, err = exec.LookPath("/usr/sbin/nginx"); err != nil {
			t.Skip("nginx not installed")
		}
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(path, NginxConfig(s, dir, 1, 1, "127.0.0.1:1"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(bin, "-t", "-p", dir+"/", "-c", path, "-e", filepath.Join(dir, "error.log")).CombinedOutput(); err != nil {
		t.Errorf("nginx -t: %v\n%s", err, out)
	}
}
