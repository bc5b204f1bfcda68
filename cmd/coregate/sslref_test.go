package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/internal/e2e"
)

// TestTLSSSLReferences: through the real binary, an ssl object whose cert
// and key are $env:// references is served with the values of the
// process's environment variables, and one whose key is a $secret://
// reference with the key Vault's KV engine (a loopback server answering
// as Vault documents its KV v2 read) holds, as APISIX's t/node/ssl.t;
// the Admin API stores and shows what was written.
func TestTLSSSLReferences(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	envCert := p.server(t, "from-env", false, "env.example.com")
	vaultCert := p.server(t, "from-vault", true, "vault.example.com")
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/secret/data/ssl/vault" || r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		b, _ := json.Marshal(map[string]any{"data": map[string]any{"data": map[string]string{"key": vaultCert.KeyPEM}, "metadata": map[string]int{"version": 1}}})
		_, _ = w.Write(b)
	}))
	t.Cleanup(vault.Close)
	up := textUpstream(t, "referenced")
	adminPort := freePort(t)
	g := bindSupervisor(e2e.Start(t, e2e.Options{Bin: binPath, Config: etcdConfig(adminPort, adminapi.LegacyAdminKey),
		Env:   []string{"GORACE=atexit_sleep_ms=0", "COREGATE_TEST_SSL_CERT=" + envCert.ChainPEM, "COREGATE_TEST_SSL_KEY=" + envCert.KeyPEM},
		Ready: 1}))
	admin := legacyAdmin(adminPort)
	c := newClient(t)
	send := func(method, path, body string, want int) string {
		t.Helper()
		r := admin.do(t, c, method, path, body)
		if r.status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
		}
		return r.body
	}
	send("PUT", "routes/1", fmt.Sprintf(`{"uri":"/*","upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	send("PUT", "ssls/env", sslJSON(t, obj{"snis": []string{"env.example.com"},
		"cert": "$env://COREGATE_TEST_SSL_CERT", "key": "$env://COREGATE_TEST_SSL_KEY"}), 201)
	send("PUT", "secrets/vault/v1", `{"uri":"`+vault.URL+`","prefix":"secret/data","token":"root"}`, 201)
	send("PUT", "ssls/vault", sslJSON(t, obj{"snis": []string{"vault.example.com"},
		"cert": vaultCert.ChainPEM, "key": "$secret://vault/v1/ssl/vault/key"}), 201)
	// A reference that does not resolve is refused, nothing stored.
	r := admin.do(t, c, "PUT", "ssls/unset", sslJSON(t, obj{"snis": []string{"unset.example.com"},
		"cert": "$env://COREGATE_TEST_SSL_CERT", "key": "$env://COREGATE_TEST_SSL_UNSET"}))
	if r.status != 400 || !strings.Contains(r.body, "environment variable COREGATE_TEST_SSL_UNSET is not set") || !strings.Contains(r.body, `"field":"key"`) {
		t.Fatalf("unresolved reference: %d %s", r.status, r.body)
	}

	addr := g.TLSAddr()
	for name, cn := range map[string]string{"env.example.com": "from-env", "vault.example.com": "from-vault"} {
		eventually(t, 10*time.Second, func() error {
			got, err := servedCN(t, addr, p.config(name))
			if err != nil {
				return err
			}
			if got != cn {
				return fmt.Errorf("%s served %q, want %q", name, got, cn)
			}
			return nil
		})
		res, _, err := tlsGet(t, addr, p.config(name), name, "/x")
		if err != nil || res.status != 200 || res.body != "referenced" {
			t.Fatalf("GET over %s: %v %d %q", name, err, res.status, res.body)
		}
	}
	b := send("GET", "ssls/env", "", 200)
	if !strings.Contains(b, "$env://COREGATE_TEST_SSL_CERT") || strings.Contains(b, "BEGIN") {
		t.Fatalf("GET ssls/env: %s", b)
	}
	send("GET", "ssls/unset", "", 404)
}

// TestTLSSSLReferencesStandalone: through the real binary in standalone
// mode, apisix.yaml's ssl object whose certs and keys are $env://
// references is served with the variables' values; one whose key's
// variable is not set is left out, the rest served.
func TestTLSSSLReferencesStandalone(t *testing.T) {
	t.Parallel()
	p := newPKI(t)
	rsa := p.server(t, "env-rsa", true, "yaml.example.com")
	ec := p.server(t, "env-ecdsa", false, "yaml.example.com")
	other := p.server(t, "unset", false, "unset.example.com")
	up := textUpstream(t, "from yaml")
	yaml := standaloneYAML(map[string][]obj{
		"routes": {{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}},
		"ssls": {
			{"id": "env", "snis": []string{"yaml.example.com"}, "cert": rsa.CertPEM, "key": rsa.KeyPEM,
				"certs": []string{"$env://COREGATE_TEST_SSL_EC_CERT"}, "keys": []string{"$ENV://COREGATE_TEST_SSL_EC_KEY"}},
			{"id": "unset", "snis": []string{"unset.example.com"}, "cert": other.CertPEM, "key": "$env://COREGATE_TEST_SSL_UNSET"},
		},
	})
	g := bindSupervisor(e2e.Start(t, e2e.Options{Bin: binPath, Config: tlsConfig(1, "", ""), APISIX: yaml,
		Env:   []string{"GORACE=atexit_sleep_ms=0", "COREGATE_TEST_SSL_EC_CERT=" + ec.CertPEM, "COREGATE_TEST_SSL_EC_KEY=" + ec.KeyPEM},
		Ready: 1}))
	addr := g.TLSAddr()
	eventually(t, 10*time.Second, func() error {
		cn, err := servedCN(t, addr, p.config("yaml.example.com"))
		if err != nil {
			return err
		}
		if cn != "env-ecdsa" { // crypto/tls offers ECDSA first
			return fmt.Errorf("served %q", cn)
		}
		return nil
	})
	res, _, err := tlsGet(t, addr, p.config("yaml.example.com"), "yaml.example.com", "/x")
	if err != nil || res.status != 200 || res.body != "from yaml" {
		t.Fatalf("GET: %v %d %q", err, res.status, res.body)
	}
	if cn, err := servedCN(t, addr, p.config("unset.example.com")); err == nil {
		t.Fatalf("unset.example.com served %q without its key", cn)
	}
}
