package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/internal/testcert"
)

// result is one handshake's outcome on both sides.
type result struct {
	client, server tls.ConnectionState
	err, serverErr error
}

// handshake runs a handshake of a crypto/tls client configured by cc
// against a listener on loopback served by tab.
func handshake(t *testing.T, tab *Table, cc *tls.Config) result {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", tab.Config(nil))
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	srv := make(chan result, 1)
	go func() {
		var r result
		c, err := ln.Accept()
		if err != nil {
			r.serverErr = err
			srv <- r
			return
		}
		defer c.Close()
		tc := c.(*tls.Conn)
		_ = tc.SetDeadline(time.Now().Add(10 * time.Second))
		r.serverErr = tc.Handshake()
		r.server = tc.ConnectionState()
		if r.serverErr == nil {
			// a byte back, so that a TLS 1.3 client sees a refusal of its
			// certificate and reads its session ticket
			if _, err := tc.Write([]byte{'x'}); err != nil {
				r.serverErr = err
			}
		}
		srv <- r
	}()
	d := &net.Dialer{Timeout: 10 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", ln.Addr().String(), cc)
	var r result
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		var b [1]byte
		var n int
		if n, err = c.Read(b[:]); n == 1 {
			err = nil // the byte may come with the server's close_notify
		}
		r.client = c.ConnectionState()
		c.Close()
	}
	r.err = err
	s := <-srv
	r.server, r.serverErr = s.server, s.serverErr
	return r
}

func mustSSL(t *testing.T, m map[string]any) *spec.SSL {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	s, err := spec.DecodeSSL(b)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func server(t *testing.T, names ...string) *testcert.Cert {
	return testcert.New(t, testcert.Options{Subject: pkix.Name{CommonName: names[0]}, DNSNames: names}, nil)
}

// pool trusts every certificate given.
func pool(cs ...*testcert.Cert) *x509.CertPool {
	p := x509.NewCertPool()
	for _, c := range cs {
		p.AddCert(c.Cert)
	}
	return p
}

// TestSNI: exact names, the most specific wildcard, one label only,
// case and a final dot, fallback_sni for a handshake without SNI, and a
// handshake refused when nothing matches; an object not served is not.
func TestSNI(t *testing.T) {
	exact := server(t, "a.example.com")
	wild := server(t, "*.example.com")
	deeper := server(t, "*.b.example.com")
	off := server(t, "off.example.com")
	tab, errs := Build([]*spec.SSL{
		mustSSL(t, map[string]any{"id": "exact", "cert": exact.CertPEM, "key": exact.KeyPEM, "snis": []string{"A.example.com."}}),
		mustSSL(t, map[string]any{"id": "wild", "cert": wild.CertPEM, "key": wild.KeyPEM, "sni": "*.example.com"}),
		mustSSL(t, map[string]any{"id": "deeper", "cert": deeper.CertPEM, "key": deeper.KeyPEM, "sni": "*.b.example.com"}),
		mustSSL(t, map[string]any{"id": "off", "cert": off.CertPEM, "key": off.KeyPEM, "sni": "off.example.com", "status": 0}),
		mustSSL(t, map[string]any{"id": "client", "cert": off.CertPEM, "key": off.KeyPEM, "type": "client"}),
	}, Settings{FallbackSNI: "fallback.example.com"}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	roots := pool(exact, wild, deeper, off)
	for _, tc := range []struct{ sni, want string }{
		{"a.example.com", "exact"},
		{"A.EXAMPLE.COM", "exact"},
		{"z.example.com", "wild"},
		{"x.b.example.com", "deeper"},
		{"b.example.com", "wild"},
		{"off.example.com", "wild"}, // status 0: not served, the wildcard is
		{"example.com", ""},
		{"y.x.example.com", ""},
		{"other.org", ""},
	} {
		if e := tab.Match(normalize(tc.sni)); (e == nil && tc.want != "") || (e != nil && e.ID != tc.want) {
			t.Errorf("Match(%s) = %v, want %q", tc.sni, e, tc.want)
		}
		r := handshake(t, tab, &tls.Config{ServerName: tc.sni, RootCAs: roots, InsecureSkipVerify: tc.want == ""})
		if tc.want == "" {
			if r.err == nil || r.serverErr == nil || !strings.Contains(r.serverErr.Error(), "failed to find any SSL certificate by SNI") {
				t.Errorf("%s: handshake: %v / server %v, want refused", tc.sni, r.err, r.serverErr)
			}
			continue
		}
		if r.err != nil {
			t.Errorf("%s: %v (server %v)", tc.sni, r.err, r.serverErr)
		}
	}
	// No SNI: fallback_sni's certificate, here the wildcard's.
	r := handshake(t, tab, &tls.Config{InsecureSkipVerify: true})
	if r.err != nil || !r.client.PeerCertificates[0].Equal(wild.Cert) {
		t.Fatalf("no SNI with fallback: %v", r.err)
	}
	// No SNI and no fallback: refused, as APISIX.
	tab, _ = Build([]*spec.SSL{mustSSL(t, map[string]any{"id": "wild", "cert": wild.CertPEM, "key": wild.KeyPEM, "sni": "*.example.com"})}, Settings{}, nil)
	r = handshake(t, tab, &tls.Config{InsecureSkipVerify: true})
	if r.err == nil || r.serverErr == nil || !strings.Contains(r.serverErr.Error(), "failed to find SNI") {
		t.Fatalf("no SNI: %v / %v", r.err, r.serverErr)
	}
}

// TestRSAAndECDSA: an RSA and an ECDSA certificate for the same names are
// both served, each to the client that supports only it.
func TestRSAAndECDSA(t *testing.T) {
	ec := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	rsa := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}, RSA: true}, nil)
	tab, errs := Build([]*spec.SSL{mustSSL(t, map[string]any{"id": 1, "cert": rsa.CertPEM, "key": rsa.KeyPEM, "sni": "a.com",
		"certs": []string{ec.CertPEM}, "keys": []string{ec.KeyPEM}})}, Settings{}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	roots := pool(ec, rsa)
	for _, tc := range []struct {
		name   string
		cc     *tls.Config
		want   *testcert.Cert
		cipher string
	}{
		{"any", &tls.Config{}, ec, ""},
		{"rsa suites", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}}, rsa, "ECDHE-RSA-AES128-GCM-SHA256"},
		{"ecdsa suites", &tls.Config{MaxVersion: tls.VersionTLS12, CipherSuites: []uint16{tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256}}, ec, "ECDHE-ECDSA-CHACHA20-POLY1305"},
	} {
		tc.cc.ServerName, tc.cc.RootCAs = "a.com", roots
		r := handshake(t, tab, tc.cc)
		if r.err != nil {
			t.Fatalf("%s: %v", tc.name, r.err)
		}
		if !r.client.PeerCertificates[0].Equal(tc.want.Cert) {
			t.Errorf("%s: served %v", tc.name, r.client.PeerCertificates[0].PublicKeyAlgorithm)
		}
		if v, _ := Var("ssl_cipher", &r.server, nil); tc.cipher != "" && string(v) != tc.cipher {
			t.Errorf("%s: ssl_cipher %s", tc.name, v)
		}
	}
	// TLS 1.3 restricted to RSA-PSS signatures: the RSA certificate.
	r := handshake(t, tab, &tls.Config{ServerName: "a.com", RootCAs: roots, MinVersion: tls.VersionTLS13,
		CurvePreferences: []tls.CurveID{tls.X25519}})
	if r.err != nil || r.client.Version != tls.VersionTLS13 {
		t.Fatalf("TLS 1.3: %v", r.err)
	}
}

// TestProtocols: an object's ssl_protocols override the settings';
// ssl_ciphers read as OpenSSL reads them.
func TestProtocols(t *testing.T) {
	c := server(t, "a.com")
	d := server(t, "b.com")
	tab, errs := Build([]*spec.SSL{
		mustSSL(t, map[string]any{"id": "a", "cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com", "ssl_protocols": []string{"TLSv1.3"}}),
		mustSSL(t, map[string]any{"id": "b", "cert": d.CertPEM, "key": d.KeyPEM, "sni": "b.com"}),
	}, Settings{Protocols: []string{"TLSv1.2"}}, nil)
	if len(errs) > 0 {
		t.Fatal(errs)
	}
	roots := pool(c, d)
	if r := handshake(t, tab, &tls.Config{ServerName: "a.com", RootCAs: roots, MaxVersion: tls.VersionTLS12}); r.err == nil {
		t.Error("a.com (TLSv1.3 only) accepted TLS 1.2")
	}
	if r := handshake(t, tab, &tls.Config{ServerName: "a.com", RootCAs: roots}); r.err != nil || r.client.Version != tls.VersionTLS13 {
		t.Errorf("a.com: %v %x", r.err, r.client.Version)
	} else if v, _ := Var("ssl_protocol", &r.server, nil); string(v) != "TLSv1.3" {
		t.Errorf("ssl_protocol %s", v)
	}
	if r := handshake(t, tab, &tls.Config{ServerName: "b.com", RootCAs: roots}); r.err != nil || r.client.Version != tls.VersionTLS12 {
		t.Errorf("b.com: %v %x (server %v)", r.err, r.client.Version, r.serverErr)
	} else if v, _ := Var("ssl_protocol", &r.server, nil); string(v) != "TLSv1.2" {
		t.Errorf("ssl_protocol %s", v)
	}

	for _, tc := range []struct {
		list string
		want []uint16
		err  bool
	}{
		{"", []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
			tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}, false},
		{"HIGH:!aNULL:ECDHE-RSA-AES128-SHA:ECDHE-RSA-CHACHA20-POLY1305:NOPE", []uint16{tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256}, false},
		{"ECDHE-RSA-AES128-GCM-SHA256 ECDHE-RSA-AES256-GCM-SHA384,!ECDHE-RSA-AES128-GCM-SHA256", []uint16{tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384}, false},
		{"ECDHE-RSA-AES128-SHA:DHE-RSA-AES128-GCM-SHA256", nil, true},
	} {
		got, err := ParseCiphers(tc.list)
		if (err != nil) != tc.err || len(got) != len(tc.want) {
			t.Errorf("ParseCiphers(%q) = %v, %v", tc.list, got, err)
			continue
		}
		for i := range got {
			if got[i] != tc.want[i] {
				t.Errorf("ParseCiphers(%q) = %v", tc.list, got)
			}
		}
	}
	if err := (Settings{Protocols: []string{"TLSv1.1"}}).Check(); err == nil {
		t.Error("TLSv1.1 alone accepted")
	}
	if err := (Settings{Protocols: []string{"SSLv3"}}).Check(); err == nil {
		t.Error("SSLv3 accepted")
	}
	if _, errs := Build(nil, Settings{Ciphers: "RC4-SHA"}, nil); len(errs) != 1 {
		t.Errorf("unusable ciphers: %v", errs)
	}
}

// TestBuildLeavesOut: an object whose key does not decrypt or match is
// left out with an error naming it; the others are served; decrypt
// reads keys that are not PEM.
func TestBuildLeavesOut(t *testing.T) {
	a, b := server(t, "a.com"), server(t, "b.com")
	enc := strings.Repeat("E", 80)
	decrypt := func(field, s string) (string, error) {
		if s == enc {
			return b.KeyPEM, nil
		}
		return "", errors.New("wrong key")
	}
	tab, errs := Build([]*spec.SSL{
		mustSSL(t, map[string]any{"id": "mismatch", "cert": a.CertPEM, "key": b.KeyPEM, "sni": "a.com"}),
		mustSSL(t, map[string]any{"id": "enc", "cert": b.CertPEM, "key": enc, "sni": "b.com"}),
		mustSSL(t, map[string]any{"id": "undecryptable", "cert": a.CertPEM, "key": enc + "x", "sni": "c.com"}),
	}, Settings{}, decrypt)
	if len(errs) != 2 || !strings.Contains(errs[0].Error(), "ssl mismatch left out") ||
		!strings.Contains(errs[1].Error(), "ssl undecryptable left out: key: failed to decrypt previous encrypted key: wrong key") {
		t.Fatalf("errors %v", errs)
	}
	if tab.Match("a.com") != nil || tab.Match("b.com") == nil || tab.Match("c.com") != nil || tab.Len() != 1 {
		t.Fatal("served the wrong objects")
	}
}

// TestTicketsShared: a session made with one Table resumes with another
// built alike with the same ticket keys (another worker), not for another
// name, and not at all with tickets off.
func TestTicketsShared(t *testing.T) {
	c := server(t, "a.com", "b.com")
	ssls := []*spec.SSL{
		mustSSL(t, map[string]any{"id": "a", "cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com"}),
		mustSSL(t, map[string]any{"id": "b", "cert": c.CertPEM, "key": c.KeyPEM, "sni": "b.com"}),
	}
	keys := [][32]byte{{1, 2, 3}}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		t1, _ := Build(ssls, Settings{SessionTickets: true}, nil)
		t2, _ := Build(ssls, Settings{SessionTickets: true}, nil)
		t1.SetTicketKeys(keys)
		t2.SetTicketKeys(keys)
		cache := tls.NewLRUClientSessionCache(8)
		cc := &tls.Config{ServerName: "a.com", RootCAs: pool(c), ClientSessionCache: cache, MaxVersion: v}
		if r := handshake(t, t1, cc); r.err != nil || r.client.DidResume {
			t.Fatalf("%x first: %v", v, r.err)
		}
		r := handshake(t, t2, cc)
		if r.err != nil || !r.client.DidResume {
			t.Fatalf("%x: no resumption with the same keys: %v", v, r.err)
		}
		if s, _ := Var("ssl_session_reused", &r.server, nil); string(s) != "r" {
			t.Errorf("ssl_session_reused %q", s)
		}
		// The session of a.com offered for b.com (the client's cache is
		// by name: copy it over) does not resume.
		if s, ok := cache.Get("a.com"); ok {
			cache.Put("b.com", s)
		}
		cc2 := cc.Clone()
		cc2.ServerName = "b.com"
		if r := handshake(t, t2, cc2); r.err != nil || r.client.DidResume {
			t.Errorf("%x: a.com's session resumed for b.com: %v", v, r.err)
		}
		t3, _ := Build(ssls, Settings{SessionTickets: true}, nil)
		t3.SetTicketKeys([][32]byte{{9}})
		if r := handshake(t, t3, cc); r.err != nil || r.client.DidResume {
			t.Errorf("%x: resumed with other keys: %v", v, r.err)
		}
		off, _ := Build(ssls, Settings{}, nil)
		off.SetTicketKeys(keys)
		if r := handshake(t, off, cc); r.err != nil || r.client.DidResume {
			t.Errorf("%x: resumed with tickets off: %v", v, r.err)
		}
	}
}
