package requestvalidation

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/plugins/internal/uriargs"
)

// Name is the plugin's wire name.
const Name = "request-validation"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is request-validation's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin       = Plugin{}
	_ plugins.RewritePhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// conf is a configuration, with APISIX's defaults.
type conf struct {
	HeaderSchema   json.RawMessage `json:"header_schema"`
	BodySchema     json.RawMessage `json:"body_schema"`
	MaxReqBodySize int64           `json:"max_req_body_size"`
	RejectedCode   int             `json:"rejected_code"`
	RejectedMsg    *string         `json:"rejected_msg"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{MaxReqBodySize: 64 << 20, RejectedCode: 400}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// fastKeywords are the keywords at header_schema's top that the request
// path judges itself (with simple properties): those that name the
// headers they judge. With others (additionalProperties,
// patternProperties, minProperties, combinators…) every request's headers
// go to the validator.
var fastKeywords = []string{"type", "properties", "required", "title", "description", "$schema", "$comment", "default", "examples"}

// Check implements plugins.Plugin: header_schema and body_schema must be
// JSON Schemas.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	_, err = compile(c)
	return err
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in, err := compile(c)
	if err != nil {
		return nil, err
	}
	in.code = c.RejectedCode
	if c.RejectedMsg != nil {
		in.rejected = []byte(*c.RejectedMsg)
	}
	if in.body != nil {
		return &bodyInstance{instance: in, max: c.MaxReqBodySize}, nil
	}
	return in, nil
}

// compile builds an instance's checks from a configuration.
func compile(c conf) (*instance, error) {
	in := &instance{}
	if c.BodySchema != nil {
		sch, err := spec.CompileSchema(Name+".body_schema", c.BodySchema)
		if err != nil {
			return nil, fmt.Errorf("body_schema: %w", err)
		}
		in.body = sch
	}
	if c.HeaderSchema == nil {
		return in, nil
	}
	if err := in.compileHeaders(c.HeaderSchema); err != nil {
		return nil, err
	}
	return in, nil
}

// compileHeaders builds the header checks of header_schema.
func (in *instance) compileHeaders(headerSchema json.RawMessage) error {
	var root map[string]json.RawMessage
	if err := json.Unmarshal(headerSchema, &root); err != nil {
		return fmt.Errorf("header_schema: %w", err)
	}
	sch, err := spec.CompileSchema(Name+".header_schema", headerSchema)
	if err != nil {
		return fmt.Errorf("header_schema: %w", err)
	}
	var props map[string]json.RawMessage
	var required []string
	if p, ok := root["properties"]; ok {
		if err := json.Unmarshal(p, &props); err != nil {
			return fmt.Errorf("header_schema: properties: %w", err)
		}
	}
	if r, ok := root["required"]; ok {
		if err := json.Unmarshal(r, &required); err != nil {
			return fmt.Errorf("header_schema: required: %w", err)
		}
	}
	in.schema, in.fast = sch, true
	for k := range root {
		if !slices.Contains(fastKeywords, k) {
			in.fast = false
		}
	}
	if t, ok := root["type"]; ok && string(bytes.TrimSpace(t)) != `"object"` {
		in.fast = false // every request is refused: the library says why
	}
	names := slices.Sorted(maps.Keys(props))
	for _, r := range required {
		if !slices.Contains(names, r) {
			names = append(names, r)
		}
	}
	for _, n := range names {
		f := field{name: n, required: slices.Contains(required, n), maxLen: -1}
		if alt := strings.ReplaceAll(strings.ToLower(n), "_", "-"); alt != strings.ToLower(n) {
			f.alt = alt
		}
		if p, ok := props[n]; ok {
			if !f.simple(p) {
				in.fast = false
			}
		}
		in.fields = append(in.fields, f)
	}
	return nil
}

// field is one header the schema names (in properties or required).
type field struct {
	name     string // as the schema writes it
	alt      string // lower-case, '_' as '-', when that differs: nginx's fallback lookup
	required bool
	// The property's schema, when it is simple (a string's type, enum,
	// length): what the request path checks without the library.
	enum           [][]byte // nil: any value
	minLen, maxLen int      // in characters; maxLen -1: none
}

// simple reads a property's schema into f when it only says what a single
// string header's value may be; false when it says more.
func (f *field) simple(raw json.RawMessage) bool {
	var s map[string]json.RawMessage
	if json.Unmarshal(raw, &s) != nil {
		return false
	}
	for k, v := range s {
		switch k {
		case "title", "description", "$comment", "default", "examples":
		case "type":
			if string(bytes.TrimSpace(v)) != `"string"` {
				return false
			}
		case "enum":
			var e []string
			if json.Unmarshal(v, &e) != nil {
				return false
			}
			f.enum = make([][]byte, len(e))
			for i, x := range e {
				f.enum[i] = []byte(x)
			}
		case "minLength", "maxLength":
			var n int
			if json.Unmarshal(v, &n) != nil || n < 0 {
				return false
			}
			if k == "minLength" {
				f.minLen = n
			} else {
				f.maxLen = n
			}
		default:
			return false
		}
	}
	return true
}

// instance is one configuration, built once and only read afterwards:
// safe for concurrent use.
type instance struct {
	schema *spec.Schema // header_schema; nil without one
	body   *spec.Schema // body_schema; nil without one
	fields []field
	// fast: every field is simple, and the request path judges the
	// headers itself, allocating nothing, until it finds a fault.
	fast     bool
	code     int
	rejected []byte // rejected_msg; nil: the validator's message
}

// Rewrite implements plugins.RewritePhase, as request-validation.lua's
// rewrite: headers the schema refuses end the request with
// rejected_code and rejected_msg, or the validator's message.
func (in *instance) Rewrite(c plugins.Ctx) { in.checkHeaders(c) }

// checkHeaders validates the headers; false when it ended the request.
func (in *instance) checkHeaders(c plugins.Ctx) bool {
	if in.schema == nil {
		return true
	}
	if in.fast {
		ok := true
		for i := range in.fields {
			if !in.fields[i].valid(c) {
				ok = false
				break
			}
		}
		if ok {
			return true
		}
		if in.rejected != nil {
			c.Exit(in.code, in.rejected)
			return false
		}
	}
	err := in.validate(c)
	if err == nil {
		return true
	}
	in.refuse(c, err)
	return false
}

// refuse ends the request with rejected_code and rejected_msg, else err's
// message; with neither, the gateway's page for the code (APISIX's exit
// without a body).
func (in *instance) refuse(c plugins.Ctx, err error) {
	switch {
	case in.rejected != nil:
		c.Exit(in.code, in.rejected)
	case err != nil:
		c.Exit(in.code, []byte(err.Error()))
	default:
		c.Exit(in.code, nil)
	}
}

// bodyInstance is a configuration with body_schema: a plugins.BodyReader,
// so that the worker reads the body before the rewrite phase.
type bodyInstance struct {
	*instance
	max int64 // max_req_body_size
}

var (
	_ plugins.RewritePhase = (*bodyInstance)(nil)
	_ plugins.BodyReader   = (*bodyInstance)(nil)
)

// BodyLimit implements plugins.BodyReader: max_req_body_size.
func (in *bodyInstance) BodyLimit() int64 { return in.max }

// Rewrite implements plugins.RewritePhase: the headers, then the body, as
// request-validation.lua's rewrite. A request without a body, with one
// over max_req_body_size or with more than one Content-Type is refused
// with rejected_code and rejected_msg; a body that is not JSON (or, with
// a Content-Type of application/x-www-form-urlencoded, a form), or that
// body_schema refuses, with the decoder's or the validator's message when
// there is no rejected_msg. It allocates: the body is parsed.
func (in *bodyInstance) Rewrite(c plugins.Ctx) {
	if !in.checkHeaders(c) {
		return
	}
	body := c.RequestBody()
	if body == nil || int64(len(body)) > in.max {
		in.refuse(c, nil)
		return
	}
	if _, dup := c.HeaderAt("content-type", 1); dup {
		in.refuse(c, nil)
		return
	}
	raw := body
	if hasPrefixFold(c.Header("content-type"), "application/x-www-form-urlencoded") {
		var err error
		if raw, err = json.Marshal(uriargs.Decode(body)); err != nil {
			in.refuse(c, err)
			return
		}
	} else if err := checkJSON(body); err != nil {
		in.refuse(c, err)
		return
	}
	if err := in.body.Validate(raw); err != nil {
		in.refuse(c, err)
	}
}

// hasPrefixFold reports whether b begins with prefix, a lower-case ASCII
// string, in any case.
func hasPrefixFold(b []byte, prefix string) bool {
	return len(b) >= len(prefix) && strings.EqualFold(string(b[:len(prefix)]), prefix)
}

// checkJSON refuses what is not one JSON value, and, since the upstream
// gets the body as it came rather than the value validated (APISIX sends
// its own encoding of it), a body two parsers could read differently: one
// with invalid UTF-8, or an object with a member named twice.
func checkJSON(b []byte) error {
	var v any
	if err := json.Unmarshal(b, &v); err != nil {
		return errors.New(strings.TrimPrefix(err.Error(), "json: "))
	}
	if !utf8.Valid(b) {
		return errors.New("invalid UTF-8 in the body")
	}
	return noDuplicates(json.NewDecoder(bytes.NewReader(b)))
}

// noDuplicates reads one JSON value from d and fails on an object member
// named twice, at any depth.
func noDuplicates(d *json.Decoder) error {
	t, err := d.Token()
	if err != nil {
		return err
	}
	switch t {
	case json.Delim('{'):
		seen := map[string]bool{}
		for d.More() {
			k, err := d.Token()
			if err != nil {
				return err
			}
			name, _ := k.(string)
			if seen[name] {
				return fmt.Errorf("duplicate member %q in the body", name)
			}
			seen[name] = true
			if err := noDuplicates(d); err != nil {
				return err
			}
		}
		_, err = d.Token()
	case json.Delim('['):
		for d.More() {
			if err := noDuplicates(d); err != nil {
				return err
			}
		}
		_, err = d.Token()
	}
	return err
}

// named reports whether the schema names a header k, as written.
func (in *instance) named(k string) bool {
	for i := range in.fields {
		if in.fields[i].name == k {
			return true
		}
	}
	return false
}

// lookup is the header name f reads: its name, else its alt when only
// that is present (ngx.req.get_headers' metatable).
func (f *field) lookup(c plugins.Ctx) (string, bool) {
	if _, ok := c.HeaderAt(f.name, 0); ok {
		return f.name, true
	}
	if f.alt != "" {
		if _, ok := c.HeaderAt(f.alt, 0); ok {
			return f.alt, true
		}
	}
	return "", false
}

// valid judges a simple field: false when the library is needed, for a
// fault or a repeated header (an array).
func (f *field) valid(c plugins.Ctx) bool {
	name, ok := f.lookup(c)
	if !ok {
		return !f.required
	}
	if _, dup := c.HeaderAt(name, 1); dup {
		return false
	}
	v, _ := c.HeaderAt(name, 0)
	if f.enum != nil {
		found := false
		for _, e := range f.enum {
			if bytes.Equal(e, v) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if f.minLen > 0 || f.maxLen >= 0 {
		n := utf8.RuneCount(v)
		if n < f.minLen || f.maxLen >= 0 && n > f.maxLen {
			return false
		}
	}
	return true
}

// validate validates the request's headers with the library, as the
// object ngx.req.get_headers makes of them: names in lower case, values
// strings, a repeated header's an array of them; a header the schema
// names (in properties or required) is under the schema's spelling of its
// name, as the Lua table's lookup finds it. Its error has APISIX's
// message. It allocates.
func (in *instance) validate(c plugins.Ctx) error {
	obj := map[string]any{}
	for i := 0; ; i++ {
		name, value, ok := c.RequestHeaderAt(i)
		if !ok {
			break
		}
		k := strings.ToLower(string(name))
		switch prev := obj[k].(type) {
		case nil:
			obj[k] = string(value)
		case []any:
			obj[k] = append(prev, string(value))
		case string:
			obj[k] = []any{prev, string(value)}
		}
	}
	for i := range in.fields {
		f := &in.fields[i]
		name, ok := f.lookup(c)
		k := strings.ToLower(name)
		if v, has := obj[k]; ok && has && k != f.name {
			obj[f.name] = v
			if !in.named(k) {
				delete(obj, k)
			}
		}
	}
	raw, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	return in.schema.Validate(raw)
}
