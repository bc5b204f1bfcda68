package tlsconf

import (
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"net/url"
	"strings"
	"testing"

	"coregate/admin/spec"
	"coregate/internal/testcert"
)

// TestMTLS: client.ca verified in the handshake (missing, bad, too deep
// refused), or, with skip_mtls_uri_regex, per request; and a Host naming
// an object that verifies clients must be the SNI.
func TestMTLS(t *testing.T) {
	ca := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "ca"}, CA: true}, nil)
	inter := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "inter"}, CA: true}, ca)
	good := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "good"}, Client: true}, ca)
	deep := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "deep"}, Client: true}, inter)
	other := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "other"}, Client: true}, nil)
	srv := server(t, "m.com", "s.com", "d.com", "p.com")
	obj := func(id, sni string, client map[string]any) *spec.SSL {
		m := map[string]any{"id": id, "cert": srv.CertPEM, "key": srv.KeyPEM, "sni": sni}
		if client != nil {
			m["client"] = client
		}
		return mustSSL(t, m)
	}
	tab, errs := Build([]*spec.SSL{
		obj("m", "m.com", map[string]any{"ca": ca.CertPEM}),
		obj("d", "d.com", map[string]any{"ca": ca.CertPEM, "depth": 0}),
		obj("s", "s.com", map[string]any{"ca": ca.CertPEM, "skip_mtls_uri_regex": []string{"^/public/"}}),
		obj("p", "p.com", nil),
	}, Settings{}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	roots := pool(srv)
	cc := func(sni string, c *testcert.Cert) *tls.Config {
		cfg := &tls.Config{ServerName: sni, RootCAs: roots}
		if c != nil {
			// sent whatever CAs the server names, as a client that has
			// one certificate does
			tc := c.TLS()
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tc, nil }
		}
		return cfg
	}
	// In the handshake.
	for _, tc := range []struct {
		name, sni string
		cert      *testcert.Cert
		ok        bool
	}{
		{"good", "m.com", good, true},
		{"missing", "m.com", nil, false},
		{"other ca", "m.com", other, false},
		{"one intermediate within depth 1", "m.com", deep, true},
		{"direct within depth 0", "d.com", good, true},
		{"one intermediate beyond depth 0", "d.com", deep, false},
	} {
		r := handshake(t, tab, cc(tc.sni, tc.cert))
		if (r.err == nil) != tc.ok || (r.serverErr == nil) != tc.ok {
			t.Errorf("%s: client %v server %v", tc.name, r.err, r.serverErr)
			continue
		}
		if !tc.ok {
			continue
		}
		e := tab.Match(tc.sni)
		if v := e.Verify(&r.server); v != "SUCCESS" {
			t.Errorf("%s: Verify %s", tc.name, v)
		}
		if st := tab.CheckClient(e, "SUCCESS", tc.sni, []byte(tc.sni), []byte("/")); st != 0 {
			t.Errorf("%s: CheckClient %d", tc.name, st)
		}
		// Host naming another object that verifies clients: 400.
		if st := tab.CheckClient(e, "SUCCESS", tc.sni, []byte("s.com"), []byte("/")); st != 400 {
			t.Errorf("%s: Host s.com on SNI %s: %d", tc.name, tc.sni, st)
		}
	}
	// After the handshake, per request, with skip_mtls_uri_regex.
	e := tab.Match("s.com")
	for _, tc := range []struct {
		name   string
		cert   *testcert.Cert
		verify string
	}{
		{"good", good, "SUCCESS"},
		{"missing", nil, "NONE"},
		{"other ca", other, "FAILED:self-signed certificate"},
		{"intermediate not sent", deep, "FAILED:unable to get local issuer certificate"},
	} {
		cfg := cc("s.com", tc.cert)
		if tc.name == "intermediate not sent" {
			leaf := tls.Certificate{Certificate: [][]byte{deep.Cert.Raw}, PrivateKey: deep.Key}
			cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &leaf, nil }
		}
		r := handshake(t, tab, cfg)
		if r.err != nil || r.serverErr != nil {
			t.Errorf("%s: handshake refused: %v / %v", tc.name, r.err, r.serverErr)
			continue
		}
		v := e.Verify(&r.server)
		if v != tc.verify {
			t.Errorf("%s: Verify %q, want %q", tc.name, v, tc.verify)
		}
		want := 400
		if v == "SUCCESS" {
			want = 0
		}
		if st := tab.CheckClient(e, v, "s.com", []byte("s.com"), []byte("/private")); st != want {
			t.Errorf("%s: /private: %d, want %d", tc.name, st, want)
		}
		if st := tab.CheckClient(e, v, "s.com", []byte("s.com"), []byte("/public/x")); st != 0 {
			t.Errorf("%s: /public/x: %d", tc.name, st)
		}
		// the skipped path still needs Host to be the SNI
		if st := tab.CheckClient(e, v, "s.com", []byte("m.com"), []byte("/public/x")); st != 400 {
			t.Errorf("%s: /public/x with Host m.com: %d", tc.name, st)
		}
	}
	// With its intermediate sent, within depth 1.
	r := handshake(t, tab, cc("s.com", deep))
	if r.err != nil || len(r.server.PeerCertificates) != 2 {
		t.Fatalf("deep with its chain: %v, %d certificates", r.err, len(r.server.PeerCertificates))
	}
	if v := e.Verify(&r.server); v != "SUCCESS" {
		t.Errorf("deep with its chain: %s", v)
	}
	// An object without client verification: nothing asked.
	p := tab.Match("p.com")
	if v := p.Verify(&r.server); v != "NONE" || tab.CheckClient(p, "NONE", "p.com", []byte("p.com"), []byte("/")) != 0 {
		t.Error("p.com verifies clients")
	}
	if tab.CheckClient(nil, "NONE", "", []byte("unknown.com"), []byte("/")) != 0 {
		t.Error("a Host no object serves is refused")
	}
}

// TestCheckClientAllocs: the request-time check allocates nothing.
func TestCheckClientAllocs(t *testing.T) {
	ca := testcert.New(t, testcert.Options{CA: true}, nil)
	srv := server(t, "s.example.com")
	tab, _ := Build([]*spec.SSL{mustSSL(t, map[string]any{"id": "s", "cert": srv.CertPEM, "key": srv.KeyPEM, "sni": "*.example.com",
		"client": map[string]any{"ca": ca.CertPEM, "skip_mtls_uri_regex": []string{"^/public/"}}})}, Settings{}, nil)
	e := tab.Match("s.example.com")
	host, uri := []byte("s.example.com"), []byte("/public/a")
	var st int
	if n := testing.AllocsPerRun(100, func() { st = tab.CheckClient(e, "NONE", "s.example.com", host, uri) }); n != 0 || st != 0 {
		t.Fatalf("%v allocations, status %d", n, st)
	}
}

// TestVars: nginx's TLS variables in nginx's formats.
func TestVars(t *testing.T) {
	ca := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "Test CA", Organization: []string{"Org, Inc."}, Country: []string{"US"}}, CA: true}, nil)
	cl := testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: "client é", OrganizationalUnit: []string{"Dev"},
		ExtraNames: []pkix.AttributeTypeAndValue{{Type: []int{1, 2, 840, 113549, 1, 9, 1}, Value: "a@b.c"}}}, Client: true, Serial: 0x1a2b}, ca)
	srv := server(t, "v.com")
	tab, _ := Build([]*spec.SSL{mustSSL(t, map[string]any{"id": "v", "cert": srv.CertPEM, "key": srv.KeyPEM, "sni": "v.com",
		"client": map[string]any{"ca": ca.CertPEM}})}, Settings{}, nil)
	r := handshake(t, tab, &tls.Config{ServerName: "v.com", RootCAs: pool(srv), Certificates: []tls.Certificate{cl.TLS()}, MaxVersion: tls.VersionTLS12,
		CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256}})
	if r.err != nil {
		t.Fatal(r.err, r.serverErr)
	}
	sum := sha1.Sum(cl.Cert.Raw)
	pemText := strings.TrimSuffix(string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cl.Cert.Raw})), "\n")
	for name, want := range map[string]string{
		"ssl_server_name":         "v.com",
		"ssl_protocol":            "TLSv1.2",
		"ssl_cipher":              "ECDHE-ECDSA-AES128-GCM-SHA256",
		"ssl_session_reused":      ".",
		"ssl_client_verify":       "SUCCESS",
		"ssl_client_s_dn":         `emailAddress=a@b.c,CN=client \C3\A9,OU=Dev`,
		"ssl_client_i_dn":         `CN=Test CA,O=Org\, Inc.,C=US`,
		"ssl_client_serial":       "1A2B",
		"ssl_client_fingerprint":  hex.EncodeToString(sum[:]),
		"ssl_client_raw_cert":     pemText + "\n",
		"ssl_client_cert":         strings.ReplaceAll(pemText, "\n", "\n\t"),
		"ssl_client_escaped_cert": strings.ReplaceAll(url.QueryEscape(pemText+"\n"), "+", "%20"),
	} {
		got, ok := Var(name, &r.server, []byte("x"))
		if !ok || string(got) != "x"+want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}
	if _, ok := Var("ssl_nope", &r.server, nil); ok {
		t.Error("ssl_nope is a variable")
	}
	none := tls.ConnectionState{Version: tls.VersionTLS13, CipherSuite: tls.TLS_AES_128_GCM_SHA256, DidResume: true}
	for name, want := range map[string]string{"ssl_client_verify": "NONE", "ssl_client_s_dn": "", "ssl_cipher": "TLS_AES_128_GCM_SHA256", "ssl_session_reused": "r"} {
		if got, _ := Var(name, &none, nil); string(got) != want {
			t.Errorf("no certificate: %s = %q, want %q", name, got, want)
		}
	}
	st := r.server
	buf := make([]byte, 0, 4096)
	for _, name := range []string{"ssl_protocol", "ssl_cipher", "ssl_client_serial", "ssl_client_fingerprint", "ssl_client_escaped_cert"} {
		if n := testing.AllocsPerRun(50, func() { buf, _ = Var(name, &st, buf[:0]) }); n != 0 {
			t.Errorf("%s: %v allocations", name, n)
		}
	}
}
