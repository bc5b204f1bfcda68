// Package cjson writes JSON as APISIX's encoder (lua-cjson) writes it, for
// the bodies plugins answer with ({"error_msg":"..."}), and a plugin
// configuration's canonical JSON.
package cjson

import (
	"encoding/json"

	"coregate/internal/jsonesc"
)

// AppendString appends s as a JSON string the way APISIX's encoder
// (lua-cjson) writes it: '/' escaped too, other bytes as they are.
func AppendString(b []byte, s string) []byte {
	return jsonesc.AppendQuoted(b, s, jsonesc.CJSON)
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
