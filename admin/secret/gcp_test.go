package secret

import (
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gcpServers are real HTTP servers on loopback answering as Google's
// OAuth 2.0 token endpoint (the JWT bearer grant, the assertion's RS256
// signature verified with pub) and Secret Manager's versions access
// (GET /v1/projects/<p>/secrets/<name>/versions/latest:access with the
// token it gave).
func gcpServers(t *testing.T, pub *rsa.PublicKey, secrets map[string]string) (tokenURI, entriesURI string) {
	t.Helper()
	tok := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = r.ParseForm()
		parts := strings.Split(r.PostForm.Get("assertion"), ".")
		if r.PostForm.Get("grant_type") != "urn:ietf:params:oauth:grant-type:jwt-bearer" || len(parts) != 3 {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		sig, _ := base64.RawURLEncoding.DecodeString(parts[2])
		sum := sha256.Sum256([]byte(parts[0] + "." + parts[1]))
		claims, _ := base64.RawURLEncoding.DecodeString(parts[1])
		var c struct{ Iss, Aud, Scope string }
		_ = json.Unmarshal(claims, &c)
		if rsa.VerifyPKCS1v15(pub, crypto.SHA256, sum[:], sig) != nil || c.Iss != "sa@p.iam.gserviceaccount.com" ||
			c.Scope != "https://www.googleapis.com/auth/cloud-platform" || !strings.HasSuffix(c.Aud, "/token") {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":"invalid_grant"}`))
			return
		}
		_, _ = w.Write([]byte(`{"access_token":"ya29.tok","token_type":"Bearer","expires_in":3599}`))
	}))
	t.Cleanup(tok.Close)
	sm := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := strings.TrimSuffix(strings.TrimPrefix(r.URL.Path, "/v1/projects/p1/secrets/"), "/versions/latest:access")
		v, ok := secrets[name]
		if r.Header.Get("Authorization") != "Bearer ya29.tok" || !ok {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		out, _ := json.Marshal(map[string]any{"name": "projects/p1/secrets/" + name + "/versions/1",
			"payload": map[string]string{"data": base64.StdEncoding.EncodeToString([]byte(v))}})
		_, _ = w.Write(out)
	}))
	t.Cleanup(sm.Close)
	return tok.URL + "/token", sm.URL + "/v1"
}

// TestGCPGet: secrets read from loopback servers answering as Google's
// token endpoint and Secret Manager, with the service account in the
// object (sealed, through a Resolver) or in its file.
func TestGCPGet(t *testing.T) {
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	der, _ := x509.MarshalPKCS8PrivateKey(key)
	pemKey := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))
	tokenURI, entriesURI := gcpServers(t, &key.PublicKey, map[string]string{
		"plain": "p-value", "jack": `{"auth-key":"jack-value"}`,
	})
	authConf := map[string]any{"client_email": "sa@p.iam.gserviceaccount.com", "private_key": pemKey, "project_id": "p1",
		"token_uri": tokenURI, "entries_uri": entriesURI}
	fileJSON, _ := json.Marshal(authConf) // before Seal changes it
	k := testKeyring(t, "edd1c9f0985e76a2")
	obj := map[string]any{"id": "gcp/g1", "auth_config": authConf}
	Seal(ManagerGCP, obj, k)
	raw, _ := json.Marshal(obj)
	if strings.Contains(string(raw), "PRIVATE KEY") {
		t.Fatal("the private key is not sealed")
	}
	r := NewResolver(k)
	r.Update([]json.RawMessage{raw})
	for ref, want := range map[string]string{
		"$secret://gcp/g1/plain":         "p-value",
		"$secret://gcp/g1/jack/auth-key": "jack-value",
	} {
		if v, err := r.Secret(ref); err != nil || v != want {
			t.Errorf("%s: %q %v, want %q", ref, v, err, want)
		}
	}
	for ref, want := range map[string]string{
		"$secret://gcp/g1/nothing":      "failed to retrieve data from gcp secret manager: status 404",
		"$secret://gcp/g1/jack/missing": `no string member "missing" in the secret jack`,
	} {
		if _, err := r.Secret(ref); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", ref, err, want)
		}
	}

	// The account in a file; another key's signature is refused.
	file := filepath.Join(t.TempDir(), "sa.json")
	if err := os.WriteFile(file, fileJSON, 0o600); err != nil {
		t.Fatal(err)
	}
	g := &GCP{AuthFile: file}
	if v, err := g.Get(t.Context(), nil, "plain"); err != nil || v != "p-value" {
		t.Errorf("auth_file: %q %v", v, err)
	}
	other, _ := rsa.GenerateKey(rand.Reader, 2048)
	der, _ = x509.MarshalPKCS8PrivateKey(other)
	wrong := *g
	wrong.AuthFile = ""
	wrong.AuthConfig = &GCPAuth{ClientEmail: "sa@p.iam.gserviceaccount.com", ProjectID: "p1", TokenURI: tokenURI, EntriesURI: entriesURI,
		PrivateKey: string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}))}
	if _, err := wrong.Get(t.Context(), nil, "plain"); err == nil || !strings.Contains(err.Error(), "failed to get google oauth token: status 401") {
		t.Errorf("another key: %v", err)
	}
}
