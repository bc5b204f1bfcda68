package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/admin/keyring"
	"coregate/admin/store"
)

// TestDataEncryptionKeyAuth: on a node with APISIX's default
// data_encryption (none written), a key-auth consumer's key written
// through the Admin API is stored encrypted in etcd, byte for byte as
// APISIX stores it, and authenticates in clear through the workers; a
// consumer APISIX stored with the keyring's second key, and one stored
// in clear before encryption, authenticate too.
func TestDataEncryptionKeyAuth(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "secret place")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	route := fmt.Sprintf(`{"uri":"/secure","plugins":{"key-auth":{}},"upstream":{"nodes":{%q:1}}}`, up.Addr())
	if r := admin.do(t, c, "PUT", "routes/1", route); r.status != 201 {
		t.Fatalf("PUT route: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "PUT", "consumers", `{"username":"jack","plugins":{"key-auth":{"key":"user-key"}}}`); r.status != 201 {
		t.Fatalf("PUT consumer: %d %s", r.status, r.body)
	}

	s := embeddedStore(t, g.dir)
	ctx := context.Background()
	kv, err := s.Get(ctx, "/apisix/consumers/jack")
	if err != nil {
		t.Fatal(err)
	}
	// APISIX 3's value for "user-key" with its default keyring (OpenSSL's,
	// package keyring's tests).
	if want := `"key-auth":{"key":"XU29sA3FEVF68hGcdPo7sg=="}`; !strings.Contains(string(kv.Value), want) || strings.Contains(string(kv.Value), "user-key") {
		t.Fatalf("etcd holds %s, want %s", kv.Value, want)
	}

	second, err := keyring.Parse(keyring.Default[1:])
	if err != nil {
		t.Fatal(err)
	}
	put := func(key, value string) {
		t.Helper()
		if _, _, err := s.Put(ctx, "/apisix/"+key, []byte(value), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	put("consumers/ann", `{"username":"ann","plugins":{"key-auth":{"key":"`+second.Encrypt("ann-key")+`"}}}`)
	put("consumers/bob", `{"username":"bob","plugins":{"key-auth":{"key":"bob-clear-key"}}}`)

	for _, key := range []string{"user-key", "ann-key", "bob-clear-key"} {
		eventually(t, 10*time.Second, func() error {
			if r := do(t, c, "GET", g.url("/secure"), "", map[string]string{"apikey": key}, nil); r.status != 200 || r.body != "secret place" {
				return fmt.Errorf("GET /secure with %s = %d %q", key, r.status, r.body)
			}
			return nil
		})
	}
	// The key as stored is not a key.
	if r := do(t, c, "GET", g.url("/secure"), "", map[string]string{"apikey": "XU29sA3FEVF68hGcdPo7sg=="}, nil); r.status != 401 || r.body != invalidKeyBody {
		t.Fatalf("GET /secure with the ciphertext = %d %q, want 401", r.status, r.body)
	}
	// The Admin API shows the key in clear, as APISIX does.
	if r := admin.do(t, c, "GET", "consumers/jack", ""); r.status != 200 || !strings.Contains(r.body, `"key":"user-key"`) {
		t.Fatalf("GET consumer: %d %s", r.status, r.body)
	}
}
