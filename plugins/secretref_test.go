package plugins

import (
	"encoding/json"
	"errors"
	"strings"
	"sync/atomic"
	"testing"

	"coregate/admin/spec"
)

// mapSecrets is a SecretSource over a map (package admin/secret's
// Resolver, which reads Vault, has its own tests; plugins may not import
// it). It counts its lookups.
type mapSecrets struct {
	m     map[string]string
	calls atomic.Int64
}

func (s *mapSecrets) Secret(ref string) (string, error) {
	s.calls.Add(1)
	v, ok := s.m[ref]
	if !ok {
		return "", errors.New("no secret conf, secret_uri: " + ref)
	}
	return v, nil
}

// TestSecretRefs: with a SecretSource, $secret:// references resolve in
// Check, CheckConsumer and Build as $env:// ones do; one the source cannot
// read refuses the configuration with a message naming the reference,
// never a value; without a source they are refused as before.
func TestSecretRefs(t *testing.T) {
	const value = "t-s3cret"
	src := &mapSecrets{m: map[string]string{
		"$secret://vault/v1/jack/token": value,
		"$secret://vault/v1/jack/bad":   "x-s3cret", // refused by the schema's pattern
	}}
	var built string
	r := NewRegistry(testTable)
	r.Register("test-a", tokenPlugin{built: &built})
	r.Register("test-auth", consumerSchema{})

	ok := `{"token":"$secret://vault/v1/jack/token"}`
	if err := r.Check("test-a", json.RawMessage(ok)); err == nil || !strings.Contains(err.Error(), "secret managers ($secret://) are not supported yet") {
		t.Fatalf("without a source: %v", err)
	}
	r.SetSecrets(src)
	if err := r.Check("test-a", json.RawMessage(ok)); err != nil {
		t.Fatalf("Check: %v", err)
	}
	if _, err := r.Build(map[string]json.RawMessage{"test-a": json.RawMessage(ok)}, Env{}); err != nil {
		t.Fatalf("Build: %v", err)
	}
	if built != `{"token":"`+value+`"}` {
		t.Fatalf("built from %s", built)
	}
	if err := r.CheckConsumer("test-auth", json.RawMessage(`{"key":"$secret://vault/v1/jack/token"}`)); err != nil {
		t.Fatalf("CheckConsumer: %v", err)
	}
	// A configuration with a reference is resolved each time it is
	// checked or built: never remembered as passed.
	before := src.calls.Load()
	_ = r.Check("test-a", json.RawMessage(ok))
	if src.calls.Load() != before+1 {
		t.Fatalf("lookups %d after %d", src.calls.Load(), before)
	}

	for _, tc := range []struct{ conf, want, field string }{
		{`{"token":"$secret://vault/v1/jack/missing"}`,
			`failed to check the configuration of plugin test-a err: property "token" validation failed: cannot resolve $secret://vault/v1/jack/missing: no secret conf, secret_uri: $secret://vault/v1/jack/missing`, "token"},
		{`{"token":"$secret://vault/v1/jack/bad"}`,
			`failed to check the configuration of plugin test-a err: property "token" validation failed: the value of $secret://vault/v1/jack/bad is refused by the plugin's schema`, "token"},
		{`{"mode":"$secret://vault/v1/jack/token","token":"t-1"}`, "", ""},
	} {
		err := r.Check("test-a", json.RawMessage(tc.conf))
		if got := errString(err); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.conf, got, tc.want)
		}
		if err == nil {
			continue
		}
		var ve *spec.ValidationError
		if !errors.As(err, &ve) || ve.Field != tc.field || !errors.Is(err, ErrReference) {
			t.Errorf("%s: %#v, want a refusal of a reference at %q", tc.conf, ve, tc.field)
		}
		if strings.Contains(err.Error(), "s3cret") {
			t.Errorf("%s: the refusal shows the value: %v", tc.conf, err)
		}
	}
	r.SetSecrets(nil)
	if err := r.Check("test-a", json.RawMessage(ok)); !errors.Is(err, ErrReference) {
		t.Fatalf("source unset: %v", err)
	}
}

// TestRegistryResolve: Resolve reads a single string as a plugin
// configuration's references are read, for references outside plugins
// (an ssl object's key): a plain string as it is, an $env:// or
// $secret:// one's value, and an error naming the reference, never a
// value, when there is none.
func TestRegistryResolve(t *testing.T) {
	setRefEnv(t, "env-value")
	r := NewRegistry(testTable)
	for _, tc := range []struct {
		in, want string
		ref      bool
		err      string
	}{
		{"-----BEGIN", "-----BEGIN", false, ""},
		{"$env://" + refVar, "env-value", true, ""},
		{"$ENV://" + refJSON + "/user", "u-1", true, ""},
		{"$env://" + refUnset, "", true, "cannot resolve $env://" + refUnset + ": environment variable " + refUnset + " is not set"},
		{"$secret://vault/v1/k", "", true, "$secret://vault/v1/k: secret managers ($secret://) are not supported yet"},
	} {
		v, ref, err := r.Resolve(tc.in)
		if v != tc.want || ref != tc.ref || (err == nil) != (tc.err == "") || err != nil && err.Error() != tc.err {
			t.Errorf("Resolve(%q) = %q, %v, %v; want %q, %v, %q", tc.in, v, ref, err, tc.want, tc.ref, tc.err)
		}
	}
	r.SetSecrets(&mapSecrets{m: map[string]string{"$secret://vault/v1/k": "s3cret"}})
	if v, ref, err := r.Resolve("$secret://vault/v1/k"); v != "s3cret" || !ref || err != nil {
		t.Errorf("with a source: %q %v %v", v, ref, err)
	}
	if _, _, err := r.Resolve("$secret://vault/v1/other"); err == nil || strings.Contains(err.Error(), "s3cret") ||
		!strings.Contains(err.Error(), "$secret://vault/v1/other") {
		t.Errorf("unknown secret: %v", err)
	}
}
