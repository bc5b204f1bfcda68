package adminapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"coregate/admin/keyring"
	"coregate/admin/secret"
	"coregate/plugins"
)

// TestSSLReferences: an ssl object's cert and key may be $env:// and
// $secret:// references (APISIX's t/node/ssl.t): read when the object is
// checked, stored and shown as written (the key neither encrypted nor
// shown); one that does not resolve, or whose value does not parse, is
// refused naming the member and the reference, never a value, and
// nothing is stored.
func TestSSLReferences(t *testing.T) {
	cert, key := testCert(t)
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/secret/data/ssl/test" || r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		b, _ := json.Marshal(map[string]any{"data": map[string]any{"data": map[string]string{"key": key, "bad": "-----BEGIN PRIVATE KEY-----\n" + strings.Repeat("k", 80) + "\n-----END PRIVATE KEY-----\n",
			"enc": strings.Repeat("k", 80)}, "metadata": map[string]int{"version": 1}}})
		_, _ = w.Write(b)
	}))
	t.Cleanup(vault.Close)
	t.Setenv("COREGATE_TEST_SSL_CERT", cert)
	t.Setenv("COREGATE_TEST_SSL_BADCERT", "not-a-certificate-value")
	t.Setenv("COREGATE_TEST_SSL_UNSET", "")
	if err := os.Unsetenv("COREGATE_TEST_SSL_UNSET"); err != nil {
		t.Fatal(err)
	}
	k := mustKeyring(t, keyring.Default...)
	reg := plugins.NewRegistry(nil)
	reg.SetSecrets(secret.NewResolver(k))
	st := newStore(t)
	h, err := New(Options{Store: st, Admin: testAdmin(), Plugins: reg, Keyring: k, FieldsKeyring: k})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, h, st)
	obj := func(cert, key string) string {
		return string(encodeJSON(map[string]any{"cert": cert, "key": key, "snis": []string{"test.com"}}))
	}

	const keyRef = "$secret://vault/v1/ssl/test/key"
	r := c.do("PUT", "/apisix/admin/ssls/1", obj("$env://COREGATE_TEST_SSL_CERT", keyRef))
	c.want(r, 400, "")
	if m := r.json(t); m["field"] != "key" || !strings.Contains(m["error_msg"].(string), "cannot resolve "+keyRef+": no secret conf") {
		t.Fatalf("before the secret: %s", r.body)
	}
	c.want(c.do("PUT", "/apisix/admin/secrets/vault/v1", `{"uri":"`+vault.URL+`","prefix":"secret/data","token":"root"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/ssls/1", obj("$env://COREGATE_TEST_SSL_CERT", keyRef)), 201, "")
	if s := c.stored("/ssls/1"); s["key"] != keyRef || s["cert"] != "$env://COREGATE_TEST_SSL_CERT" {
		t.Fatalf("stored %v", s)
	}
	for _, p := range []string{"/apisix/admin/ssls/1", "/apisix/admin/ssls"} {
		r = c.do("GET", p, "")
		c.want(r, 200, "")
		if !strings.Contains(string(r.body), `$env://COREGATE_TEST_SSL_CERT`) || strings.Contains(string(r.body), "BEGIN") ||
			strings.Contains(string(r.body), keyRef) {
			t.Fatalf("GET %s: %s", p, r.body)
		}
	}
	// A reference in certs/keys, and with a PEM cert.
	c.want(c.do("PUT", "/apisix/admin/ssls/2", string(encodeJSON(map[string]any{"cert": cert, "key": key, "snis": []string{"test.com"},
		"certs": []string{"$ENV://COREGATE_TEST_SSL_CERT"}, "keys": []string{keyRef}}))), 201, "")

	for _, tc := range []struct {
		name, cert, key, field, msg string
	}{
		{"unset", "$env://COREGATE_TEST_SSL_UNSET", keyRef, "cert", "failed to resolve cert: cannot resolve $env://COREGATE_TEST_SSL_UNSET: environment variable COREGATE_TEST_SSL_UNSET is not set"},
		{"no such key", cert, "$secret://vault/v1/ssl/none/key", "key", "failed to resolve key: cannot resolve $secret://vault/v1/ssl/none/key: "},
		{"bad cert", "$env://COREGATE_TEST_SSL_BADCERT", keyRef, "cert", "invalid configuration: "},
		{"bad key", cert, "$secret://vault/v1/ssl/test/bad", "key", "failed to parse key: "},
		// Not PEM: decrypted, as APISIX reads a key after its reference.
		{"not PEM", cert, "$secret://vault/v1/ssl/test/enc", "key", "failed to decrypt previous encrypted key"},
	} {
		r := c.do("PUT", "/apisix/admin/ssls/3", obj(tc.cert, tc.key))
		c.want(r, 400, "")
		m := r.json(t)
		if m["field"] != tc.field || !strings.HasPrefix(m["error_msg"].(string), tc.msg) ||
			strings.Contains(string(r.body), "not-a-certificate-value") || strings.Contains(string(r.body), "kkkk") {
			t.Errorf("%s: %s", tc.name, r.body)
		}
	}
	if c.stored("/ssls/3") != nil {
		t.Fatal("invalid ssl stored")
	}
}
