package adminapi

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"coregate/admin/keyring"
	"coregate/admin/secret"
	"coregate/plugins"
	"coregate/plugins/keyauth"
)

// The vault object of APISIX's t/admin/secrets.t.
const vaultSecret = `{"uri":"http://127.0.0.1:12800/get","prefix":"apisix","token":"apisix"}`

// TestSecrets: /apisix/admin/secrets/{manager}/{id} as APISIX's
// (t/admin/secrets.t): PUT, GET, the list of all managers' secrets and of
// one's, PATCH of the object and of a sub-path, DELETE, no POST; each
// manager's schema with APISIX's messages, nothing invalid stored.
func TestSecrets(t *testing.T) {
	c := newTestServer(t)
	wantValue(t, c, c.do("PUT", "/apisix/admin/secrets/vault/test1", vaultSecret), 201,
		"/secrets/vault/test1", `{"id":"vault/test1",`+vaultSecret[1:])
	wantValue(t, c, c.do("PUT", "/apisix/admin/secrets/vault/test1", vaultSecret), 200,
		"/secrets/vault/test1", `{"id":"vault/test1",`+vaultSecret[1:])
	r := c.do("GET", "/apisix/admin/secrets/vault/test1", "")
	c.want(r, 200, "")
	if v := r.json(t)["value"].(map[string]any); v["id"] != "vault/test1" || v["token"] != "apisix" {
		t.Fatalf("GET: %s", r.body)
	}
	aws := `{"access_key_id":"AK","secret_access_key":"SK","region":"eu-west-1"}`
	wantValue(t, c, c.do("PUT", "/apisix/admin/secrets/aws/a1", aws), 201, "/secrets/aws/a1", `{"id":"aws/a1",`+aws[1:])
	gcp := `{"auth_config":{"client_email":"e@p.iam.gserviceaccount.com","private_key":"PK","project_id":"p"}}`
	wantValue(t, c, c.do("PUT", "/apisix/admin/secrets/gcp/g1", gcp), 201, "/secrets/gcp/g1", `{"id":"gcp/g1",`+gcp[1:])
	// A consumer's credentials under consumers/ are not secrets, nor is
	// anything deeper than <manager>/<id>.
	c.want(c.do("PUT", "/apisix/admin/consumers", `{"username":"jack"}`), 201, "")
	for path, n := range map[string]int{"/apisix/admin/secrets": 3, "/apisix/admin/secrets/vault": 1, "/apisix/admin/secrets/aws/": 1} {
		r = c.do("GET", path, "")
		m := r.json(t)
		if r.status != 200 || len(m["list"].([]any)) != n || m["total"] != json.Number(strconv.Itoa(n)) {
			t.Fatalf("list %s: %d %s", path, r.status, r.body)
		}
	}
	if r = c.do("GET", "/apisix/admin/secrets", ""); !strings.Contains(string(r.body), `"key":"`+c.st.Prefix()+`/secrets/vault/test1"`) {
		t.Fatalf("list: %s", r.body)
	}

	// PATCH on a sub-path, then of the object (t/admin/secrets.t TEST 4, 5).
	r = c.do("PATCH", "/apisix/admin/secrets/vault/test1/token", `"unknown"`)
	c.want(r, 200, "")
	if s := c.stored("/secrets/vault/test1"); s["token"] != "unknown" || s["id"] != "vault/test1" || s["uri"] != "http://127.0.0.1:12800/get" {
		t.Fatalf("PATCH token stored %v", s)
	}
	c.want(c.do("PATCH", "/apisix/admin/secrets/vault/test1", `{"token":"apisix","namespace":"ns"}`), 200, "")
	if s := c.stored("/secrets/vault/test1"); s["token"] != "apisix" || s["namespace"] != "ns" {
		t.Fatalf("PATCH stored %v", s)
	}
	c.want(c.do("PATCH", "/apisix/admin/secrets/vault/test1", `{"uri":"/get"}`), 400, "")
	c.want(c.do("PATCH", "/apisix/admin/secrets/vault", `{}`), 400, `{"error_msg":"no secret id"}`)
	c.want(c.do("PUT", "/apisix/admin/secrets/vault", vaultSecret), 400, `{"error_msg":"no secret id"}`)
	c.want(c.do("POST", "/apisix/admin/secrets/vault", vaultSecret), 405,
		"{\"error_msg\":\"not supported `POST` method for secret\"}")

	// Refusals, with APISIX's messages; nothing stored.
	r = c.do("PUT", "/apisix/admin/secrets/vault/test2", `{"uri":"/get","prefix":"apisix","token":"apisix"}`)
	c.want(r, 400, "")
	if m := r.json(t); m["field"] != "uri" || m["error_msg"] != `invalid configuration: property "uri" validation failed: `+
		`failed to match pattern "^[^\\/]+:\\/\\/([\\da-zA-Z.-]+|\\[[\\da-fA-F:]+\\])(:\\d+)?" with "/get"` {
		t.Fatalf("uri refused with %s", r.body)
	}
	c.want(c.do("PUT", "/apisix/admin/secrets/vault/test2", `{"uri":"http://127.0.0.1:8200","prefix":"apisix"}`), 400,
		`{"error_msg":"invalid configuration: property \"token\" is required"}`)
	c.want(c.do("PUT", "/apisix/admin/secrets/aws/test2", `{"access_key_id":"AK"}`), 400,
		`{"error_msg":"invalid configuration: property \"secret_access_key\" is required"}`)
	c.want(c.do("PUT", "/apisix/admin/secrets/gcp/test2", `{"ssl_verify":true}`), 400, "")
	c.want(c.do("PUT", "/apisix/admin/secrets/azure/test2", vaultSecret), 400, `{"error_msg":"invalid secret manager: azure"}`)
	c.want(c.do("GET", "/apisix/admin/secrets/..%2Fconsumers/jack", ""), 400, `{"error_msg":"invalid secret manager: ../consumers"}`)
	c.want(c.do("PUT", "/apisix/admin/secrets/vault/test2", `{"id":"test2",`+vaultSecret[1:]), 400, `{"error_msg":"wrong secret id","field":"id"}`)
	c.want(c.do("PUT", "/apisix/admin/secrets/vault/test2", `[1]`), 400, "")
	for _, k := range []string{"/secrets/vault/test2", "/secrets/aws/test2", "/secrets/gcp/test2", "/secrets/azure/test2"} {
		if c.stored(k) != nil {
			t.Fatalf("%s stored", k)
		}
	}
	// The id in the body, written as APISIX stores it, is taken.
	c.want(c.do("PUT", "/apisix/admin/secrets/vault/test3", `{"id":"vault/test3",`+vaultSecret[1:]), 201, "")

	c.want(c.do("DELETE", "/apisix/admin/secrets/vault/test1", ""), 200, "")
	c.want(c.do("GET", "/apisix/admin/secrets/vault/test1", ""), 404, "")
	c.want(c.do("DELETE", "/apisix/admin/secrets/vault", ""), 400, `{"error_msg":"missing secret id"}`)
}

// TestSecretsEncrypted: with the fields' keyring, a secret's credentials
// are stored encrypted, once (PATCH too), and shown decrypted; other
// members stay in clear.
func TestSecretsEncrypted(t *testing.T) {
	k := mustKeyring(t, keyring.Default...)
	c := newEncServer(t, k, k)
	r := c.do("PUT", "/apisix/admin/secrets/vault/v", vaultSecret)
	c.want(r, 201, "")
	if s := c.stored("/secrets/vault/v"); s["token"] != k.Encrypt("apisix") || s["prefix"] != "apisix" {
		t.Fatalf("stored %v", s)
	}
	if strings.Contains(string(r.body), `"token":"apisix"`) {
		t.Fatalf("the PUT answer shows the token in clear: %s", r.body)
	}
	c.want(c.do("PATCH", "/apisix/admin/secrets/vault/v", `{"namespace":"n"}`), 200, "")
	if s := c.stored("/secrets/vault/v"); s["token"] != k.Encrypt("apisix") {
		t.Fatalf("after PATCH, token stored as %v", s["token"])
	}
	c.want(c.do("PATCH", "/apisix/admin/secrets/vault/v/token", `"t2"`), 200, "")
	if s := c.stored("/secrets/vault/v"); s["token"] != k.Encrypt("t2") {
		t.Fatalf("after PATCH of token, stored as %v", s["token"])
	}
	for _, p := range []string{"/apisix/admin/secrets/vault/v", "/apisix/admin/secrets"} {
		if r = c.do("GET", p, ""); !strings.Contains(string(r.body), `"token":"t2"`) {
			t.Fatalf("GET %s: %s", p, r.body)
		}
	}
	c.want(c.do("PUT", "/apisix/admin/secrets/aws/a", `{"access_key_id":"AK","secret_access_key":"SK","session_token":"ST"}`), 201, "")
	if s := c.stored("/secrets/aws/a"); s["access_key_id"] != "AK" || s["secret_access_key"] != k.Encrypt("SK") || s["session_token"] != k.Encrypt("ST") {
		t.Fatalf("aws stored %v", s)
	}
	c.want(c.do("PUT", "/apisix/admin/secrets/gcp/g", `{"auth_config":{"client_email":"e","private_key":"PK","project_id":"p"}}`), 201, "")
	if s := c.stored("/secrets/gcp/g"); s["auth_config"].(map[string]any)["private_key"] != k.Encrypt("PK") {
		t.Fatalf("gcp stored %v", s)
	}
	if r = c.do("GET", "/apisix/admin/secrets/gcp/g", ""); !strings.Contains(string(r.body), `"private_key":"PK"`) {
		t.Fatalf("GET gcp: %s", r.body)
	}
}

// TestSecretReferences: a plugin configuration's $secret:// reference is
// checked with the value it names, read with the secret object just
// stored (encrypted) from a real HTTP server on loopback answering as
// Vault's KV engine; what is stored and shown is the reference; one that
// does not resolve is refused with a message naming it, nothing stored.
func TestSecretReferences(t *testing.T) {
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/secret/data/apisix/jack" || r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"data":{"data":{"auth-key":"jack-s3cret"},"metadata":{"version":1}}}`))
	}))
	t.Cleanup(vault.Close)
	k := mustKeyring(t, keyring.Default...)
	reg := plugins.NewRegistry([]plugins.Entry{{Name: "key-auth", Priority: 2500}})
	reg.Register("key-auth", keyauth.Plugin{})
	reg.SetSecrets(secret.NewResolver(k))
	st := newStore(t)
	h, err := New(Options{Store: st, Admin: testAdmin(), Plugins: reg, FieldsKeyring: k})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, h, st)

	consumer := `{"username":"jack","plugins":{"key-auth":{"key":"$secret://vault/v1/jack/auth-key"}}}`
	r := c.do("PUT", "/apisix/admin/consumers", consumer)
	c.want(r, 400, "")
	if m := r.json(t); m["field"] != "plugins.key-auth.key" ||
		!strings.Contains(m["error_msg"].(string), "cannot resolve $secret://vault/v1/jack/auth-key: no secret conf") {
		t.Fatalf("before the secret: %s", r.body)
	}
	c.want(c.do("PUT", "/apisix/admin/secrets/vault/v1", `{"uri":"`+vault.URL+`","prefix":"secret/data/apisix","token":"root"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/consumers", consumer), 201, "")
	for _, p := range []string{"/apisix/admin/consumers/jack", "/apisix/admin/consumers"} {
		r = c.do("GET", p, "")
		if !strings.Contains(string(r.body), `$secret://vault/v1/jack/auth-key`) || strings.Contains(string(r.body), "jack-s3cret") {
			t.Fatalf("GET %s: %s", p, r.body)
		}
	}
	r = c.do("PUT", "/apisix/admin/consumers", `{"username":"ann","plugins":{"key-auth":{"key":"$secret://vault/v1/ann/auth-key"}}}`)
	c.want(r, 400, "")
	if m := r.json(t); !strings.Contains(m["error_msg"].(string), "cannot resolve $secret://vault/v1/ann/auth-key: failed to retrieve data from vault kv engine: status 404") {
		t.Fatalf("ann: %s", r.body)
	}
	if c.stored("/consumers/ann") != nil {
		t.Fatal("ann stored")
	}
}
