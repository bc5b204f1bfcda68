package standalone

import (
	"errors"
	"testing"
)

// TestLoadCredentials: a credential is listed with the consumers, its id
// "<username>/credentials/<id>", as in APISIX's
// t/config-center-yaml/credentials.t; it goes into the Spec's
// Credentials, not its Consumers.
func TestLoadCredentials(t *testing.T) {
	s, err := Parse([]byte(`
consumers:
  - username: rose
    plugins:
      key-auth:
        key: rose-key
  - id: rose/credentials/542f7414-87f6-4793-a68e-99983dde9913
    plugins:
      key-auth:
        key: rose-cred
#END`), "conf/apisix.yaml", env(nil))
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Consumers) != 1 || len(s.Credentials) != 1 {
		t.Fatalf("consumers %s, credentials %s", s.Consumers, s.Credentials)
	}
	want := `{"id":"rose/credentials/542f7414-87f6-4793-a68e-99983dde9913","plugins":{"key-auth":{"key":"rose-cred"}}}`
	if got := string(s.Credentials[0]); got != want {
		t.Fatalf("credential %s, want %s", got, want)
	}
	_, err = Parse([]byte("consumers:\n  - id: rose/credentials/\n    plugins: {}\n#END"), "conf/apisix.yaml", env(nil))
	if !errors.Is(err, ErrInvalid) {
		t.Fatalf("a credential without an id: %v", err)
	}
}
