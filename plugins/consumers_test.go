package plugins

import (
	"encoding/json"
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
