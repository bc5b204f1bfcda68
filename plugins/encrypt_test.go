package plugins

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/keyring"
)

// secretAuth is a test authentication plugin whose consumer schema names
// "key" secret, as key-auth's.
type secretAuth struct{ keyed }

func (secretAuth) ConsumerSchema() []byte {
	return []byte(`{"type":"object","encrypt_fields":["key"],"properties":{"key":{"type":"string"}},"required":["key"]}`)
}

// secretLimit is a test plugin whose schema names secret fields, at the
// root, through an object and through an array; Check refuses a password
// that is not the clear one, so a configuration checked with its value
// encrypted fails.
type secretLimit struct{ fake }

func (secretLimit) Schema() []byte {
	return []byte(`{"type":"object","encrypt_fields":["redis_password","auth.token","nodes.secret","tags"]}`)
}

func (secretLimit) Check(raw json.RawMessage) error {
	var c struct {
		RedisPassword *string `json:"redis_password"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if c.RedisPassword != nil && *c.RedisPassword != "s3cret" {
		return fmt.Errorf("redis_password is %q", *c.RedisPassword)
	}
	return nil
}

func secretRegistry(t *testing.T) (*Registry, *keyring.Keyring) {
	t.Helper()
	k, err := keyring.Parse(keyring.Default)
	if err != nil {
		t.Fatal(err)
	}
	r := NewRegistry(testTable)
	r.Register("test-auth", secretAuth{})
	r.Register("test-limit", secretLimit{})
	r.Register("test-a", fake{})
	return r, k
}

func TestEncryptFields(t *testing.T) {
	r, _ := secretRegistry(t)
	for _, tc := range []struct {
		name     string
		consumer bool
		want     []string
	}{
		{"test-auth", true, []string{"key"}},
		{"test-auth", false, nil}, // the route's schema names none
		{"test-limit", false, []string{"redis_password", "auth.token", "nodes.secret", "tags"}},
		{"test-limit", true, []string{"redis_password", "auth.token", "nodes.secret", "tags"}}, // no consumer schema: the schema's
		{"test-a", false, nil},
		{"no-such", false, nil},
	} {
		if d := cmp.Diff(tc.want, r.EncryptFields(tc.name, tc.consumer)); d != "" {
			t.Errorf("%s consumer=%v (-want +got):\n%s", tc.name, tc.consumer, d)
		}
	}
}

// TestEncryptConf: the fields named are encrypted, at every place the
// path reaches; the rest is kept, numbers as written; a configuration
// that names none is the same bytes.
func TestEncryptConf(t *testing.T) {
	r, k := secretRegistry(t)
	raw := json.RawMessage(`{"count":12345678901234567890,"redis_password":"s3cret","auth":{"token":"t"},` +
		`"nodes":[{"secret":"n1","host":"a<b"},{"secret":"n2"},"x"],"tags":{"a":"ta","n":1},"other":"o"}`)
	enc := r.EncryptConf("test-limit", false, raw, k)
	var got map[string]any
	d := json.NewDecoder(bytes.NewReader(enc))
	d.UseNumber()
	if err := d.Decode(&got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"count": json.Number("12345678901234567890"), "redis_password": k.Encrypt("s3cret"),
		"auth":  map[string]any{"token": k.Encrypt("t")},
		"nodes": []any{map[string]any{"secret": k.Encrypt("n1"), "host": "a<b"}, map[string]any{"secret": k.Encrypt("n2")}, "x"},
		"tags":  map[string]any{"a": k.Encrypt("ta"), "n": json.Number("1")}, "other": "o",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("encrypted (-want +got):\n%s", diff)
	}
	// Decrypted, it is the configuration written (members sorted).
	if dec := r.DecryptConf("test-limit", false, enc, k); !jsonEqual(t, dec, raw) {
		t.Errorf("decrypted: %s", dec)
	}
	// Nothing to encrypt, or no keyring: the same bytes.
	same := json.RawMessage(`{"b":1, "a":2}`)
	if got := r.EncryptConf("test-limit", false, same, k); string(got) != string(same) {
		t.Errorf("EncryptConf changed %s into %s", same, got)
	}
	if got := r.EncryptConf("test-limit", false, raw, nil); string(got) != string(raw) {
		t.Errorf("EncryptConf without a keyring changed the configuration: %s", got)
	}
}

// TestDecryptBeforeCheckAndBuild: a registry with the keyring checks,
// builds and indexes the configurations as written in clear, from what
// was stored encrypted; without it, the encrypted value is what the
// plugin sees (and refuses). A value stored in clear is used as it is.
func TestDecryptBeforeCheckAndBuild(t *testing.T) {
	r, k := secretRegistry(t)
	clear := json.RawMessage(`{"redis_password":"s3cret"}`)
	stored := r.EncryptConf("test-limit", false, clear, k)
	if string(stored) == string(clear) {
		t.Fatal("not encrypted")
	}
	if err := r.Check("test-limit", stored); err == nil {
		t.Fatal("a registry without the keyring passed the encrypted password")
	}
	r.SetKeyring(k)
	for _, conf := range []json.RawMessage{stored, clear} {
		if err := r.Check("test-limit", conf); err != nil {
			t.Errorf("Check(%s): %v", conf, err)
		}
		for _, checked := range []bool{false, true} {
			built, err := r.build(map[string]json.RawMessage{"test-limit": conf}, NewLocalEnv(), checked)
			if err != nil {
				t.Fatalf("build(%s, checked %v): %v", conf, checked, err)
			}
			if got := built[0].Instance.(*fakeInstance).conf; !jsonEqual(t, json.RawMessage(got), clear) {
				t.Errorf("build(%s, checked %v) built from %s", conf, checked, got)
			}
		}
	}

	// A consumer's key, stored encrypted, finds its consumer by the key in
	// clear, checked or trusted.
	jack := &Consumer{Username: "jack", Plugins: map[string]json.RawMessage{
		"test-auth": r.EncryptConf("test-auth", true, json.RawMessage(`{"key":"k-jack"}`), k)}}
	if string(jack.Plugins["test-auth"]) == `{"key":"k-jack"}` {
		t.Fatal("consumer key not encrypted")
	}
	for _, checked := range []bool{false, true} {
		x, err := r.IndexConsumersChecked([]*Consumer{jack}, nil, checked)
		if err != nil {
			t.Fatal(err)
		}
		if x.ByCredential("test-auth", []byte("k-jack")) != jack {
			t.Errorf("checked %v: the consumer is not found by its key in clear", checked)
		}
	}
}

// TestDecryptRotated: a keyring rotated (a new key first, the old one
// after) reads the configurations the old one encrypted.
func TestDecryptRotated(t *testing.T) {
	r, old := secretRegistry(t)
	stored := r.EncryptConf("test-limit", false, json.RawMessage(`{"redis_password":"s3cret"}`), old)
	rotated, err := keyring.Parse(append([]string{"0123456789abcdef0123456789abcdef"}, keyring.Default...))
	if err != nil {
		t.Fatal(err)
	}
	r.SetKeyring(rotated)
	if err := r.Check("test-limit", stored); err != nil {
		t.Errorf("rotated keyring: %v", err)
	}
}

func jsonEqual(t *testing.T, a, b json.RawMessage) bool {
	t.Helper()
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return cmp.Equal(x, y)
}
