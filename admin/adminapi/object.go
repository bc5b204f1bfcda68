package adminapi

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode/utf8"
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

// checkText refuses a JSON document (one json.Valid accepts) whose
// strings are not Unicode text: bytes that are not UTF-8, or a \u escape
// of a UTF-16 surrogate that is not the first half of a pair followed by
// its second. encoding/json would decode either into U+FFFD, and the
// object stored would not be the one sent. (APISIX's decoder, lua-cjson,
// refuses such an escape, "invalid unicode escape code", and passes bytes
// that are not UTF-8 through untouched, into values no JSON parser need
// accept.)
func checkText(b []byte) *apiError {
	if utf8.Valid(b) && !bytes.Contains(b, []byte(`\u`)) {
		return nil
	}
	inString := false
	for i := 0; i < len(b); {
		c := b[i]
		switch {
		case c >= utf8.RuneSelf:
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n == 1 {
				return badRequest("invalid request body: invalid UTF-8 at offset " + strconv.Itoa(i))
			}
			i += n
			continue
		case c == '"':
			inString = !inString
		case c == '\\' && inString:
			if b[i+1] != 'u' { // the document is valid: an escape follows
				i += 2
				continue
			}
			r := hex4(b[i+2 : i+6])
			switch {
			case r >= 0xd800 && r < 0xdc00:
				if i+12 > len(b) || b[i+6] != '\\' || b[i+7] != 'u' {
					return badEscape(i)
				}
				if low := hex4(b[i+8 : i+12]); low < 0xdc00 || low >= 0xe000 {
					return badEscape(i)
				}
				i += 12
			case r >= 0xdc00 && r < 0xe000:
				return badEscape(i)
			default:
				i += 6
			}
			continue
		}
		i++
	}
	return nil
}

func badEscape(at int) *apiError {
	return badRequest("invalid request body: invalid unicode escape code at offset " + strconv.Itoa(at))
}

// hex4 is the value of four hexadecimal digits (which a valid document's
// \u escape has), -1 for anything else.
func hex4(h []byte) rune {
	if len(h) != 4 {
		return -1
	}
	var r rune
	for _, c := range h {
		switch {
		case c >= '0' && c <= '9':
			r = r<<4 | rune(c-'0')
		case c >= 'a' && c <= 'f':
			r = r<<4 | rune(c-'a'+10)
		case c >= 'A' && c <= 'F':
			r = r<<4 | rune(c-'A'+10)
		default:
			return -1
		}
	}
	return r
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
