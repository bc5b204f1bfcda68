package plugins

import (
	"encoding/json"
	"errors"
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

// withData is a test authentication plugin whose credential is "key" and
// whose CredentialData is its "secret"; an empty secret is refused.
type withData struct{ keyed }

func (withData) CredentialData(raw json.RawMessage) (any, error) {
	var c struct{ Secret string }
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	if c.Secret == "" {
		return nil, errors.New("no secret")
	}
	return []byte(c.Secret), nil
}

// TestCredentialData: the index keeps what CredentialData made of each
// credential's configuration, the consumer's and the credential objects',
// and Find returns it with the consumer and the credential object's id
// without allocating.
func TestCredentialData(t *testing.T) {
	r := NewRegistry(testTable)
	r.Register("test-auth", withData{})
	r.Register("test-limit", keyed{})
	jack := &Consumer{Username: "jack", Plugins: map[string]json.RawMessage{
		"test-auth": json.RawMessage(`{"key":"k-jack","secret":"s-jack"}`), "test-limit": json.RawMessage(`{"key":"l-jack"}`)}}
	x, err := r.IndexConsumers([]*Consumer{jack}, []Credential{
		{Username: "jack", ID: "c1", Plugins: map[string]json.RawMessage{"test-auth": json.RawMessage(`{"key":"k-c1","secret":"s-c1"}`)}},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		plugin, cred string
		want         *Consumer
		credID       string
		data         string
	}{
		{"test-auth", "k-jack", jack, "", "s-jack"},
		{"test-auth", "k-c1", jack, "c1", "s-c1"},
		{"test-auth", "k-none", nil, "", ""},
		{"test-limit", "l-jack", jack, "", ""}, // no CredentialDataPlugin
	} {
		f := x.Find(tc.plugin, []byte(tc.cred))
		got, _ := f.Data.([]byte)
		if f.Consumer != tc.want || f.CredentialID != tc.credID || string(got) != tc.data || (tc.data == "") != (f.Data == nil) {
			t.Errorf("Find(%s, %s) = %+v, want %v, %q, %q", tc.plugin, tc.cred, f, tc.want, tc.credID, tc.data)
		}
	}
	key := []byte("k-c1")
	if n := testing.AllocsPerRun(100, func() { _ = x.Find("test-auth", key) }); n != 0 {
		t.Errorf("Find allocates %.1f times", n)
	}
	// A CredentialData error refuses the consumer, naming it and the plugin.
	_, err = r.IndexConsumers([]*Consumer{{Username: "bob", Plugins: map[string]json.RawMessage{
		"test-auth": json.RawMessage(`{"key":"k-bob"}`)}}}, nil)
	if err == nil || err.Error() != "consumer bob: plugin test-auth: no secret" {
		t.Errorf("IndexConsumers: %v", err)
	}
}

// checkedConsumer is a test authentication plugin whose consumer
// configurations are checked beyond their schema: "key" may not be "bad".
type checkedConsumer struct{ consumerSchema }

func (checkedConsumer) CheckConsumer(raw json.RawMessage) error {
	var c struct{ Key string }
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if c.Key == "bad" {
		return errors.New(`property "key" is bad`)
	}
	return nil
}

// TestConsumerCheck: a ConsumerCheckPlugin's CheckConsumer runs after the
// consumer schema, for consumers only, and refuses with Check's message
// form, when written and when indexed.
func TestConsumerCheck(t *testing.T) {
	r := NewRegistry(testTable)
	r.Register("test-auth", checkedConsumer{})
	for _, tc := range []struct {
		consumer bool
		conf     string
		want     string
	}{
		{true, `{"key":"good"}`, ""},
		{true, `{"key":"bad"}`, `failed to check the configuration of plugin test-auth err: property "key" is bad`},
		{true, `{}`, `failed to check the configuration of plugin test-auth err: property "key" is required`},
		{false, `{"key":"bad"}`, ""},
	} {
		check := r.Check
		if tc.consumer {
			check = r.CheckConsumer
		}
		got := ""
		if err := check("test-auth", json.RawMessage(tc.conf)); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("consumer %v %s: %q, want %q", tc.consumer, tc.conf, got, tc.want)
		}
	}
	_, err := r.IndexConsumers([]*Consumer{{Username: "jack", Plugins: map[string]json.RawMessage{"test-auth": json.RawMessage(`{"key":"bad"}`)}}}, nil)
	if err == nil || err.Error() != `consumer jack: failed to check the configuration of plugin test-auth err: property "key" is bad` {
		t.Errorf("IndexConsumers: %v", err)
	}
}
