package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/internal/e2e"
)

// TestSecretReferenceKeyAuth: through the real binary, a consumer's
// key-auth key written as a $secret:// reference authenticates with the
// value Vault's KV engine holds (a real HTTP server on loopback answering
// as Vault documents its KV v2 read), never with the reference itself; a
// change of the secret object alone (its prefix) is read again by the
// workers; the Admin API shows the reference.
func TestSecretReferenceKeyAuth(t *testing.T) {
	t.Parallel()
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusForbidden)
			return
		}
		switch r.URL.Path {
		case "/v1/secret/data/one/jack":
			_, _ = w.Write([]byte(`{"data":{"data":{"auth-key":"jack-one"},"metadata":{"version":1}}}`))
		case "/v1/secret/data/two/jack":
			_, _ = w.Write([]byte(`{"data":{"data":{"auth-key":"jack-two"},"metadata":{"version":1}}}`))
		default:
			w.WriteHeader(http.StatusNotFound)
		}
	}))
	t.Cleanup(vault.Close)
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	send := func(method, path, body string, want int) string {
		t.Helper()
		r := admin.do(t, c, method, path, body)
		if r.status != want {
			t.Fatalf("%s %s: %d %s, want %d", method, path, r.status, r.body, want)
		}
		return r.body
	}
	get := func(key string) int {
		t.Helper()
		return do(t, c, "GET", g.url("/sec"), "", map[string]string{"apikey": key}, nil).status
	}
	const ref = "$secret://vault/v1/jack/auth-key"
	send("PUT", "secrets/vault/v1", `{"uri":"`+vault.URL+`","prefix":"secret/data/one","token":"root"}`, 201)
	send("PUT", "consumers", `{"username":"jack","plugins":{"key-auth":{"key":"`+ref+`"}}}`, 201)
	send("PUT", "routes/1", fmt.Sprintf(`{"uri":"/sec","plugins":{"key-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	eventually(t, 10*time.Second, func() error {
		if s := get("jack-one"); s != 200 {
			return fmt.Errorf("jack-one: %d", s)
		}
		return nil
	})
	if s := get(ref); s != 401 {
		t.Fatalf("the reference itself: %d", s)
	}
	if b := send("GET", "consumers/jack", "", 200); !strings.Contains(b, ref) || strings.Contains(b, "jack-one") {
		t.Fatalf("GET consumer: %s", b)
	}

	// The secret object changes, the consumer does not.
	send("PATCH", "secrets/vault/v1", `{"prefix":"secret/data/two"}`, 200)
	eventually(t, 10*time.Second, func() error {
		if s := get("jack-two"); s != 200 {
			return fmt.Errorf("jack-two: %d", s)
		}
		return nil
	})
	if s := get("jack-one"); s != 401 {
		t.Fatalf("the old value after the change: %d", s)
	}
}

// TestSecretReferenceStandalone: through the real binary in standalone
// mode, apisix.yaml's secrets are read and a consumer's $secret:// key,
// listed before them, authenticates with the value Vault's KV engine (a
// loopback server answering as Vault documents it) holds.
func TestSecretReferenceStandalone(t *testing.T) {
	t.Parallel()
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/kv/apisix/jack" || r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"data":{"auth-key":"jack-yaml"}}`)) // a KV v1 engine
	}))
	t.Cleanup(vault.Close)
	up := headEchoUpstream(t)
	g := startGateway(t, fmt.Sprintf(`routes:
  - id: 1
    uri: /sec
    plugins:
      key-auth: {}
    upstream:
      nodes:
        "%s": 1
consumers:
  - username: jack
    plugins:
      key-auth:
        key: $secret://vault/v1/jack/auth-key
secrets:
  - id: vault/v1
    uri: %s
    prefix: kv/apisix
    token: root
#END
`, up.Addr(), vault.URL), "")
	c := newClient(t)
	get := func(key string) int {
		t.Helper()
		return do(t, c, "GET", g.url("/sec"), "", map[string]string{"apikey": key}, nil).status
	}
	eventually(t, 10*time.Second, func() error {
		if s := get("jack-yaml"); s != 200 {
			return fmt.Errorf("jack-yaml: %d", s)
		}
		return nil
	})
	if s := get("$secret://vault/v1/jack/auth-key"); s != 401 {
		t.Fatalf("the reference itself: %d", s)
	}
}

// TestSecretReferenceConfigTest: coregate -t reads a data plane's
// $secret:// references as the start would: a file whose reference
// resolves is ok, one naming a secret it lacks is refused, naming it.
func TestSecretReferenceConfigTest(t *testing.T) {
	t.Parallel()
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/kv/apisix/jack" || r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"data":{"auth-key":"jack-t"}}`))
	}))
	t.Cleanup(vault.Close)
	dir := t.TempDir()
	writeFile(t, filepath.Join(dir, "config.yaml"), perCoreConfig(freePort(t), 1))
	file := func(id string) string {
		return `consumers:
  - username: jack
    plugins:
      key-auth:
        key: $secret://vault/` + id + `/jack/auth-key
secrets:
  - id: vault/v1
    uri: ` + vault.URL + `
    prefix: kv/apisix
    token: root
#END
`
	}
	run := func() (string, error) {
		return e2e.Run(binPath, 20*time.Second, "-t", "-c", filepath.Join(dir, "config.yaml"))
	}
	writeFile(t, filepath.Join(dir, "apisix.yaml"), file("v1"))
	if out, err := run(); err != nil || !strings.Contains(out, "apisix.yaml is ok") {
		t.Fatalf("-t of a file whose reference resolves: %v\n%s", err, out)
	}
	writeFile(t, filepath.Join(dir, "apisix.yaml"), file("v2"))
	if out, err := run(); err == nil || !strings.Contains(out, "cannot resolve $secret://vault/v2/jack/auth-key") || strings.Contains(out, "jack-t") {
		t.Fatalf("-t of a file whose reference does not resolve: %v\n%s", err, out)
	}
}
