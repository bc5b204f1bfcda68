package worker

import (
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"net/http"
	"os"
	"strings"
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

// TestHTTPSUpstreamClientCertReference: an upstream's tls.client_cert_id
// naming an ssl object of type client whose cert and key are $env://
// references presents the variables' certificate to the node; with a
// variable that is not set, the rest of the configuration is served and
// the upstream's requests fail (502).
func TestHTTPSUpstreamClientCertReference(t *testing.T) {
	ca := newTestCA(t)
	clients := x509.NewCertPool()
	clients.AddCert(ca.cert)
	o := newTLSOrigin(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprint(rw, r.TLS.PeerCertificates[0].Subject.CommonName)
	}), &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients})
	addr := strings.TrimPrefix(o.URL, "https://")
	certPEM, keyPEM := ca.issue(t, "from the environment")
	t.Setenv("COREGATE_TEST_UP_CERT", string(certPEM))
	t.Setenv("COREGATE_TEST_UP_KEY", string(keyPEM))
	t.Setenv("COREGATE_TEST_UP_UNSET", "")
	if err := os.Unsetenv("COREGATE_TEST_UP_UNSET"); err != nil {
		t.Fatal(err)
	}
	s := testSpec(t, nil, httpsRoute(addr, `"tls":{"client_cert_id":"c1"}`))
	sl, err := spec.DecodeSSL([]byte(`{"id":"c1","type":"client","cert":"$env://COREGATE_TEST_UP_CERT","key":"$env://COREGATE_TEST_UP_KEY"}`))
	if err != nil {
		t.Fatal(err)
	}
	s.SSLs = append(s.SSLs, sl)
	w, _ := runWorker(t, Config{}, s)
	if st, body := getHost(t, keepAliveClient(t), w, "a.test", "/"); st != 200 || body != "from the environment" {
		t.Errorf("with references: %d %q, want 200 %q", st, body, "from the environment")
	}
	sl2 := *sl
	sl2.Key = "$env://COREGATE_TEST_UP_UNSET"
	s.SSLs = []*spec.SSL{&sl2}
	if err := w.SetSpec(s, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := getHost(t, keepAliveClient(t), w, "a.test", "/"); st != 502 {
		t.Errorf("with an unset variable: %d, want 502", st)
	}
}
