package plugins

import (
	"encoding/json"
	"strings"
	"testing"
)

// keyed is a test authentication plugin: its credential is "key".
type keyed struct{ fake }

func (keyed) Credential(raw json.RawMessage) (string, error) {
	var c struct{ Key string }
	err := json.Unmarshal(raw, &c)
	return c.Key, err
}

func TestIndexConsumers(t *testing.T) {
	r := NewRegistry(testTable)
	r.Register("test-auth", keyed{})
	r.Register("test-limit", fake{})
	jack := &Consumer{Username: "jack", Plugins: map[string]json.RawMessage{
		"test-auth": json.RawMessage(`{"key":"k-jack"}`), "test-limit": json.RawMessage(`{"key":"not a credential"}`)}}
	bob := &Consumer{Username: "bob"}
	x, err := r.IndexConsumers([]*Consumer{jack, bob}, []Credential{
		{Username: "bob", ID: "c1", Plugins: map[string]json.RawMessage{"test-auth": json.RawMessage(`{"key":"k-bob"}`)}},
		{Username: "ghost", ID: "c2", Plugins: map[string]json.RawMessage{"test-auth": json.RawMessage(`{"key":"k-ghost"}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plugin, cred string
		want         *Consumer
	}{
		{"test-auth", "k-jack", jack},
		{"test-auth", "k-bob", bob},
		{"test-auth", "k-ghost", nil}, // its consumer does not exist
		{"test-limit", "not a credential", nil},
		{"test-auth", "k-none", nil},
		{"unknown", "k-jack", nil},
	} {
		if got := x.ByCredential(tc.plugin, []byte(tc.cred)); got != tc.want {
			t.Errorf("ByCredential(%s, %s) = %v, want %v", tc.plugin, tc.cred, got, tc.want)
		}
	}
	if x.ByName("bob") != bob || x.ByName("nobody") != nil || x.Len() != 2 {
		t.Errorf("ByName or Len wrong")
	}
	key := []byte("k-bob")
	if n := testing.AllocsPerRun(100, func() { _ = x.ByCredential("test-auth", key) }); n != 0 {
		t.Errorf("ByCredential allocates %.1f times", n)
	}

	_, err = r.IndexConsumers([]*Consumer{jack, bob}, []Credential{
		{Username: "bob", ID: "c1", Plugins: map[string]json.RawMessage{"test-auth": json.RawMessage(`{"key":"k-jack"}`)}},
	})
	if err == nil || err.Error() != "duplicate key of plugin test-auth found with consumer: jack" {
		t.Errorf("duplicate credential: err = %v", err)
	}
}

// consumerSchema is a test authentication plugin with a consumer schema
// of its own, as key-auth's: {"key"} required on consumers, not on routes.
type consumerSchema struct{ keyed }

func (consumerSchema) ConsumerSchema() []byte {
	return []byte(`{"type":"object","properties":{"key":{"type":"string"}},"required":["key"]}`)
}

func TestCheckConsumer(t *testing.T) {
	r := NewRegistry(testTable)
	r.Register("test-auth", consumerSchema{})
	r.Register("test-limit", fake{})
	for _, tc := range []struct {
		consumer     bool
		plugin, conf string
		want         string
	}{
		{false, "test-auth", `{}`, ""},
		{true, "test-auth", `{}`, `failed to check the configuration of plugin test-auth err: property "key" is required`},
		{true, "test-auth", `{"key":"k"}`, ""},
		// Without a consumer schema, a consumer's configuration is
		// checked as a route's, Check included.
		{true, "test-limit", `{}`, ""},
		{true, "test-limit", `{"bad":1}`, `failed to check the configuration of plugin test-limit err: property "bad" is not allowed`},
		{true, "nope", `{}`, `unknown plugin [nope]`},
	} {
		check := r.Check
		if tc.consumer {
			check = r.CheckConsumer
		}
		got := ""
		if err := check(tc.plugin, json.RawMessage(tc.conf)); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("consumer %v %s %s: %q, want %q", tc.consumer, tc.plugin, tc.conf, got, tc.want)
		}
	}
	if doc, ok := r.ConsumerSchema("test-auth"); !ok || !strings.Contains(string(doc), `"required":["key"]`) {
		t.Errorf("ConsumerSchema(test-auth) = %s, %v", doc, ok)
	}
	if _, ok := r.ConsumerSchema("test-limit"); ok {
		t.Error("a plugin without a consumer schema has one")
	}
	// Indexing refuses a consumer whose credential fails the consumer schema.
	_, err := r.IndexConsumers([]*Consumer{{Username: "jack", Plugins: map[string]json.RawMessage{"test-auth": json.RawMessage(`{}`)}}}, nil)
	if err == nil || err.Error() != `consumer jack: failed to check the configuration of plugin test-auth err: property "key" is required` {
		t.Errorf("IndexConsumers: %v", err)
	}
}
