package standalone

import (
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"coregate/admin/secret"
	"coregate/admin/store/storesync"
	"coregate/plugins"
	"coregate/plugins/keyauth"
)

// TestSecrets: apisix.yaml's secrets are read with their id
// "<manager>/<id>" and checked against their manager's schema; a
// consumer's $secret:// reference, listed before them, is read with them
// from a real HTTP server on loopback answering as Vault's KV engine,
// through the file's store and its sync as through CheckFile.
func TestSecrets(t *testing.T) {
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/secret/data/apisix/jack" || r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"data":{"data":{"auth-key":"jack-key"},"metadata":{"version":1}}}`))
	}))
	t.Cleanup(vault.Close)
	body := `consumers:
  - username: jack
    plugins:
      key-auth:
        key: $secret://vault/v1/jack/auth-key
secrets:
  - id: vault/v1
    uri: ` + vault.URL + `
    prefix: secret/data/apisix
    token: root
#END
`
	s, err := Parse([]byte(body), "conf/apisix.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Secrets) != 1 || !strings.Contains(string(s.Secrets[0]), `"id":"vault/v1"`) {
		t.Fatalf("secrets %s", s.Secrets)
	}

	reg := plugins.NewRegistry(plugins.Table)
	reg.Register(keyauth.Name, keyauth.Plugin{})
	reg.SetSecrets(secret.NewResolver(nil))
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	writeFile(t, path, body)
	if err := CheckFile(path, reg); err != nil {
		t.Fatalf("CheckFile: %v", err)
	}

	st, _, lb := newTestStore(t, body)
	reg2 := plugins.NewRegistry(plugins.Table)
	reg2.Register(keyauth.Name, keyauth.Plugin{})
	reg2.SetSecrets(secret.NewResolver(nil))
	sy := storesync.New(storesync.Options{Store: st, Plugins: reg2, Retry: pollEvery, Log: slog.New(slog.NewTextHandler(lb, nil))})
	sp, err := sy.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Consumers) != 1 || len(sp.Secrets) != 1 {
		t.Fatalf("consumers %+v, secrets %s; log %s", sp.Consumers, sp.Secrets, lb)
	}
	if b, _ := json.Marshal(sp); strings.Contains(string(b), "jack-key") {
		t.Fatalf("the Spec holds the value: %s", b)
	}

	for _, tc := range []struct{ doc, want string }{
		{"secrets:\n  - id: v1\n    uri: http://v\n    prefix: p\n    token: t\n#END", "secrets[0] (id v1): a secret's id is <manager>/<id>"},
		{"secrets:\n  - id: azure/v1\n#END", "invalid secret manager: azure"},
		{"secrets:\n  - id: vault/v1\n    uri: /v\n    prefix: p\n    token: t\n#END", `invalid configuration: property "uri" validation failed: failed to match pattern`},
		{"secrets:\n  - id: aws/a\n    access_key_id: a\n#END", `property "secret_access_key" is required`},
		{"secrets:\n  - id: vault/v1\n    uri: http://v\n    prefix: p\n    token: t\n  - id: vault/v1\n    uri: http://v\n    prefix: p\n    token: t\n#END", "duplicate"},
	} {
		_, err := Parse([]byte(tc.doc), "conf/apisix.yaml", env(nil))
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: %v, want %q", tc.doc, err, tc.want)
		}
	}
	// Without the secret, the consumer's reference refuses the file.
	writeFile(t, path, strings.Split(body, "secrets:")[0]+"#END\n")
	if err := CheckFile(path, reg); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "cannot resolve $secret://vault/v1/jack/auth-key: no secret conf") {
		t.Errorf("without the secret: %v", err)
	}
}
