package secret_test

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"coregate/admin/secret"
	"coregate/plugins"
	"coregate/plugins/keyauth"
)

var _ plugins.SecretSource = (*secret.Resolver)(nil)

// TestRegistryResolves: a Registry given a Resolver indexes a consumer
// whose key-auth key is a $secret:// reference with the value Vault's KV
// engine (a real HTTP server on loopback answering as Vault documents it)
// holds, and refuses one whose reference does not resolve, naming it.
func TestRegistryResolves(t *testing.T) {
	var hits atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		if r.URL.Path != "/v1/secret/data/apisix/jack" || r.Header.Get("X-Vault-Token") != "root" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = w.Write([]byte(`{"data":{"data":{"auth-key":"jack-s3cret"},"metadata":{"version":3}}}`))
	}))
	t.Cleanup(srv.Close)

	reg := plugins.NewRegistry(plugins.Table)
	reg.Register(keyauth.Name, keyauth.Plugin{})
	res := secret.NewResolver(nil)
	res.Update([]json.RawMessage{json.RawMessage(`{"id":"vault/v1","uri":"` + srv.URL + `","prefix":"secret/data/apisix","token":"root"}`)})
	reg.SetSecrets(res)

	conf := json.RawMessage(`{"key":"$secret://vault/v1/jack/auth-key"}`)
	if err := reg.CheckConsumer(keyauth.Name, conf); err != nil {
		t.Fatal(err)
	}
	x, err := reg.IndexConsumers([]*plugins.Consumer{
		{Username: "jack", Plugins: map[string]json.RawMessage{keyauth.Name: conf}},
		{Username: "ann", Plugins: map[string]json.RawMessage{keyauth.Name: json.RawMessage(`{"key":"$secret://vault/v1/ann/auth-key"}`)}},
	}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if c := x.ByCredential(keyauth.Name, []byte("jack-s3cret")); c == nil || c.Username != "jack" {
		t.Fatalf("jack not found by the value of his reference: %v", c)
	}
	if x.ByCredential(keyauth.Name, []byte("$secret://vault/v1/jack/auth-key")) != nil {
		t.Fatal("found by the reference itself")
	}
	refused := x.Refused()
	if len(refused) != 1 || !errors.Is(refused[0], plugins.ErrReference) ||
		!strings.Contains(refused[0].Error(), "$secret://vault/v1/ann/auth-key") || strings.Contains(refused[0].Error(), "s3cret") {
		t.Fatalf("refused: %v", refused)
	}
	// jack's value read once (the check's, cached for the index), ann's
	// failure once.
	if hits.Load() != 2 {
		t.Fatalf("%d reads of Vault, want 2", hits.Load())
	}
}
