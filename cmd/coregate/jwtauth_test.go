package main

import (
	"context"
	"crypto"
	"crypto/hmac"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// jwtToken signs payload (JSON) with alg HS256 (key a secret) or RS256
// (key an *rsa.PrivateKey).
func jwtToken(t *testing.T, alg string, key any, payload string) string {
	t.Helper()
	enc := base64.RawURLEncoding.EncodeToString
	signed := enc([]byte(`{"alg":"`+alg+`","typ":"JWT"}`)) + "." + enc([]byte(payload))
	var sig []byte
	switch alg {
	case "HS256":
		m := hmac.New(sha256.New, []byte(key.(string)))
		m.Write([]byte(signed))
		sig = m.Sum(nil)
	case "RS256":
		d := sha256.Sum256([]byte(signed))
		var err error
		if sig, err = rsa.SignPKCS1v15(rand.Reader, key.(*rsa.PrivateKey), crypto.SHA256, d[:]); err != nil {
			t.Fatal(err)
		}
	}
	return signed + "." + enc(sig)
}

// TestAdminAPIJWTAuth: jwt-auth configured through the Admin API, HS256
// and RS256 consumers: a real client's tokens in the header, the query
// and a cookie, APISIX's answers, hide_credentials as the upstream sees
// it, the secret stored encrypted, the plugin listed with its schema.
func TestAdminAPIJWTAuth(t *testing.T) {
	t.Parallel()
	up := headEchoUpstream(t)
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	put := func(path, body string, want int) result {
		t.Helper()
		r := admin.do(t, c, "PUT", path, body)
		if r.status != want {
			t.Fatalf("PUT %s: %d %s, want %d", path, r.status, r.body, want)
		}
		return r
	}
	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"jwt-auth"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	r := do(t, c, "GET", fmt.Sprintf("http://127.0.0.1:%d/apisix/admin/schema/plugins/jwt-auth", adminPort), "",
		map[string]string{"X-API-KEY": adminapi.LegacyAdminKey}, nil)
	if r.status != 200 || !strings.Contains(r.body, `"key_claim_name"`) {
		t.Fatalf("schema: %d %s", r.status, r.body)
	}

	priv, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, err := x509.MarshalPKIXPublicKey(&priv.PublicKey)
	if err != nil {
		t.Fatal(err)
	}
	pubPEM, _ := json.Marshal(string(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der})))

	put("routes/1", fmt.Sprintf(`{"uri":"/jwt","plugins":{"jwt-auth":{"hide_credentials":true}},"upstream":{"nodes":{%q:1}}}`, up.Addr()), 201)
	put("consumers", `{"username":"jack","plugins":{"jwt-auth":{"key":"user-key","secret":"my-secret-key"}}}`, 201)
	put("consumers/jack/credentials/rs", `{"plugins":{"jwt-auth":{"key":"rs-key","algorithm":"RS256","public_key":`+string(pubPEM)+`}}}`, 201)

	now := time.Now().Unix()
	hs := jwtToken(t, "HS256", "my-secret-key", fmt.Sprintf(`{"key":"user-key","exp":%d}`, now+600))
	rs := jwtToken(t, "RS256", priv, fmt.Sprintf(`{"key":"rs-key","exp":%d}`, now+600))
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/jwt?jwt="+rs), "", nil, nil); r.status != 200 {
			return fmt.Errorf("RS256 credential: %d %q", r.status, r.body)
		}
		return nil
	})
	for _, tc := range []struct {
		name, target string
		hdr          map[string]string
		cookie       string // what the upstream's Cookie header must be
	}{
		{"header", "/jwt", map[string]string{"Authorization": "Bearer " + hs}, ""},
		{"query", "/jwt?a=1&jwt=" + hs, nil, ""},
		{"cookie", "/jwt", map[string]string{"Cookie": "a=1; jwt=" + hs}, "a=1"},
		{"RS256", "/jwt", map[string]string{"Authorization": rs}, ""},
	} {
		e := upstreamSaw(t, do(t, c, "GET", g.url(tc.target), "", tc.hdr, nil))
		if e.get("X-Consumer-Username") != "jack" || e.has("Authorization") || strings.Contains(e.URI, "jwt=") ||
			e.get("Cookie") != tc.cookie {
			t.Errorf("%s: upstream saw %+v", tc.name, e)
		}
	}
	for _, tc := range []struct {
		name string
		hdr  map[string]string
		body string
	}{
		{"missing", nil, "Missing JWT token in request"},
		{"invalid", map[string]string{"Authorization": "invalid-" + hs}, "JWT token invalid"},
		{"unknown key", map[string]string{"Authorization": jwtToken(t, "HS256", "my-secret-key", `{"key":"nobody"}`)}, "Invalid user key in JWT token"},
		{"wrong secret", map[string]string{"Authorization": jwtToken(t, "HS256", "other", `{"key":"user-key"}`)}, "failed to verify jwt"},
		{"expired", map[string]string{"Authorization": jwtToken(t, "HS256", "my-secret-key", fmt.Sprintf(`{"key":"user-key","exp":%d}`, now-600))}, "failed to verify jwt"},
		{"RS256 key as HS256", map[string]string{"Authorization": jwtToken(t, "HS256", "my-secret-key", `{"key":"rs-key"}`)}, "failed to verify jwt"},
	} {
		r := do(t, c, "GET", g.url("/jwt"), "", tc.hdr, nil)
		if want := `{"message":"` + tc.body + `"}` + "\n"; r.status != 401 || r.body != want || r.header.Get("WWW-Authenticate") != `Bearer realm="jwt"` {
			t.Errorf("%s: %d %q %q", tc.name, r.status, r.body, r.header.Get("WWW-Authenticate"))
		}
	}

	// The secret is stored encrypted.
	kv, err := embeddedStore(t, g.dir).Get(context.Background(), "/apisix/consumers/jack")
	if err != nil {
		t.Fatal(err)
	}
	if v := string(kv.Value); !strings.Contains(v, `"secret":"`) || strings.Contains(v, "my-secret-key") {
		t.Fatalf("etcd holds %s", v)
	}
	// APISIX's refusals.
	r = put("consumers", `{"username":"kerouac","plugins":{"jwt-auth":{"key":"k2","algorithm":"RS256"}}}`, 400)
	if !strings.Contains(r.body, `failed to validate dependent schema for \"algorithm\": value should match only one schema, but matches none`) {
		t.Fatalf("RS256 without public_key: %s", r.body)
	}
	r = put("consumers", `{"username":"kerouac","plugins":{"jwt-auth":{"key":"k2"}}}`, 400)
	if !strings.Contains(r.body, `property \"secret\" is required when using HS based algorithms`) {
		t.Fatalf("HS256 without secret: %s", r.body)
	}
	r = put("consumers", `{"username":"kerouac","plugins":{"jwt-auth":{"key":"user-key","secret":"s"}}}`, 400)
	if !strings.Contains(r.body, `duplicate key of plugin jwt-auth found with consumer: jack`) {
		t.Fatalf("duplicate key: %s", r.body)
	}

	// The worker keeps the tokens that verified (hs and rs, sent above):
	// once jack's secret changed and the RS256 credential is gone,
	// neither authenticates, and a token of the new secret does.
	if r := admin.do(t, c, "PUT", "consumers", `{"username":"jack","plugins":{"jwt-auth":{"key":"user-key","secret":"new-secret"}}}`); r.status/100 != 2 {
		t.Fatalf("secret change: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "DELETE", "consumers/jack/credentials/rs", ""); r.status/100 != 2 {
		t.Fatalf("credential removal: %d %s", r.status, r.body)
	}
	fresh := jwtToken(t, "HS256", "new-secret", fmt.Sprintf(`{"key":"user-key","exp":%d}`, now+600))
	eventually(t, 10*time.Second, func() error {
		for _, tc := range []struct{ name, tok, body string }{
			{"old secret", hs, "failed to verify jwt"},
			{"removed credential", rs, "Invalid user key in JWT token"},
		} {
			r := do(t, c, "GET", g.url("/jwt"), "", map[string]string{"Authorization": tc.tok}, nil)
			if want := `{"message":"` + tc.body + `"}` + "\n"; r.status != 401 || r.body != want {
				return fmt.Errorf("%s: %d %q", tc.name, r.status, r.body)
			}
		}
		return nil
	})
	if e := upstreamSaw(t, do(t, c, "GET", g.url("/jwt"), "", map[string]string{"Authorization": fresh}, nil)); e.get("X-Consumer-Username") != "jack" {
		t.Fatalf("new secret: upstream saw %+v", e)
	}
}
