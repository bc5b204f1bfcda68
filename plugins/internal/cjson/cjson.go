// Package cjson writes JSON as APISIX's encoder (lua-cjson) writes it, for
// the bodies plugins answer with ({"error_msg":"..."}), and a plugin
// configuration's canonical JSON.
package cjson

import "encoding/json"

// AppendString appends s as a JSON string the way APISIX's encoder
// (lua-cjson) writes it: '/' escaped too, other bytes as they are.
func AppendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '/':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			if c < 0x20 || c == 0x7f {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
				continue
			}
			b = append(b, c)
		}
	}
	return append(b, '"')
}

// Canonical is a configuration's JSON with its members sorted (and its
// spacing dropped): what the limit plugins hash into their counters' keys,
// so that a reload that leaves a configuration alone keeps its counters,
// and what limit-count's groups compare.
func Canonical(raw json.RawMessage) (string, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", err
	}
	b, err := json.Marshal(v)
	return string(b), err
}
