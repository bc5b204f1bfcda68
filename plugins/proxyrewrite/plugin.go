package proxyrewrite

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"coregate/plugins"
	"coregate/plugins/internal/resub"
)

// Name is the plugin's wire name.
const Name = "proxy-rewrite"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is proxy-rewrite's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin       = Plugin{}
	_ plugins.RewritePhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration that passed the schema.
type conf struct {
	URI      *string         `json:"uri"`
	Method   string          `json:"method"`
	RegexURI []string        `json:"regex_uri"`
	Host     *string         `json:"host"`
	Headers  json.RawMessage `json:"headers"`
	Unsafe   bool            `json:"use_real_request_uri_unsafe"`
}

// Check implements plugins.Plugin, as proxy-rewrite.lua's check_schema:
// regex_uri comes in pairs whose pattern compiles and whose template
// reads, the legacy headers form has valid names and values. Beyond
// APISIX, a pattern must be one Go's RE2 compiles, and a header name of
// the add/set/remove form must be a valid field name too (APISIX would
// fail such a request at run time).
func (Plugin) Check(raw json.RawMessage) error {
	var c conf
	if err := json.Unmarshal(raw, &c); err != nil {
		return err
	}
	if _, err := compileRules(c.RegexURI); err != nil {
		return err
	}
	_, err := parseHeaders(c.Headers)
	return err
}

func compileRules(pairs []string) ([]*resub.Rule, error) {
	if len(pairs)%2 != 0 {
		//lint:ignore ST1005 APISIX's message, which clients match on
		return nil, errors.New("The length of regex_uri should be an even number")
	}
	var rules []*resub.Rule
	for i := 0; i < len(pairs); i += 2 {
		pattern, template := pairs[i], pairs[i+1]
		r, err := resub.Compile(pattern, template)
		if err != nil {
			return nil, fmt.Errorf("invalid regex_uri(%s, %s): %v", pattern, template, err)
		}
		rules = append(rules, r)
	}
	return rules, nil
}

// headerOps are the header edits, in APISIX's order (add, set, remove),
// each list in the configuration's order.
type headerOps struct {
	add, set []headerOp
	remove   []string
}

// headerOp is one header of add or set: its values, several for an
// array.
type headerOp struct {
	name   string
	values []value
	array  bool
}

// value is one header value: lit when it holds no '$', else tpl, resolved
// per request.
type value struct {
	lit []byte
	tpl []byte
}

// parseHeaders reads "headers" in either of its forms, in the order
// written.
func parseHeaders(raw json.RawMessage) (headerOps, error) {
	var ops headerOps
	if len(raw) == 0 || string(raw) == "null" {
		return ops, nil
	}
	members, err := orderedObject(raw)
	if err != nil {
		return ops, err
	}
	newForm := false
	for _, m := range members {
		if (m.name == "add" || m.name == "set") && m.raw[0] == '{' || m.name == "remove" && m.raw[0] == '[' {
			newForm = true
		}
	}
	if !newForm {
		// check_set_headers.
		for _, m := range members {
			if m.name == "" {
				return ops, errors.New("invalid field length in header")
			}
			if !validField(m.name) {
				return ops, errors.New("invalid field character in header")
			}
			v, _, err := scalar(m.raw)
			if err != nil {
				return ops, errors.New("invalid type as header value")
			}
			if !validValue(v) {
				return ops, errors.New("invalid value character in header")
			}
			ops.set = append(ops.set, headerOp{name: m.name, values: []value{newValue(v)}})
		}
		return ops, nil
	}
	for _, m := range members {
		switch m.name {
		case "add", "set":
			fields, err := orderedObject(m.raw)
			if err != nil {
				return ops, err
			}
			for _, f := range fields {
				if f.name == "" || !validField(f.name) {
					return ops, errors.New("invalid field character in header")
				}
				op := headerOp{name: f.name}
				if f.raw[0] == '[' {
					op.array = true
					var items []json.RawMessage
					if err := json.Unmarshal(f.raw, &items); err != nil {
						return ops, err
					}
					for _, it := range items {
						v, _, err := scalar(it)
						if err != nil {
							return ops, errors.New("invalid type as header value")
						}
						op.values = append(op.values, newValue(v))
					}
				} else {
					v, _, err := scalar(f.raw)
					if err != nil {
						return ops, errors.New("invalid type as header value")
					}
					op.values = []value{newValue(v)}
				}
				if m.name == "add" {
					ops.add = append(ops.add, op)
				} else {
					ops.set = append(ops.set, op)
				}
			}
		case "remove":
			var names []string
			if err := json.Unmarshal(m.raw, &names); err != nil {
				return ops, err
			}
			for _, n := range names {
				if n == "" || !validField(n) {
					return ops, errors.New("invalid field character in header")
				}
			}
			ops.remove = names
		}
	}
	return ops, nil
}

func newValue(v string) value {
	if bytes.IndexByte([]byte(v), '$') >= 0 {
		return value{tpl: []byte(v)}
	}
	// Non-nil when empty: add sends an empty header, set removes it.
	return value{lit: escapeControls(make([]byte, 0, len(v)), []byte(v))}
}

// scalar is a header value as Lua's tostring writes it: a string as is, a
// number as "%.14g".
func scalar(raw json.RawMessage) (string, bool, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return "", false, err
	}
	switch v := v.(type) {
	case string:
		return v, false, nil
	case float64:
		return strconv.FormatFloat(v, 'g', 14, 64), true, nil
	}
	return "", false, errors.New("not a string or a number")
}

// validField is core.utils.validate_header_field: '!' to '~' but ':'.
func validField(f string) bool {
	for i := 0; i < len(f); i++ {
		if b := f[i]; b <= 32 || b >= 127 || b == ':' {
			return false
		}
	}
	return true
}

// validValue is core.utils.validate_header_value: no control character
// nor byte above '~'.
func validValue(v string) bool {
	for i := 0; i < len(v); i++ {
		if b := v[i]; b < 32 || b >= 127 {
			return false
		}
	}
	return true
}

// member is one member of a JSON object.
type member struct {
	name string
	raw  json.RawMessage
}

// orderedObject reads a JSON object's members in the order written.
func orderedObject(raw json.RawMessage) ([]member, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil, errors.New("not an object")
	}
	var out []member
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		out = append(out, member{name: t.(string), raw: v})
	}
	return out, nil
}

// ShareInstances implements plugins.Shareable: Build reads its
// configuration alone, and an instance's scratch (the target, the
// captures, the values) serves one Rewrite call, whose Ctx copies what it
// is given.
func (Plugin) ShareInstances() {}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	var c conf
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	in := &instance{unsafe: c.Unsafe}
	if c.Host != nil {
		in.host = []byte(*c.Host)
	}
	if c.Method != "" {
		in.method = []byte(c.Method)
	}
	if c.URI != nil {
		in.uri = []byte(*c.URI)
		in.vars.intern(in.uri)
	} else if c.RegexURI != nil {
		rules, err := compileRules(c.RegexURI)
		if err != nil {
			return nil, err
		}
		in.rules = rules
		for _, r := range rules {
			if n := 2 * (r.NumSubexp() + 1); n > in.ncaps {
				in.ncaps = n
			}
		}
	}
	ops, err := parseHeaders(c.Headers)
	if err != nil {
		return nil, err
	}
	in.headers = ops
	templated := false
	for _, op := range append(append([]headerOp(nil), ops.add...), ops.set...) {
		for _, v := range op.values {
			if v.tpl != nil {
				// The names written; a capture may bring others.
				in.vars.intern(v.tpl)
				templated = true
			}
		}
	}
	in.vars.static = len(in.vars.names)
	in.caps = make([]int, 0, in.ncaps)
	if templated {
		// resolve's buffers, for a header value with a variable or a
		// capture only: most instances write none (a plain uri), and a
		// worker keeps an instance per route, 128 bytes each.
		in.val, in.val2 = make([]byte, 0, 64), make([]byte, 0, 64) // never nil: an empty value is one
	}
	return in, nil
}
