package spec

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"coregate/internal/testcert"
)

func sslJSON(t *testing.T, m map[string]any) []byte {
	t.Helper()
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestDecodeSSL: the schema, then APISIX's check_ssl_conf in its order,
// keys read only by DecodeSSLKeys (through decrypt when not PEM).
func TestDecodeSSL(t *testing.T) {
	c := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	c2 := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}, RSA: true}, nil)
	ca := testcert.New(t, testcert.Options{CA: true}, nil)
	enc := strings.Repeat("E", 80) // what an encrypted key looks like: not PEM
	s, err := DecodeSSL(sslJSON(t, map[string]any{"id": 1, "cert": c.CertPEM, "key": enc, "snis": []string{"a.com", "*.b.com"},
		"certs": []string{c2.CertPEM}, "keys": []string{enc}, "client": map[string]any{"ca": ca.CertPEM, "depth": 2, "skip_mtls_uri_regex": []string{"^/health$"}},
		"ssl_protocols": []string{"TLSv1.3"}, "status": 1, "labels": map[string]string{"k": "v"}}))
	if err != nil {
		t.Fatal(err)
	}
	if s.ID.String() != "1" || s.Key != enc || len(s.Keys) != 1 || s.Client.EffectiveDepth() != 2 || s.Client.SkipMTLSURIRegex[0] != "^/health$" ||
		!s.Served() || s.IsClient() || strings.Join(s.ServerNames(), ",") != "a.com,*.b.com" || s.SSLProtocols[0] != "TLSv1.3" {
		t.Fatalf("decoded %+v", s)
	}
	if err := s.Validate(); err != nil {
		t.Fatalf("Validate of a decoded object: %v", err)
	}
	// The same with its keys read: not PEM and no decrypt, refused;
	// decrypted, accepted; a decryption that fails, APISIX's message.
	raw := sslJSON(t, map[string]any{"cert": c.CertPEM, "key": enc, "sni": "a.com"})
	if _, err := DecodeSSLKeys(raw, nil); err == nil || !strings.HasPrefix(err.Error(), "failed to parse key: ") {
		t.Fatalf("undecrypted key: %v", err)
	}
	var fields []string
	decrypt := func(field, s string) (string, error) {
		fields = append(fields, field)
		if s != enc {
			return "", errors.New("bad")
		}
		return c.KeyPEM, nil
	}
	if _, err := DecodeSSLKeys(raw, decrypt); err != nil || strings.Join(fields, ",") != "key" {
		t.Fatalf("decrypted key: %v (fields %v)", err, fields)
	}
	raw = sslJSON(t, map[string]any{"cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com", "certs": []string{c2.CertPEM}, "keys": []string{enc + "x"}})
	var ve *ValidationError
	if _, err := DecodeSSLKeys(raw, decrypt); !errors.As(err, &ve) || ve.Msg != "failed to handle cert-key pair[1]: failed to decrypt previous encrypted key" || ve.Field != "keys[0]" {
		t.Fatalf("failed decryption: %#v", err)
	}
	if _, err := DecodeSSL(raw); err != nil {
		t.Fatalf("DecodeSSL reads keys: %v", err)
	}

	bad := strings.Replace(c.CertPEM, "MII", "AAA", 1)
	for _, tc := range []struct {
		name  string
		obj   map[string]any
		msg   string
		field string
	}{
		{"no sni", map[string]any{"cert": c.CertPEM, "key": c.KeyPEM}, "invalid configuration: value should match only one schema, but matches none", ""},
		{"bad cert", map[string]any{"cert": bad, "key": c.KeyPEM, "sni": "a.com"}, "failed to parse cert: ", "cert"},
		{"not a cert", map[string]any{"cert": strings.Repeat("c", 130), "key": c.KeyPEM, "sni": "a.com"}, "failed to parse cert: no PEM certificate found", "cert"},
		{"mismatched", map[string]any{"cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com", "certs": []string{c2.CertPEM}},
			"mismatched number of certs and keys", "keys"},
		{"bad pair", map[string]any{"cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com", "certs": []string{bad}, "keys": []string{c2.KeyPEM}},
			"failed to handle cert-key pair[1]: failed to parse cert: ", "certs[0]"},
		{"bad ca", map[string]any{"cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com", "client": map[string]any{"ca": strings.Repeat("c", 130)}},
			"failed to validate client_cert: failed to parse cert: no PEM certificate found", "client.ca"},
		{"bad protocol", map[string]any{"cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com", "ssl_protocols": []string{"SSLv3"}},
			`invalid configuration: property "ssl_protocols" validation failed: failed to validate item 1: matches none of the enum values`, "ssl_protocols[0]"},
	} {
		_, err := DecodeSSL(sslJSON(t, tc.obj))
		if !errors.As(err, &ve) || !strings.HasPrefix(ve.Msg, tc.msg) || ve.Field != tc.field || !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %#v, want %q at %q", tc.name, err, tc.msg, tc.field)
		}
	}
	// A client certificate needs no name and is never served; certs
	// and keys are not looked at (APISIX's order).
	s, err = DecodeSSL(sslJSON(t, map[string]any{"type": "client", "cert": c.CertPEM, "key": c.KeyPEM, "certs": []string{c2.CertPEM}}))
	if err != nil || !s.IsClient() || s.Served() {
		t.Fatalf("client ssl: %v %+v", err, s)
	}
	s, err = DecodeSSL(sslJSON(t, map[string]any{"cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com", "status": 0}))
	if err != nil || s.Served() || strings.Join(s.ServerNames(), ",") != "a.com" {
		t.Fatalf("disabled ssl: %v %+v", err, s)
	}
}

// TestSpecSSLs: ssls travel in the Spec's JSON form, count in its hash,
// and their ids are unique.
func TestSpecSSLs(t *testing.T) {
	c := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	s1, err := DecodeSSL(sslJSON(t, map[string]any{"id": "s1", "cert": c.CertPEM, "key": c.KeyPEM, "sni": "a.com"}))
	if err != nil {
		t.Fatal(err)
	}
	sp := &Spec{SSLs: []*SSL{s1}}
	if err := sp.Check(); err != nil {
		t.Fatal(err)
	}
	h := sp.SetHash()
	if h == (&Spec{}).SetHash() {
		t.Fatal("ssls are not part of the hash")
	}
	b, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.SSLs) != 1 || back.SSLs[0].Key != c.KeyPEM || back.SSLs[0].ID.String() != "s1" || back.Hash != h || back.SetHash() != h {
		t.Fatalf("round trip: %s", b)
	}
	sp.SSLs = append(sp.SSLs, s1)
	var re *ReferenceError
	if err := sp.Check(); !errors.As(err, &re) || re.Kind != "ssl" || re.Msg != "duplicate id" {
		t.Fatalf("duplicate ssl id: %v", err)
	}
}

// TestDecodeSSLReferences: a cert, key, certs, keys or client.ca that is a
// $secret:// or $env:// reference passes the schema whatever its length
// and is not parsed, nor is the other half of its pair, as APISIX's
// check_ssl_conf; a short string that is not one is still refused.
func TestDecodeSSLReferences(t *testing.T) {
	c := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	obj := map[string]any{"sni": "a.com", "cert": c.CertPEM, "key": "$env://TEST_KEY",
		"certs": []string{"$secret://vault/test/ssl/a.crt"}, "keys": []string{"$secret://vault/test/ssl/a.key"},
		"client": map[string]any{"ca": "$ENV://TEST_CA"}}
	for _, dec := range []func([]byte) (*SSL, error){DecodeSSL, func(b []byte) (*SSL, error) { return DecodeSSLKeys(b, nil) }} {
		s, err := dec(sslJSON(t, obj))
		if err != nil {
			t.Fatalf("references: %v", err)
		}
		if s.Key != "$env://TEST_KEY" || s.Keys[0] != "$secret://vault/test/ssl/a.key" || s.Client.CA != "$ENV://TEST_CA" {
			t.Fatalf("decoded %+v", s)
		}
	}
	for _, v := range []string{"$envy://X", "$Secret://vault/a/b", "env://X"} {
		var ve *ValidationError
		_, err := DecodeSSL(sslJSON(t, map[string]any{"sni": "a.com", "cert": c.CertPEM, "key": v}))
		if !errors.As(err, &ve) || ve.Field != "key" || !strings.Contains(ve.Msg, `property "key" validation failed: string too short, expected at least 64`) {
			t.Errorf("key %q: %#v", v, err)
		}
	}
	if !IsReference("$Env://X") || IsReference("$secretx") || IsReference("$SECRET://a/b/c") {
		t.Error("IsReference")
	}
}
