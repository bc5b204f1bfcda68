package worker

import (
	"crypto/tls"
	"crypto/x509/pkix"
	"fmt"
	"os"
	"testing"

	"coregate/admin/spec"
	"coregate/internal/testcert"
)

// TestTLSReferences: an ssl object whose cert and key are $env://
// references is served with the variables' values, the Spec keeping what
// was written; one whose key's variable is not set is left out, the rest
// served.
func TestTLSReferences(t *testing.T) {
	ca := testcert.New(t, testcert.Options{CA: true, Subject: pkix.Name{CommonName: "test CA"}}, nil)
	leaf := testcert.New(t, testcert.Options{DNSNames: []string{"ref.local"}}, ca)
	other := testcert.New(t, testcert.Options{DNSNames: []string{"unset.local"}}, ca)
	t.Setenv("COREGATE_TEST_SSL_CERT", leaf.ChainPEM)
	t.Setenv("COREGATE_TEST_SSL_KEY", leaf.KeyPEM)
	t.Setenv("COREGATE_TEST_SSL_UNSET", "")
	if err := os.Unsetenv("COREGATE_TEST_SSL_UNSET"); err != nil {
		t.Fatal(err)
	}
	s := testSpec(t, nil)
	for _, obj := range []string{
		`{"id":"r1","cert":"$env://COREGATE_TEST_SSL_CERT","key":"$ENV://COREGATE_TEST_SSL_KEY","snis":["ref.local"]}`,
		fmt.Sprintf(`{"id":"r2","cert":%q,"key":"$env://COREGATE_TEST_SSL_UNSET","snis":["unset.local"]}`, other.ChainPEM),
	} {
		x, err := spec.DecodeSSL([]byte(obj))
		if err != nil {
			t.Fatal(err)
		}
		s.SSLs = append(s.SSLs, x)
	}
	w, _ := runWorker(t, Config{TLSListen: []string{unusedAddr(t)}}, s)
	if w.TLSAddr() == nil {
		t.Fatal("no TLS address")
	}
	ccfg := &tls.Config{RootCAs: ca.Pool(), ServerName: "ref.local"}
	c, err := tls.Dial("tcp", w.TLSAddr().String(), ccfg)
	if err != nil {
		t.Fatalf("ref.local: %v", err)
	}
	if got := c.ConnectionState().PeerCertificates[0].DNSNames; len(got) != 1 || got[0] != "ref.local" {
		t.Fatalf("served %v", got)
	}
	c.Close()
	ccfg.ServerName = "unset.local"
	if c, err := tls.Dial("tcp", w.TLSAddr().String(), ccfg); err == nil {
		c.Close()
		t.Fatal("unset.local served without its key")
	}
	if s.SSLs[0].Key != "$ENV://COREGATE_TEST_SSL_KEY" || s.SSLs[0].Cert != "$env://COREGATE_TEST_SSL_CERT" {
		t.Fatalf("the Spec's object changed: %q", s.SSLs[0].Key)
	}
}
