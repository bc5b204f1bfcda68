package adminapi

import (
	"testing"

	"coregate/admin/spec"
)

// TestIDOf: idOf reads the id of an object as spec.RawID reads it from
// the object's whole encoding, for every kind of id a body can carry.
func TestIDOf(t *testing.T) {
	for _, body := range []string{
		`{"id":"r1","uri":"/a"}`, `{"id":"a.b-c_d"}`, `{"id":""}`, `{"id":"ü\u2028\"x\\"}`,
		`{"id":1}`, `{"id":1.0}`, `{"id":1e2}`, `{"id":-3}`, `{"id":0}`, `{"id":1.5}`,
		`{"id":9223372036854775807}`, `{"id":9223372036854775808}`, `{"id":00}`,
		`{"id":true}`, `{"id":null}`, `{"id":{}}`, `{"id":[1]}`, `{"uri":"/no-id"}`, `{}`,
	} {
		v, err := decodeJSON([]byte(body))
		if err != nil {
			// A body the Admin API refuses has no id to read.
			continue
		}
		obj := v.(map[string]any)
		want := spec.RawID(encodeJSON(obj), "id").String()
		if got := idOf(obj); got != want {
			t.Errorf("%s: idOf %q, RawID of the whole object %q", body, got, want)
		}
	}
	if got := idOf(nil); got != spec.RawID(encodeJSON(map[string]any(nil)), "id").String() {
		t.Errorf("nil object: idOf %q", got)
	}
}
