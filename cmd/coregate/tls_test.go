package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/internal/e2e"
	"coregate/internal/testcert"
)

// The HTTPS listeners end to end: the real binary serving the ssls of
// apisix.yaml or of the Admin API to real clients (Go's crypto/tls, curl,
// openssl s_client).

// pki is a test CA whose certificate is in a file, for curl and openssl.
type pki struct {
	ca     *testcert.Cert
	dir    string
	caFile string
}

func newPKI(t *testing.T) *pki {
	t.Helper()
	p := &pki{ca: testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "test CA"}, CA: true}, nil), dir: t.TempDir()}
	p.caFile = p.file(t, "ca.pem", p.ca.CertPEM)
	return p
}

// server is a server certificate of the CA for names, its subject's CN cn.
func (p *pki) server(t *testing.T, cn string, rsa bool, names ...string) *testcert.Cert {
	t.Helper()
	return testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: cn}, DNSNames: names, RSA: rsa}, p.ca)
}

// file writes data to name in the PKI's directory and returns its path.
func (p *pki) file(t *testing.T, name, data string) string {
	t.Helper()
	path := filepath.Join(p.dir, name)
	writeFile(t, path, data)
	return path
}

// config is a client configuration trusting the CA, for name.
func (p *pki) config(name string) *tls.Config {
	return &tls.Config{ServerName: name, RootCAs: p.ca.Pool()}
}

// sslObj is an ssl object serving c for snis.
func sslObj(id string, c *testcert.Cert, snis ...string) obj {
	return obj{"id": id, "snis": snis, "cert": c.CertPEM, "key": c.KeyPEM}
}

// tlsConfig is a data plane's config.yaml with n workers, its TLS listener
// on e2e.TLSPort(port) with ssl written under apisix.ssl, and http under
// nginx_config.http.
func tlsConfig(n int, ssl, http string) func(port int) string {
	return func(port int) string {
		if http != "" {
			http = "  http:\n" + http
		}
		return fmt.Sprintf(`apisix:
  node_listen:
    - ip: 127.0.0.1
      port: %d
  enable_admin: false
  enable_control: false
%s%sdeployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
plugin_attr:
  prometheus:
    enable_export_server: false
nginx_config:
  worker_processes: %d
  error_log_level: info
%s`, port, e2e.SSLListen(port), ssl, n, http)
	}
}

// startTLS starts a data plane with apisixYAML and config, and waits until
// its n workers are ready.
func startTLS(t *testing.T, apisixYAML string, config func(port int) string, n int) *supGateway {
	t.Helper()
	return startSupervisor(t, apisixYAML, config, n)
}

// servedCN is the subject CN of the certificate a handshake with cfg gets
// from addr, which cfg verified.
func servedCN(t *testing.T, addr string, cfg *tls.Config) (string, error) {
	c, err := e2e.DialTLS(t, addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].Subject.CommonName, nil
}

// tlsGet sends GET path with Host host on a new TLS connection made with
// cfg, asking the gateway to close it, and returns the answer and the
// connection's state; the error is the handshake's or the exchange's.
func tlsGet(t *testing.T, addr string, cfg *tls.Config, host, path string) (result, tls.ConnectionState, error) {
	c, err := e2e.DialTLS(t, addr, cfg)
	if err != nil {
		return result{}, tls.ConnectionState{}, err
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n", path, host); err != nil {
		return result{}, c.ConnectionState(), err
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		return result{}, c.ConnectionState(), err
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), close: resp.Close}, c.ConnectionState(), err
}

// curlHTTPS runs curl on https://name:port/path with name resolved to
// the gateway's TLS listener and the CA trusted; args come first. It
// returns curl's standard output (-w's) and its error, with standard
// error in it.
func curlHTTPS(g *supGateway, p *pki, name, path string, args ...string) (string, error) {
	port := strconv.Itoa(e2e.TLSPort(g.port))
	args = append(args, "-sS", "--max-time", "5", "--resolve", name+":"+port+":127.0.0.1", "--cacert", p.caFile,
		"https://"+name+":"+port+path)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "curl", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		err = fmt.Errorf("curl %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), err
}

// sClient runs openssl s_client against the gateway's TLS listener with
// args, sending nothing, and returns its output, standard error included.
func sClient(t *testing.T, g *supGateway, args ...string) string {
	t.Helper()
	out, err := e2e.Run("openssl", 10*time.Second, append([]string{"s_client", "-connect", g.TLSAddr()}, args...)...)
	if err != nil && !strings.Contains(out, "CONNECTED") {
		t.Fatalf("openssl s_client %s: %v\n%s", args, err, out)
	}
	return out
}

var (
	sClientSubject = regexp.MustCompile(`(?m)^subject=.*CN ?= ?([^,\n]+)`)
	sClientSigType = regexp.MustCompile(`(?m)^Peer signature type: (\S+)`)
)

// sClientServed is the CN and the signature type of the certificate
// s_client's output shows, "" when the handshake failed.
func sClientServed(out string) (cn, sig string) {
	if m := sClientSubject.FindStringSubmatch(out); m != nil {
		cn = strings.TrimSpace(m[1])
	}
	if m := sClientSigType.FindStringSubmatch(out); m != nil {
		sig = m[1]
	}
	return cn, sig
}

// TestTLSSNI: the certificate served by SNI, through the binary, to
// crypto/tls, curl and openssl: the object naming the SNI exactly before
// the wildcard one; a wildcard serves one label (a.b.example.com and
// example.com get no certificate: the handshake fails, as does one for a
// name nothing serves); a client without SNI gets fallback_sni's; of the
// RSA and ECDSA certificates of one object, the one the client's
// signature algorithms allow.
func TestTLSSNI(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := textUpstream(t, "over tls")
	exact := p.server(t, "exact", false, "a.example.com")
	wild := p.server(t, "wild", false, "*.example.com")
	dualRSA := p.server(t, "dual-rsa", true, "dual.example.com")
	dualEC := p.server(t, "dual-ecdsa", false, "dual.example.com")
	dual := sslObj("dual", dualRSA, "dual.example.com")
	dual["certs"], dual["keys"] = []string{dualEC.CertPEM}, []string{dualEC.KeyPEM}
	yaml := standaloneYAML(map[string][]obj{
		"routes": {{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}},
		"ssls":   {sslObj("wild", wild, "*.example.com"), sslObj("exact", exact, "a.example.com"), dual},
	})
	g := startTLS(t, yaml, tlsConfig(1, "    fallback_sni: a.example.com\n", ""), 1)
	addr := g.TLSAddr()

	for _, tc := range []struct{ sni, cn string }{
		{"a.example.com", "exact"},
		{"A.Example.COM", "exact"},
		{"x.example.com", "wild"},
		{"dual.example.com", "dual-ecdsa"}, // crypto/tls offers ECDSA first
		{"a.b.example.com", ""},
		{"example.com", ""},
		{"nothing.test", ""},
	} {
		cfg := p.config(tc.sni)
		if tc.cn == "" {
			// Verification off: a certificate served for another name
			// would be taken, and seen.
			cfg = &tls.Config{ServerName: tc.sni, InsecureSkipVerify: true}
		}
		cn, err := servedCN(t, addr, cfg)
		if tc.cn == "" {
			if err == nil {
				t.Errorf("SNI %s: served %q, want a failed handshake", tc.sni, cn)
			}
			continue
		}
		if err != nil || cn != tc.cn {
			t.Errorf("SNI %s: served %q (%v), want %q", tc.sni, cn, err, tc.cn)
		}
	}

	// Requests through it, from curl.
	for _, tc := range []struct{ name, cn string }{{"a.example.com", "exact"}, {"zz.example.com", "wild"}} {
		out, err := curlHTTPS(g, p, tc.name, "/x", "-w", " %{http_code} %{ssl_verify_result}")
		if err != nil || out != "over tls 200 0" {
			t.Errorf("curl https://%s/x: %q %v", tc.name, out, err)
		}
	}
	if out, err := curlHTTPS(g, p, "a.b.example.com", "/x"); err == nil {
		t.Errorf("curl https://a.b.example.com/x: %q, want a failed handshake", out)
	}

	// No SNI: fallback_sni's certificate, to openssl and to crypto/tls
	// (which sends none for an IP address).
	if cn, _ := sClientServed(sClient(t, g, "-noservername")); cn != "exact" {
		t.Errorf("openssl without SNI: served %q, want fallback_sni's (exact)", cn)
	}
	if cn, err := servedCN(t, addr, &tls.Config{InsecureSkipVerify: true}); err != nil || cn != "exact" {
		t.Errorf("crypto/tls without SNI: served %q (%v), want fallback_sni's (exact)", cn, err)
	}

	// RSA or ECDSA as the client's signature algorithms say, in TLS 1.3
	// and 1.2.
	for _, tc := range []struct {
		args    []string
		cn, sig string
	}{
		{[]string{"-tls1_3", "-sigalgs", "ecdsa_secp256r1_sha256"}, "dual-ecdsa", "ECDSA"},
		{[]string{"-tls1_3", "-sigalgs", "rsa_pss_rsae_sha256"}, "dual-rsa", "RSA-PSS"},
		{[]string{"-tls1_2", "-sigalgs", "ECDSA+SHA256"}, "dual-ecdsa", "ECDSA"},
		{[]string{"-tls1_2", "-sigalgs", "RSA+SHA256"}, "dual-rsa", "RSA"},
	} {
		out := sClient(t, g, append([]string{"-servername", "dual.example.com", "-CAfile", p.caFile, "-verify_return_error"}, tc.args...)...)
		if cn, sig := sClientServed(out); cn != tc.cn || sig != tc.sig {
			t.Errorf("openssl %v: served %q signed %q, want %q %q\n%s", tc.args, cn, sig, tc.cn, tc.sig, out)
		}
	}
}

// etcdTLS starts a traditional node on its embedded etcd with the legacy
// admin key and APISIX's default data_encryption, and returns it and its
// Admin API.
func etcdTLS(t *testing.T) (*supGateway, adminAPI) {
	t.Helper()
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	return g, legacyAdmin(adminPort)
}

// sslJSON is an ssl object's JSON for the Admin API.
func sslJSON(t *testing.T, o obj) string {
	t.Helper()
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestTLSAdminAPI: an ssl object PUT through the Admin API is served;
// a certificate or key that does not parse is refused with APISIX's
// message and field, nothing stored; GET does not show the key; with the
// default data_encryption the key in etcd is not PEM, and is served.
func TestTLSAdminAPI(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := textUpstream(t, "via etcd")
	g, admin := etcdTLS(t)
	c := newClient(t)
	if r := admin.do(t, c, "PUT", "routes/1", fmt.Sprintf(`{"uri":"/*","upstream":{"nodes":{%q:1}}}`, up.Addr())); r.status != 201 {
		t.Fatalf("PUT route: %d %s", r.status, r.body)
	}
	cert := p.server(t, "admin-served", false, "api.example.com")
	if r := admin.do(t, c, "PUT", "ssls/1", sslJSON(t, obj{"snis": []string{"api.example.com"}, "cert": cert.CertPEM, "key": cert.KeyPEM})); r.status != 201 {
		t.Fatalf("PUT ssl: %d %s", r.status, r.body)
	}
	hc := e2e.HTTPSClient(t, g.TLSAddr(), p.config(""), false)
	eventually(t, 10*time.Second, func() error {
		r, err := tryDo(hc, "GET", "https://api.example.com/x", "", nil, nil)
		if err != nil || r.status != 200 || r.body != "via etcd" {
			return fmt.Errorf("GET https://api.example.com/x: %d %q %v", r.status, r.body, err)
		}
		return nil
	})
	if out, err := curlHTTPS(g, p, "api.example.com", "/x"); err != nil || out != "via etcd" {
		t.Errorf("curl: %q %v", out, err)
	}

	// What does not parse is refused, naming the field, and not stored.
	badCert := strings.Replace(cert.CertPEM, "MII", "AAA", 1)
	badKey := "-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("QUFB", 40) + "\n-----END PRIVATE KEY-----\n"
	for _, tc := range []struct{ name, body, field, msg string }{
		{"cert", sslJSON(t, obj{"snis": []string{"b.example.com"}, "cert": badCert, "key": cert.KeyPEM}), "cert", "failed to parse cert: "},
		{"key", sslJSON(t, obj{"snis": []string{"b.example.com"}, "cert": cert.CertPEM, "key": badKey}), "key", "failed to parse key: "},
	} {
		r := admin.do(t, c, "PUT", "ssls/2", tc.body)
		var m map[string]any
		_ = json.Unmarshal([]byte(r.body), &m)
		if msg, _ := m["error_msg"].(string); r.status != 400 || !strings.HasPrefix(msg, tc.msg) || m["field"] != tc.field {
			t.Errorf("PUT an ssl with a bad %s: %d %s, want 400 %q... naming %s", tc.name, r.status, r.body, tc.msg, tc.field)
		}
	}
	if r := admin.do(t, c, "GET", "ssls/2", ""); r.status != 404 {
		t.Errorf("GET ssls/2 after refused PUTs: %d %s", r.status, r.body)
	}

	// The key is not shown, nor stored in clear.
	type item struct{ Value map[string]any }
	for _, path := range []string{"ssls/1", "ssls"} {
		r := admin.do(t, c, "GET", path, "")
		var one item
		var list struct{ List []item }
		_ = json.Unmarshal([]byte(r.body), &one)
		_ = json.Unmarshal([]byte(r.body), &list)
		if path == "ssls" && len(list.List) == 1 {
			one = list.List[0]
		}
		_, hasKey := one.Value["key"]
		if r.status != 200 || one.Value["id"] != "1" || one.Value["cert"] != cert.CertPEM || hasKey || strings.Contains(r.body, "PRIVATE KEY") {
			t.Errorf("GET %s: %d %s, want the object without its key", path, r.status, r.body)
		}
	}
	kv, err := embeddedStore(t, g.dir).Get(context.Background(), "/apisix/ssls/1")
	if err != nil {
		t.Fatal(err)
	}
	var stored struct{ Key string }
	if err := json.Unmarshal(kv.Value, &stored); err != nil || stored.Key == "" || strings.HasPrefix(stored.Key, "---") ||
		strings.Contains(string(kv.Value), "PRIVATE KEY") {
		t.Errorf("etcd holds %s (%v), want the key encrypted", kv.Value, err)
	}
}

// TestTLSRotation: handshakes and requests on new connections, from four
// clients at once, while the ssl object's certificate is replaced through
// the Admin API: none fails, the new certificate is served within 5 s of
// the PUT, and once it is, the old one never again (one worker).
func TestTLSRotation(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := textUpstream(t, "rotating")
	g, admin := etcdTLS(t)
	c := newClient(t)
	if r := admin.do(t, c, "PUT", "routes/1", fmt.Sprintf(`{"uri":"/*","upstream":{"nodes":{%q:1}}}`, up.Addr())); r.status != 201 {
		t.Fatalf("PUT route: %d %s", r.status, r.body)
	}
	old, next := p.server(t, "old", false, "rot.example.com"), p.server(t, "new", true, "rot.example.com")
	put := func(cert *testcert.Cert) {
		t.Helper()
		if r := admin.do(t, c, "PUT", "ssls/1", sslJSON(t, obj{"snis": []string{"rot.example.com"}, "cert": cert.CertPEM, "key": cert.KeyPEM})); r.status/100 != 2 {
			t.Fatalf("PUT ssl: %d %s", r.status, r.body)
		}
	}
	put(old)
	addr, cfg := g.TLSAddr(), p.config("rot.example.com")
	eventually(t, 10*time.Second, func() error {
		_, _, err := tlsGet(t, addr, cfg, "rot.example.com", "/warm")
		return err
	})

	type hit struct {
		at time.Time
		cn string
	}
	var (
		mu       sync.Mutex
		hits     []hit
		failures []string
		stop     atomic.Bool
		wg       sync.WaitGroup
	)
	deadline := time.Now().Add(20 * time.Second)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000 && !stop.Load() && time.Now().Before(deadline); i++ {
				start := time.Now()
				r, st, err := tlsGet(t, addr, cfg, "rot.example.com", "/r")
				mu.Lock()
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case r.status != 200 || r.body != "rotating":
					failures = append(failures, fmt.Sprintf("%d %q", r.status, r.body))
				default:
					hits = append(hits, hit{start, st.PeerCertificates[0].Subject.CommonName})
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(300 * time.Millisecond)
	rotated := time.Now()
	put(next)
	var served time.Time
	for time.Now().Before(rotated.Add(10 * time.Second)) {
		mu.Lock()
		for _, h := range hits {
			if h.cn == "new" && (served.IsZero() || h.at.Before(served)) {
				served = h.at
			}
		}
		mu.Unlock()
		if !served.IsZero() && time.Since(served) > 500*time.Millisecond {
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop.Store(true)
	wg.Wait()
	if len(failures) > 0 {
		t.Errorf("%d of %d exchanges failed during the rotation, first: %s", len(failures), len(failures)+len(hits), failures[0])
	}
	if served.IsZero() {
		t.Fatalf("the new certificate was not served within 10 s of the PUT (%d exchanges)", len(hits))
	}
	if d := served.Sub(rotated); d > 5*time.Second {
		t.Errorf("the new certificate was served %v after the PUT, want within 5 s", d)
	}
	late := 0
	for _, h := range hits {
		// A connection begun before the first served the new one may have
		// had its first record read earlier.
		if h.cn == "old" && h.at.After(served.Add(100*time.Millisecond)) {
			late++
		}
	}
	if late > 0 {
		t.Errorf("%d connections begun after the new certificate was served got the old one", late)
	}
	t.Logf("%d exchanges, the new certificate served %v after the PUT", len(hits), served.Sub(rotated).Round(time.Millisecond))
}

// TestTLSMTLS: client.ca through the binary. Without skip_mtls_uri_regex
// a client certificate of the CA is required by the handshake (none, or
// one of another CA, fails it); with it, a request whose $uri matches
// passes without a certificate (or with one that does not verify) and
// another is answered 400, nginx's page, unless a good certificate came;
// so is a request whose Host names an object that verifies clients on a
// connection made for another SNI. $ssl_client_verify and
// $ssl_client_s_dn are logged as nginx logs them.
func TestTLSMTLS(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := textUpstream(t, "verified")
	clientCA := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "client CA"}, CA: true}, nil)
	otherCA := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "other CA"}, CA: true}, nil)
	good := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "client one", Organization: []string{"Org"}}, Client: true}, clientCA)
	stranger := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "stranger"}, Client: true}, otherCA)
	m, s := sslObj("m", p.server(t, "m", false, "m.example.com"), "m.example.com"), sslObj("s", p.server(t, "s", false, "s.example.com"), "s.example.com")
	m["client"] = obj{"ca": clientCA.CertPEM}
	s["client"] = obj{"ca": clientCA.CertPEM, "skip_mtls_uri_regex": []string{"^/public/.*"}}
	yaml := standaloneYAML(map[string][]obj{
		"routes": {{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}},
		"ssls":   {m, s},
	})
	g := startTLS(t, yaml, tlsConfig(1, "", `    access_log_format: '$ssl_server_name $ssl_client_verify "$ssl_client_s_dn" $uri $status'`+"\n"), 1)
	addr := g.TLSAddr()
	with := func(name string, cert *testcert.Cert) *tls.Config {
		cfg := p.config(name)
		if cert != nil {
			// Sent whatever CAs the server names (crypto/tls would send
			// none of another CA).
			tc := cert.TLS()
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tc, nil }
		}
		return cfg
	}

	type exchange struct {
		sni, path string
		cert      *testcert.Cert
		status    int    // 0: the handshake (or the first read) fails
		log       string // the access log's line
		host      string // the Host sent, sni when ""
	}
	cases := []exchange{
		{"m.example.com", "/private", good, 200, `m.example.com SUCCESS "CN=client one,O=Org" /private 200`, ""},
		{"m.example.com", "/private", nil, 0, "", ""},
		{"m.example.com", "/private", stranger, 0, "", ""},
		{"s.example.com", "/public/x", nil, 200, `s.example.com NONE "" /public/x 200`, ""},
		{"s.example.com", "/private", nil, 400, `s.example.com NONE "" /private 400`, ""},
		{"s.example.com", "/private", good, 200, `s.example.com SUCCESS "CN=client one,O=Org" /private 200`, ""},
		{"s.example.com", "/private", stranger, 400, `s.example.com FAILED:unable to get local issuer certificate "CN=stranger" /private 400`, ""},
		{"s.example.com", "/public/y", stranger, 200, `s.example.com FAILED:unable to get local issuer certificate "CN=stranger" /public/y 200`, ""},
		// A request for a name whose object verifies clients, on a
		// connection made for another name.
		{"s.example.com", "/public/z", good, 400, `s.example.com SUCCESS "CN=client one,O=Org" /public/z 400`, "m.example.com"},
	}
	var want []string
	for _, tc := range cases {
		host := tc.host
		if host == "" {
			host = tc.sni
		}
		r, _, err := tlsGet(t, addr, with(tc.sni, tc.cert), host, tc.path)
		who := "no certificate"
		if tc.cert != nil {
			who = tc.cert.Cert.Subject.CommonName
		}
		switch {
		case tc.status == 0 && err == nil:
			t.Errorf("%s %s with %s: %d, want a failed handshake", tc.sni, tc.path, who, r.status)
		case tc.status != 0 && (err != nil || r.status != tc.status):
			t.Errorf("%s %s with %s: %d %v, want %d", tc.sni, tc.path, who, r.status, err, tc.status)
		case tc.status == 400 && !strings.Contains(r.body, "<title>400 Bad Request</title>"):
			t.Errorf("%s %s with %s: 400 %q, want nginx's page", tc.sni, tc.path, who, r.body)
		}
		if tc.log != "" {
			want = append(want, tc.log)
		}
	}

	// curl and openssl, with the client's certificate and without.
	certFile, keyFile := p.file(t, "client.pem", good.CertPEM), p.file(t, "client.key", good.KeyPEM)
	if out, err := curlHTTPS(g, p, "m.example.com", "/curl", "--cert", certFile, "--key", keyFile); err != nil || out != "verified" {
		t.Errorf("curl with a client certificate: %q %v", out, err)
	}
	if out, err := curlHTTPS(g, p, "m.example.com", "/curl-none"); err == nil {
		t.Errorf("curl without a client certificate: %q, want a failed handshake", out)
	}
	want = append(want, `m.example.com SUCCESS "CN=client one,O=Org" /curl 200`)
	if out := sClient(t, g, "-servername", "m.example.com", "-cert", certFile, "-key", keyFile, "-CAfile", p.caFile); !strings.Contains(out, "Verify return code: 0 (ok)") {
		t.Errorf("openssl with a client certificate:\n%s", out)
	}

	lines := waitFile(t, filepath.Join(g.dir, "logs", "access.log"), len(want))
	if strings.Join(lines, "\n") != strings.Join(want, "\n") {
		t.Errorf("access log:\n%s\nwant:\n%s", strings.Join(lines, "\n"), strings.Join(want, "\n"))
	}
}

// TestTLSResumption: with two workers sharing the node's session ticket
// keys, a client that keeps its sessions resumes every connection after
// the first, whichever worker it lands on (keys of each worker's own
// would fail about half); the access log shows both workers, and
// $ssl_session_reused.
func TestTLSResumption(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := textUpstream(t, "again")
	yaml := standaloneYAML(map[string][]obj{
		"routes": {{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}},
		"ssls":   {sslObj("1", p.server(t, "resumed", false, "r.example.com"), "r.example.com")},
	})
	g := startTLS(t, yaml, tlsConfig(2, "    ssl_session_tickets: true\n", "    access_log_format: '$pid $ssl_session_reused $ssl_protocol $uri'\n"), 2)
	addr := g.TLSAddr()
	for _, v := range []uint16{tls.VersionTLS13, tls.VersionTLS12} {
		cfg := p.config("r.example.com")
		cfg.MinVersion, cfg.MaxVersion = v, v
		cfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		for i := range 20 {
			r, st, err := tlsGet(t, addr, cfg, "r.example.com", fmt.Sprintf("/%s/%d", strings.ReplaceAll(tls.VersionName(v), "TLS 1", "TLSv1"), i))
			if err != nil || r.status != 200 {
				t.Fatalf("%s connection %d: %d %v", tls.VersionName(v), i, r.status, err)
			}
			if st.DidResume != (i > 0) {
				t.Errorf("%s connection %d: resumed %v", tls.VersionName(v), i, st.DidResume)
			}
		}
	}
	// Each worker writes its own lines: they are not in the requests' order.
	lines := waitFile(t, filepath.Join(g.dir, "logs", "access.log"), 40)
	pids, seen := map[string]int{}, map[string]bool{}
	line := regexp.MustCompile(`^(\d+) (\.|r) (TLSv1\.[23]) /(TLSv1\.[23])/(\d+)$`)
	for _, l := range lines {
		m := line.FindStringSubmatch(l)
		if m == nil || seen[m[4]+m[5]] {
			t.Errorf("access log line %q", l)
			continue
		}
		seen[m[4]+m[5]] = true
		reused := "r"
		if m[5] == "0" {
			reused = "."
		}
		if m[2] != reused || m[3] != m[4] {
			t.Errorf("access log line %q: want $ssl_session_reused %s, $ssl_protocol of %s", l, reused, m[4])
		}
		pids[m[1]]++
	}
	if len(pids) != 2 {
		t.Errorf("connections by worker pid: %v, want both workers", pids)
	}
	t.Logf("connections by worker pid: %v", pids)
}

// TestTLSFramingDifferential is TestFramingDifferential through the TLS
// listener: the seeds, the worker's FuzzFraming corpus and a bounded set
// of generated requests, each on a connection of its own, with the same
// strict origin and verdicts.
func TestTLSFramingDifferential(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	u := newStrictUpstream(t)
	yaml := standaloneYAML(map[string][]obj{
		"routes": {{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(u.Addr()), nil)}},
		"ssls":   {sslObj("1", p.server(t, "framing", false, "x"), "x")},
	})
	g := startTLS(t, yaml, tlsConfig(1, "", ""), 1)
	cfg := p.config("x")
	cfg.ClientSessionCache = tls.NewLRUClientSessionCache(1) // the handshakes resumed, to keep it quick
	// A request in one record, as the plain run sends it in one write:
	// crypto/tls's first records are otherwise about 1 KiB, and the
	// gateway streams a body, so a chunked body whose error comes in a
	// later read reaches the origin cut short (over plain TCP too).
	cfg.DynamicRecordSizingDisabled = true
	addr := g.TLSAddr()
	framingDifferential(t, u, 600, func(t testing.TB) net.Conn {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", addr, cfg)
		if err != nil {
			t.Fatal(err)
		}
		return c
	})
}

// clientHello is the first flight of a crypto/tls client for name: its
// ClientHello record.
func clientHello(t *testing.T, name string) []byte {
	t.Helper()
	a, b := net.Pipe()
	defer b.Close()
	go func() {
		defer a.Close()
		_ = tls.Client(a, &tls.Config{ServerName: name, InsecureSkipVerify: true}).Handshake()
	}()
	_ = b.SetReadDeadline(time.Now().Add(2 * time.Second))
	buf := make([]byte, 64<<10)
	n, err := b.Read(buf)
	if err != nil || n < 5 || buf[0] != 22 {
		t.Fatalf("no ClientHello: %d bytes, %v", n, err)
	}
	return buf[:n]
}

// TestTLSSlowHandshake: a client that sends half its ClientHello, or the
// whole of it and then nothing, is closed at client_header_timeout (1 s),
// counted from the accept, and has no answer but the server's flight.
func TestTLSSlowHandshake(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := textUpstream(t, "slow")
	yaml := standaloneYAML(map[string][]obj{
		"routes": {{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}},
		"ssls":   {sslObj("1", p.server(t, "slow", false, "slow.example.com"), "slow.example.com")},
	})
	g := startTLS(t, yaml, tlsConfig(1, "", "    client_header_timeout: 1s\n"), 1)
	hello := clientHello(t, "slow.example.com")
	for _, tc := range []struct {
		name string
		sent []byte
	}{
		{"nothing", nil},
		{"half a ClientHello", hello[:len(hello)/2]},
		{"a ClientHello", hello},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := e2e.Dial(t, g.TLSAddr())
			start := time.Now()
			if _, err := c.Write(tc.sent); err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(c)
			d := time.Since(start)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatalf("not closed within 15 s (%d bytes read)", len(got))
			}
			if d < 900*time.Millisecond || d > 2500*time.Millisecond {
				t.Errorf("closed after %v, want at client_header_timeout (1 s)", d)
			}
			// The server's flight to a whole ClientHello (a handshake
			// record first), nothing otherwise.
			if (len(tc.sent) == len(hello)) != (len(got) > 0) || len(got) > 0 && got[0] != 22 {
				t.Errorf("read %d bytes (% x...)", len(got), got[:min(len(got), 8)])
			}
		})
	}
}

// TestTLSScheme: over TLS the upstream gets X-Forwarded-Proto: https (http
// over the plain listener), and a route with vars scheme == https matches
// only over TLS.
func TestTLSScheme(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path+" "+r.Header.Get("X-Forwarded-Proto"))
	})
	yaml := standaloneYAML(map[string][]obj{
		"routes": {
			{"id": 1, "uri": "/proto", "upstream": upstreamOf(nodes(up.Addr()), nil)},
			{"id": 2, "uri": "/secure", "vars": [][]string{{"scheme", "==", "https"}}, "upstream": upstreamOf(nodes(up.Addr()), nil)},
		},
		"ssls": {sslObj("1", p.server(t, "scheme", false, "s.example.com"), "s.example.com")},
	})
	g := startTLS(t, yaml, tlsConfig(1, "", ""), 1)
	hc, c := e2e.HTTPSClient(t, g.TLSAddr(), p.config(""), true), newClient(t)
	for _, tc := range []struct {
		c      *http.Client
		url    string
		status int
		body   string
	}{
		{hc, "https://s.example.com/proto", 200, "/proto https"},
		{c, g.url("/proto"), 200, "/proto http"},
		{hc, "https://s.example.com/secure", 200, "/secure https"},
		{c, g.url("/secure"), 404, ""},
	} {
		r := do(t, tc.c, "GET", tc.url, "", nil, nil)
		if r.status != tc.status || tc.status == 200 && r.body != tc.body {
			t.Errorf("GET %s: %d %q, want %d %q", tc.url, r.status, r.body, tc.status, tc.body)
		}
	}
}

// TestTLSConfigTest: coregate -t refuses an apisix.ssl whose ssl_ciphers
// offer nothing this gateway can serve, and enable_http2 on an ssl.listen
// entry, saying which key and why; the same file with neither passes.
func TestTLSConfigTest(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "apisix.yaml"), routesYAML())
	run := func(conf string) (string, error) {
		t.Helper()
		writeFile(t, filepath.Join(dir, "config.yaml"), conf)
		return e2e.Run(binPath, 20*time.Second, "-t", "-c", filepath.Join(dir, "config.yaml"))
	}
	port := freePort(t)
	if out, err := run(tlsConfig(1, "    ssl_ciphers: ECDHE-RSA-AES128-GCM-SHA256\n", "")(port)); err != nil || !strings.Contains(out, "successful") {
		t.Fatalf("-t of a sound apisix.ssl: %v\n%s", err, out)
	}
	for _, tc := range []struct {
		name, conf string
		says       []string
	}{
		{"ciphers", tlsConfig(1, "    ssl_ciphers: DHE-RSA-AES256-SHA:AES128-SHA:NOPE\n", "")(port), []string{"ssl_ciphers"}},
		{"http2", strings.Replace(tlsConfig(1, "", "")(port), "\n        port: ", "\n        enable_http2: true\n        port: ", 1),
			[]string{"apisix.ssl.listen", "enable_http2"}},
	} {
		out, err := run(tc.conf)
		ok := err != nil && !strings.Contains(out, "successful")
		for _, s := range tc.says {
			ok = ok && strings.Contains(out, s)
		}
		if !ok {
			t.Errorf("-t of %s: %v\n%s\nwant a refusal naming %q", tc.name, err, out, tc.says)
		}
		t.Logf("-t of %s: %s", tc.name, strings.TrimSpace(out))
	}
}

// TestTLSUpstream: https upstreams through the binary. With tls.verify the
// origin's certificate is checked against apisix.ssl's
// ssl_trusted_certificate and the name the request goes with: an origin
// of that CA answers, one of another CA gets 502; without it both answer.
// The connection is kept alive.
func TestTLSUpstream(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	origin := func(c *testcert.Cert) (addr string, conns *atomic.Int32) {
		conns = new(atomic.Int32)
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, r.Host+" "+r.TLS.ServerName)
		}))
		s.TLS = &tls.Config{Certificates: []tls.Certificate{c.TLS()}}
		s.Config.ConnState = func(_ net.Conn, st http.ConnState) {
			if st == http.StateNew {
				conns.Add(1)
			}
		}
		s.StartTLS()
		t.Cleanup(s.Close)
		return s.Listener.Addr().String(), conns
	}
	trusted, trustedConns := origin(p.server(t, "origin", false, "origin.test"))
	other := newPKI(t)
	untrusted, _ := origin(other.server(t, "stranger", false, "origin.test"))
	route := func(id int, addr string, verify bool) obj {
		return obj{"id": id, "uri": fmt.Sprintf("/%d", id), "upstream": upstreamOf(nodes(addr), obj{
			"scheme": "https", "pass_host": "rewrite", "upstream_host": "origin.test",
			"tls": obj{"verify": verify}})}
	}
	yaml := standaloneYAML(map[string][]obj{"routes": {
		route(1, trusted, true), route(2, untrusted, true), route(3, untrusted, false), route(4, trusted, false),
	}})
	g := startTLS(t, yaml, tlsConfig(1, "    ssl_trusted_certificate: "+p.caFile+"\n", ""), 1)
	c := newClient(t)
	for _, tc := range []struct {
		path   string
		status int
	}{{"/1", 200}, {"/2", 502}, {"/3", 200}, {"/4", 200}} {
		for range 3 {
			r := do(t, c, "GET", g.url(tc.path), "", nil, nil)
			if r.status != tc.status || tc.status == 200 && r.body != "origin.test origin.test" {
				t.Fatalf("GET %s: %d %q, want %d %q", tc.path, r.status, r.body, tc.status, "origin.test origin.test")
			}
		}
	}
	// Routes 1 and 4 share no pool (verify is part of a connection's
	// identity); each kept its one connection for its three requests.
	if n := trustedConns.Load(); n != 2 {
		t.Errorf("the trusted origin saw %d connections, want 2", n)
	}
	if !strings.Contains(g.Log(), "certificate signed by unknown authority") {
		t.Errorf("the 502's cause is not logged:\n%s", g.Log())
	}
}
