package secret

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/keyring"
	"coregate/admin/spec"
)

// TestValidate checks each manager's schema with APISIX's messages
// (t/admin/secrets.t, t/secret/*.t).
func TestValidate(t *testing.T) {
	cases := []struct {
		manager, body, want string // want "" for valid
	}{
		{"vault", `{"uri":"http://127.0.0.1:12800/get","prefix":"apisix","token":"apisix"}`, ""},
		{"vault", `{"uri":"http://127.0.0.1:12800","prefix":"kv/apisix","token":"t","namespace":"ns","id":"vault/a","create_time":1}`, ""},
		{"vault", `{"uri":"/get","prefix":"apisix","token":"apisix"}`, `property "uri" validation failed: failed to match pattern`},
		{"vault", `{"uri":"http://127.0.0.1:12800","prefix":"apisix"}`, `property "token" is required`},
		{"vault", `{"uri":"http://127.0.0.1:12800","prefix":1,"token":"t"}`, `property "prefix" validation failed: wrong type: expected string, got number`},
		{"aws", `{"access_key_id":"a","secret_access_key":"s","region":"eu-west-1","endpoint_url":"http://127.0.0.1:4566"}`, ""},
		{"aws", `{"access_key_id":"a"}`, `property "secret_access_key" is required`},
		{"aws", `{"access_key_id":"a","secret_access_key":"s","endpoint_url":"localhost"}`, `property "endpoint_url" validation failed: failed to match pattern`},
		{"gcp", `{"auth_config":{"client_email":"e","private_key":"k","project_id":"p"}}`, ""},
		{"gcp", `{"auth_file":"/etc/gcp.json"}`, ""},
		{"gcp", `{"ssl_verify":false}`, `value should match only one schema, but matches none`},
		{"gcp", `{"auth_config":{"client_email":"e","project_id":"p"}}`, `property "private_key" is required`},
	}
	for _, c := range cases {
		err := Validate(c.manager, []byte(c.body))
		switch {
		case c.want == "" && err != nil:
			t.Errorf("%s %s: %v", c.manager, c.body, err)
		case c.want != "" && (err == nil || !strings.Contains(err.Error(), c.want)):
			t.Errorf("%s %s: got %v, want %q", c.manager, c.body, err, c.want)
		case c.want != "" && !errors.Is(err, spec.ErrInvalid):
			t.Errorf("%s %s: %v is not spec.ErrInvalid", c.manager, c.body, err)
		}
	}
	if err := Validate("azure", []byte(`{}`)); !errors.Is(err, ErrUnknownManager) {
		t.Errorf("azure: %v", err)
	}
	for _, m := range Managers() {
		if !json.Valid(Schema(m)) {
			t.Errorf("schema of %s: %s", m, Schema(m))
		}
	}
}

func testKeyring(t *testing.T, keys ...string) *keyring.Keyring {
	t.Helper()
	k, err := keyring.Parse(keys)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestSealOpen checks that each manager's credentials, and nothing else,
// are encrypted, and decrypt with either key of a rotated keyring.
func TestSealOpen(t *testing.T) {
	k := testKeyring(t, "edd1c9f0985e76a2", "qeddd145sfvddff3")
	objs := map[string]string{
		"vault": `{"uri":"http://v:8200","prefix":"kv","token":"root-token"}`,
		"aws":   `{"access_key_id":"AK","secret_access_key":"SK","session_token":"ST"}`,
		"gcp":   `{"auth_config":{"client_email":"e","private_key":"PK","project_id":"p"}}`,
	}
	clear := map[string][]string{"vault": {"root-token"}, "aws": {"SK", "ST"}, "gcp": {"PK"}}
	kept := map[string][]string{"vault": {"http://v:8200", "kv"}, "aws": {"AK"}, "gcp": {`"e"`, `"p"`}}
	for m, body := range objs {
		var obj map[string]any
		if err := json.Unmarshal([]byte(body), &obj); err != nil {
			t.Fatal(err)
		}
		if !Seal(m, obj, k) {
			t.Fatalf("%s: nothing sealed", m)
		}
		sealed, _ := json.Marshal(obj)
		for _, s := range clear[m] {
			if strings.Contains(string(sealed), `"`+s+`"`) {
				t.Errorf("%s: %q in clear in %s", m, s, sealed)
			}
		}
		for _, s := range kept[m] {
			if !strings.Contains(string(sealed), s) {
				t.Errorf("%s: %q lost from %s", m, s, sealed)
			}
		}
		// The second key alone (after rotation) still opens it.
		old := testKeyring(t, "qeddd145sfvddff3")
		if Open(m, obj, old) {
			t.Fatalf("%s: opened with a key that did not seal it", m)
		}
		rotated := testKeyring(t, "zzzzzzzzzzzzzzzz", "edd1c9f0985e76a2")
		if !Open(m, obj, rotated) {
			t.Fatalf("%s: nothing opened", m)
		}
		var want map[string]any
		_ = json.Unmarshal([]byte(body), &want)
		got, _ := json.Marshal(obj)
		w, _ := json.Marshal(want)
		if string(got) != string(w) {
			t.Errorf("%s: opened %s, want %s", m, got, w)
		}
	}
	// In clear, Open keeps the value; without a keyring nothing changes.
	obj := map[string]any{"token": "plain"}
	if Open("vault", obj, k) || obj["token"] != "plain" {
		t.Errorf("a value in clear was changed: %v", obj)
	}
	if Seal("vault", obj, nil) || obj["token"] != "plain" {
		t.Errorf("sealed without a keyring: %v", obj)
	}
}

func TestParseRef(t *testing.T) {
	r, err := ParseRef("$secret://vault/v1/jack/auth/key")
	if err != nil || r != (Ref{"vault", "v1", "jack/auth/key"}) {
		t.Errorf("%+v %v", r, err)
	}
	for s, want := range map[string]string{
		"$secret://vault":     "error format: no secret manager",
		"$secret://vault/v1":  "error format: no secret conf id",
		"$secret://vault/v1/": "error format: no secret key id",
		"$env://X":            "error secret_uri prefix: $env://X",
	} {
		if _, err := ParseRef(s); err == nil || err.Error() != want {
			t.Errorf("%s: %v, want %q", s, err, want)
		}
	}
}

// kvServer is a real HTTP server on loopback that answers Vault's KV
// read endpoint as Vault documents it (GET /v1/<mount>/data/<path> for
// v2, GET /v1/<mount>/<path> for v1), with the token and namespace it
// checks.
func kvServer(t *testing.T, token, namespace string, hits *atomic.Int64) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		hits.Add(1)
		w.Header().Set("Content-Type", "application/json")
		if r.Method != http.MethodGet || r.Header.Get("X-Vault-Token") != token || r.Header.Get("X-Vault-Namespace") != namespace {
			w.WriteHeader(http.StatusForbidden)
			_, _ = w.Write([]byte(`{"errors":["permission denied"]}`))
			return
		}
		switch r.URL.Path {
		case "/v1/secret/data/apisix/jack":
			_, _ = w.Write([]byte(`{"request_id":"x","lease_id":"","renewable":false,"lease_duration":0,` +
				`"data":{"data":{"auth-key":"value-v2","n":1},"metadata":{"created_time":"2026-01-01T00:00:00Z","version":1}}}`))
		case "/v1/kv/apisix/jack":
			_, _ = w.Write([]byte(`{"data":{"auth-key":"value-v1"},"lease_duration":2764800}`))
		case "/v1/secret/data/slow/jack":
			select {
			case <-r.Context().Done():
			case <-time.After(3 * time.Second):
			}
		default:
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write([]byte(`{"errors":[]}`))
		}
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestVaultGet(t *testing.T) {
	var hits atomic.Int64
	srv := kvServer(t, "root", "team", &hits)
	ctx := context.Background()
	v2 := &Vault{URI: srv.URL, Prefix: "secret/data/apisix", Token: "root", Namespace: "team"}
	if s, err := v2.Get(ctx, nil, "jack/auth-key"); err != nil || s != "value-v2" {
		t.Errorf("v2: %q %v", s, err)
	}
	v1 := &Vault{URI: srv.URL + "/", Prefix: "kv/apisix/", Token: "root", Namespace: "team"}
	if s, err := v1.Get(ctx, nil, "jack/auth-key"); err != nil || s != "value-v1" {
		t.Errorf("v1: %q %v", s, err)
	}
	for key, want := range map[string]string{
		"jack/missing": `no member "missing" in the secret jack`,
		"jack/n":       `the member "n" of the secret jack is not a string`,
		"nobody/key":   "status 404",
		"jack":         "error key format, key: jack",
		"/key":         "can't find main key, key: /key",
		"jack/":        "can't find sub key, key: jack/",
	} {
		_, err := v2.Get(ctx, nil, key)
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", key, err, want)
		}
	}
	bad := &Vault{URI: srv.URL, Prefix: "secret/data/apisix", Token: "wrong", Namespace: "team"}
	if _, err := bad.Get(ctx, nil, "jack/auth-key"); err == nil || !strings.Contains(err.Error(), "status 403") {
		t.Errorf("wrong token: %v", err)
	}
	// A lookup is bounded by its context.
	slow := &Vault{URI: srv.URL, Prefix: "secret/data/slow", Token: "root", Namespace: "team"}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := slow.Get(short, nil, "jack/k"); err == nil {
		t.Error("slow: no error")
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("slow: took %v", d)
	}
	// Nothing listening: an error without the token.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	_ = ln.Close()
	gone := &Vault{URI: "http://" + addr, Prefix: "p", Token: "root-secret"}
	if _, err := gone.Get(ctx, nil, "a/b"); err == nil || strings.Contains(err.Error(), "root-secret") {
		t.Errorf("nothing listening: %v", err)
	}
}
