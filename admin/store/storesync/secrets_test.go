package storesync

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"coregate/admin/secret"
	"coregate/plugins"
	"coregate/plugins/keyauth"
)

// TestSecrets: the secret objects are served in the Spec, as stored with
// their id "<manager>/<id>", read before the other objects so that a
// consumer's $secret:// reference (stored before them, in key order)
// resolves when its plugins are checked; one its manager's schema refuses
// is left out, and so is a consumer whose reference does not resolve.
func TestSecrets(t *testing.T) {
	vault := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/v1/secret/data/apisix/jack" || r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"data":{"data":{"auth-key":"jack-key"},"metadata":{"version":1}}}`))
	}))
	t.Cleanup(vault.Close)

	e := newEnv(t)
	v1 := `{"uri":"` + vault.URL + `","prefix":"secret/data/apisix","token":"root"}`
	e.put("consumers/jack", `{"username":"jack","plugins":{"key-auth":{"key":"$secret://vault/v1/jack/auth-key"}}}`)
	e.put("consumers/ann", `{"username":"ann","plugins":{"key-auth":{"key":"$secret://vault/v1/ann/auth-key"}}}`)
	e.put("secrets/vault/v1", v1)
	e.put("secrets/vault/bad", `{"uri":"/no-scheme","prefix":"p","token":"t"}`)
	e.put("secrets/azure/x", `{}`)
	e.put("secrets/vault/a/b", v1)

	reg := plugins.NewRegistry(plugins.Table)
	reg.Register(keyauth.Name, keyauth.Plugin{})
	reg.SetSecrets(secret.NewResolver(nil))
	s := New(Options{Store: e.store, CachePath: e.cache, Retry: 200 * time.Millisecond, Plugins: reg, Log: testLog(t)})
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Secrets) != 1 {
		t.Fatalf("secrets %s", sp.Secrets)
	}
	var got map[string]any
	if err := json.Unmarshal(sp.Secrets[0], &got); err != nil || got["id"] != "vault/v1" || got["token"] != "root" {
		t.Fatalf("secret %s", sp.Secrets[0])
	}
	if len(sp.Consumers) != 1 || sp.Consumers[0].Username != "jack" {
		t.Fatalf("consumers %+v", sp.Consumers)
	}
	// What is served is the reference, never the value.
	if b, _ := json.Marshal(sp); strings.Contains(string(b), "jack-key") {
		t.Fatalf("the Spec holds the value: %s", b)
	}

	// The secret goes: the Spec loses it, and a consumer written after
	// that with a reference to it is left out.
	e.watch(s)
	if _, err := e.admin.Delete(t.Context(), "/apisix/secrets/vault/v1", 0); err != nil {
		t.Fatal(err)
	}
	e.put("consumers/bob", `{"username":"bob","plugins":{"key-auth":{"key":"$secret://vault/v1/jack/auth-key"}}}`)
	e.put("consumers/carl", `{"username":"carl","plugins":{"key-auth":{"key":"carl-key"}}}`) // written after bob
	deadline := time.After(10 * time.Second)
	served := func(name string) bool {
		for _, c := range sp.Consumers {
			if c.Username == name {
				return true
			}
		}
		return false
	}
	for !served("carl") {
		select {
		case sp = <-e.specs:
		case <-deadline:
			t.Fatal("carl never served")
		}
	}
	if len(sp.Secrets) != 0 || served("bob") || !served("jack") {
		t.Fatalf("secrets %s, consumers %+v", sp.Secrets, sp.Consumers)
	}
}
