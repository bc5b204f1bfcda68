package secret

import (
	"encoding/json"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// vaultObject is a vault object for srv, as the Admin API stores it: its
// token sealed with the keyring when sealed.
func vaultObject(t *testing.T, uri, prefix, token string, seal bool) json.RawMessage {
	t.Helper()
	m := map[string]any{"id": "vault/v1", "uri": uri, "prefix": prefix, "token": token, "namespace": "team"}
	if seal {
		Seal(ManagerVault, m, testKeyring(t, "edd1c9f0985e76a2"))
	}
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestResolver: references resolve against the objects given, through a
// real HTTP server on loopback that answers as Vault's KV engine; values
// are cached until their object changes or their TTL passes, failures
// until their NegTTL does, and no error shows a value or a token.
func TestResolver(t *testing.T) {
	var hits atomic.Int64
	srv := kvServer(t, "root", "team", &hits)
	r := NewResolver(testKeyring(t, "edd1c9f0985e76a2"))
	const ref = "$secret://vault/v1/jack/auth-key"
	if _, err := r.Secret(ref); err == nil || err.Error() != "no secret conf, secret_uri: "+ref {
		t.Fatalf("no objects: %v", err)
	}
	obj := vaultObject(t, srv.URL, "secret/data/apisix", "root", true)
	r.Update([]json.RawMessage{obj})
	for range 3 {
		if v, err := r.Secret(ref); err != nil || v != "value-v2" {
			t.Fatalf("Secret: %q %v", v, err)
		}
	}
	if hits.Load() != 1 {
		t.Fatalf("%d reads of Vault for one value, want 1", hits.Load())
	}
	// The same objects again: the value stays cached.
	r.Update([]json.RawMessage{obj, json.RawMessage(`{"id":"aws/a","access_key_id":"a","secret_access_key":"s"}`)})
	if _, err := r.Secret(ref); err != nil || hits.Load() != 1 {
		t.Fatalf("after the same objects: %v, %d reads", err, hits.Load())
	}
	// The object changed (another prefix, a KV v1 engine): read again.
	r.Update([]json.RawMessage{vaultObject(t, srv.URL, "kv/apisix", "root", false)})
	if v, err := r.Secret(ref); err != nil || v != "value-v1" || hits.Load() != 2 {
		t.Fatalf("after a change: %q %v, %d reads", v, err, hits.Load())
	}
	// A failure is cached for NegTTL, and shows neither value nor token.
	r.Update([]json.RawMessage{vaultObject(t, srv.URL, "kv/apisix", "wrong-token", true)})
	for range 2 {
		if _, err := r.Secret(ref); err == nil || !strings.Contains(err.Error(), "status 403") || strings.Contains(err.Error(), "wrong-token") {
			t.Fatalf("wrong token: %v", err)
		}
	}
	if hits.Load() != 3 {
		t.Fatalf("%d reads, want 3: the failure read twice", hits.Load())
	}
	r.NegTTL = 50 * time.Millisecond
	time.Sleep(100 * time.Millisecond)
	if _, err := r.Secret(ref); err == nil || hits.Load() != 4 {
		t.Fatalf("after NegTTL: %v, %d reads, want 4", err, hits.Load())
	}
	// The token may be an $env:// reference, as in APISIX.
	t.Setenv("COREGATE_TEST_VAULT_TOKEN", "root")
	r.Update([]json.RawMessage{vaultObject(t, srv.URL, "kv/apisix", "$ENV://COREGATE_TEST_VAULT_TOKEN", true)})
	if v, err := r.Secret(ref); err != nil || v != "value-v1" {
		t.Fatalf("token from the environment: %q %v", v, err)
	}
	// The TTL passed: read again.
	r.TTL = 50 * time.Millisecond
	n := hits.Load()
	time.Sleep(100 * time.Millisecond)
	if _, err := r.Secret(ref); err != nil || hits.Load() != n+1 {
		t.Fatalf("after the TTL: %v, %d reads after %d", err, hits.Load(), n)
	}
	// The object went: refused.
	r.Update(nil)
	if _, err := r.Secret(ref); err == nil || !strings.Contains(err.Error(), "no secret conf") {
		t.Fatalf("object gone: %v", err)
	}
	// A read is bounded by Timeout.
	r.Update([]json.RawMessage{vaultObject(t, srv.URL, "secret/data/slow", "root", false)})
	r.Timeout = 200 * time.Millisecond
	start := time.Now()
	if _, err := r.Secret("$secret://vault/v1/jack/k"); err == nil || time.Since(start) > 2*time.Second {
		t.Fatalf("slow Vault: %v after %v", err, time.Since(start))
	}
	// A gcp object whose file is missing, and malformed references.
	r.Update([]json.RawMessage{json.RawMessage(`{"id":"gcp/g","auth_file":"` + t.TempDir() + `/none.json"}`)})
	if _, err := r.Secret("$secret://gcp/g/k"); err == nil || !strings.Contains(err.Error(), "failed to read configuration, file: ") {
		t.Fatalf("gcp: %v", err)
	}
	if _, err := r.Secret("$secret://vault/v1"); err == nil || err.Error() != "error format: no secret conf id" {
		t.Fatalf("malformed: %v", err)
	}
}
