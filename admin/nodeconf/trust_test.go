package nodeconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestTrustedCAs: "system" alone is the system's store (nil); a PEM file
// gives a pool; a missing file, or one without a certificate, is an error
// that names the setting.
func TestTrustedCAs(t *testing.T) {
	if p, err := TrustedCAs("system"); p != nil || err != nil {
		t.Errorf(`"system": %v, %v; want nil, nil`, p, err)
	}
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty.pem")
	if err := os.WriteFile(empty, []byte("no certificate here\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, list := range []string{filepath.Join(dir, "missing.pem"), "system, " + empty} {
		if _, err := TrustedCAs(list); err == nil || !strings.HasPrefix(err.Error(), "apisix.ssl.ssl_trusted_certificate: ") {
			t.Errorf("%q: error %v, want one naming apisix.ssl.ssl_trusted_certificate", list, err)
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "test CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), IsCA: true, BasicConstraintsValid: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ca := filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(ca, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := TrustedCAs(ca)
	if err != nil || p == nil {
		t.Fatalf("%s: %v, %v", ca, p, err)
	}
	cert, _ := x509.ParseCertificate(der)
	if _, err := cert.Verify(x509.VerifyOptions{Roots: p}); err != nil {
		t.Errorf("the CA of %s is not in the pool: %v", ca, err)
	}
}
