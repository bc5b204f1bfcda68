package plugins

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// withMetadata is a test plugin with a metadata schema.
type withMetadata struct{ fake }

func (withMetadata) MetadataSchema() []byte {
	return []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"additionalProperties":false}`)
}

// TestMetadata: plugin metadata is checked against the plugin's metadata
// schema without its id, any object passes for a plugin without one, and
// IndexMetadata gives each plugin's object by name, leaving out those of
// plugins not registered.
func TestMetadata(t *testing.T) {
	r := NewRegistry(testTable)
	r.Register("test-a", withMetadata{})
	r.Register("test-b", fake{})

	if err := r.CheckMetadata("test-a", json.RawMessage(`{"n":1}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.CheckMetadata("test-a", json.RawMessage(`{"n":"x"}`)); err == nil || !strings.Contains(err.Error(), `property "n" validation failed`) {
		t.Fatalf("bad metadata: %v", err)
	}
	if err := r.CheckMetadata("test-b", json.RawMessage(`{"anything":[1]}`)); err != nil {
		t.Fatalf("a plugin without a metadata schema: %v", err)
	}
	if err := r.CheckMetadata("test-b", json.RawMessage(`[1]`)); err == nil {
		t.Fatal("a plugin without a metadata schema takes a list")
	}
	if err := r.CheckMetadata("test-unregistered", json.RawMessage(`{}`)); !errors.Is(err, ErrInvalidName) {
		t.Fatalf("unregistered: %v", err)
	}
	if doc, ok := r.MetadataSchema("test-a"); !ok || !strings.Contains(string(doc), `"additionalProperties"`) {
		t.Fatalf("MetadataSchema: %s %v", doc, ok)
	}

	s, err := r.IndexMetadata([]json.RawMessage{
		json.RawMessage(`{"id":"test-a","n":2}`),
		json.RawMessage(`{"id":"test-unregistered","x":1}`),
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := string(s.Of("test-a")); got != `{"n":2}` {
		t.Fatalf("test-a: %s", got)
	}
	if s.Of("test-unregistered") != nil || s.Of("test-b") != nil {
		t.Fatal("metadata of a plugin not registered, or not written")
	}
	if _, err := r.IndexMetadata([]json.RawMessage{json.RawMessage(`{"id":"test-a","n":"x"}`)}); err == nil ||
		!strings.Contains(err.Error(), "plugin_metadata test-a: invalid configuration: ") {
		t.Fatalf("bad metadata: %v", err)
	}
	if _, err := r.IndexMetadata([]json.RawMessage{json.RawMessage(`{"n":1}`)}); err == nil {
		t.Fatal("metadata without a plugin name")
	}
	if s, err := r.IndexMetadata(nil); s != nil || err != nil || s.Of("test-a") != nil {
		t.Fatalf("none: %v %v", s, err)
	}
}
