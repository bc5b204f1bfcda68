package adminapi

import (
	"bytes"
	"encoding/json"
	"strings"
)

// A request body or a stored value is handled as the tree encoding/json
// gives with UseNumber: map[string]any, []any, string, json.Number, bool,
// nil. Numbers keep their written text, so an id 1 stays 1 and a large
// integer is not rounded through float64.

// decodeJSON parses one JSON document. A malformed one gives APISIX's
// "invalid request body: …" text, with encoding/json's description.
func decodeJSON(b []byte) (any, error) {
	if !json.Valid(b) {
		var x any
		err := json.Unmarshal(b, &x)
		msg := "malformed JSON"
		if err != nil {
			msg = strings.TrimPrefix(err.Error(), "json: ")
		}
		return nil, badRequest("invalid request body: " + msg)
	}
	d := json.NewDecoder(bytes.NewReader(b))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return nil, badRequest("invalid request body: " + strings.TrimPrefix(err.Error(), "json: "))
	}
	return v, nil
}

// encodeJSON encodes a tree compactly, members sorted, HTML characters
// unescaped. A tree from decodeJSON always encodes.
func encodeJSON(v any) []byte {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return []byte("null")
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
}

// idText is the text of an id-like value as Lua's tostring gives it for
// the types an id may have (string, number); ok is false for any other.
func idText(v any) (string, bool) {
	switch x := v.(type) {
	case string:
		return x, true
	case json.Number:
		return x.String(), true
	}
	return "", false
}

// truthy reports whether a member is set in Lua's sense: present and
// neither false nor absent (JSON null decodes to a value Lua finds true).
func truthy(m map[string]any, k string) bool {
	v, ok := m[k]
	if !ok {
		return false
	}
	b, isBool := v.(bool)
	return !isBool || b
}

// pluginConfs returns the members of an object's "plugins", each encoded;
// nil when there is no plugins object.
func pluginConfs(obj map[string]any) map[string]json.RawMessage {
	p, ok := obj["plugins"].(map[string]any)
	if !ok {
		return nil
	}
	out := make(map[string]json.RawMessage, len(p))
	for name, conf := range p {
		out[name] = encodeJSON(conf)
	}
	return out
}

// decodeStored decodes a stored value as an object; ok is false for a
// value that is not one (written to the store by something else).
func decodeStored(b []byte) (map[string]any, bool) {
	v, err := decodeJSON(b)
	if err != nil {
		return nil, false
	}
	m, ok := v.(map[string]any)
	return m, ok
}
