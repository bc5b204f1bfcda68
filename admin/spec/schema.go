package spec

import (
	"embed"
	"encoding/json"
	"errors"
	"net/url"
	"path"
	"strconv"
	"strings"
	"sync"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The objects' schemas are JSON Schema documents (draft 7) transcribed from
// APISIX's apisix/schema_def.lua, which is itself JSON Schema evaluated by
// api7's Lua jsonschema. A well-kept library evaluates them; this file
// compiles them once and turns the library's errors into the messages the
// Lua validator gives (translate.go).
//
//go:embed schema/*.json
var schemaFiles embed.FS

// schemaBase is the URL the embedded documents are known by, so that
// "$ref": "defs.json#/definitions/id" resolves between them. Nothing is
// ever fetched from it.
const schemaBase = "https://coregate.invalid/schema/"

// Object kinds with a schema, as ObjectSchema and ValidateObject name them.
const (
	KindRoute        = "route"
	KindService      = "service"
	KindUpstream     = "upstream"
	KindConsumer     = "consumer"
	KindPluginConfig = "plugin_config"
	KindGlobalRule   = "global_rule"
	KindSSL          = "ssl"
	// KindConsumerGroup is a consumer group (`_M.consumer_group`),
	// KindProto a .proto file for grpc-transcode (`_M.proto`).
	KindConsumerGroup = "consumer_group"
	KindProto         = "proto"
)

var objectKinds = []string{KindRoute, KindService, KindUpstream, KindConsumer, KindPluginConfig, KindGlobalRule, KindSSL,
	KindConsumerGroup, KindProto}

// Schema is a compiled JSON Schema that validates with APISIX's messages.
// It is safe for concurrent use.
type Schema struct {
	lib  *jsonschema.Schema
	file string           // the document's file name, for relative $refs
	docs map[string]*jval // documents by file name, this one included
	// bundled is the document with every $ref replaced by its target, as
	// GET /apisix/admin/schema/... answers it; built on first use.
	bundledOnce sync.Once
	bundled     []byte
}

// embedded holds the parsed embedded documents and the object schemas,
// compiled on first use.
var embedded struct {
	once    sync.Once
	docs    map[string]*jval // file name → document, members in written order
	lib     map[string]any   // file name → document as the library reads it
	objects map[string]*Schema
	err     error
}

func loadEmbedded() {
	e := &embedded
	e.docs = map[string]*jval{}
	e.lib = map[string]any{}
	entries, err := schemaFiles.ReadDir("schema")
	if err != nil {
		e.err = err
		return
	}
	for _, ent := range entries {
		b, err := schemaFiles.ReadFile("schema/" + ent.Name())
		if err != nil {
			e.err = err
			return
		}
		v, err := parseJSON(b)
		if err != nil {
			e.err = errors.New("schema/" + ent.Name() + ": " + err.Error())
			return
		}
		e.docs[ent.Name()] = v
		e.lib[ent.Name()] = v.toAny()
	}
	// Each object's schema is evaluated in its bundled form (references
	// replaced by their targets): the same rules, without the cost of
	// following a $ref for every property. Messages are built from the
	// documents as written.
	e.objects = map[string]*Schema{}
	bundled := map[string]any{}
	for _, k := range objectKinds {
		s := &Schema{file: k + ".json", docs: e.docs}
		e.objects[k] = s
		bundled["bundled."+s.file] = s.bundle(e.docs[s.file], s.file, 0).toAny()
	}
	c := newCompiler(bundled)
	for _, s := range e.objects {
		if s.lib, err = c.Compile(schemaBase + "bundled." + s.file); err != nil {
			e.err = err
			return
		}
	}
}

// newCompiler returns a compiler that knows the embedded documents (and
// extra, by file name).
func newCompiler(extra map[string]any) *jsonschema.Compiler {
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft7)
	c.AssertFormat()
	for name, doc := range embedded.lib {
		_ = c.AddResource(schemaBase+name, doc) // names are unique
	}
	for name, doc := range extra {
		_ = c.AddResource(schemaBase+name, doc)
	}
	return c
}

// objectSchema returns the compiled schema of an object kind. The
// embedded documents are part of the binary and tested, so a failure to
// compile them is a build defect: it panics.
func objectSchema(kind string) *Schema {
	embedded.once.Do(loadEmbedded)
	if embedded.err != nil {
		panic("spec: embedded schemas: " + embedded.err.Error())
	}
	return embedded.objects[kind]
}

// ObjectSchema returns the JSON Schema of an object kind (KindRoute, …) as
// one self-contained document, every $ref replaced by its target, as
// APISIX's GET /apisix/admin/schema/{kind} answers it; nil for an unknown
// kind. The slice is shared: callers must not modify it.
func ObjectSchema(kind string) []byte {
	embedded.once.Do(loadEmbedded)
	s := embedded.objects[kind]
	if s == nil {
		return nil
	}
	return s.JSON()
}

// ValidateObject validates raw, an object of the given kind, against its
// schema alone (no cross-field or cross-object checks). The error is a
// *ValidationError with APISIX's text ("invalid configuration: …"), or a
// *SyntaxError.
func ValidateObject(kind string, raw json.RawMessage) error {
	s := objectSchema(kind)
	if s == nil {
		return errors.New("spec: no schema for " + strconv.Quote(kind))
	}
	v, err := parseJSON(raw)
	if err != nil {
		return err
	}
	if e := s.validateTree(v); e != nil {
		return e.prefixed("invalid configuration: ")
	}
	return nil
}

// CompileSchema compiles a JSON Schema document (draft 7 unless it says
// otherwise), for example a plugin's configuration schema. The document
// may refer to the shared definitions ("$ref": "defs.json#/definitions/host").
// name identifies it in errors.
func CompileSchema(name string, schemaJSON []byte) (*Schema, error) {
	embedded.once.Do(loadEmbedded)
	if embedded.err != nil {
		return nil, embedded.err
	}
	v, err := parseJSON(schemaJSON)
	if err != nil {
		return nil, errors.New("schema " + name + ": " + err.Error())
	}
	file := "plugin." + url.PathEscape(name) + ".json" // beside defs.json, named apart from it
	c := newCompiler(map[string]any{file: v.toAny()})
	lib, err := c.Compile(schemaBase + file)
	if err != nil {
		return nil, errors.New("schema " + name + ": " + err.Error())
	}
	docs := make(map[string]*jval, len(embedded.docs)+1)
	for k, d := range embedded.docs {
		docs[k] = d
	}
	docs[file] = v
	return &Schema{lib: lib, file: file, docs: docs}, nil
}

// Validate checks raw against the schema. The error is a *SyntaxError for
// malformed JSON, or a *ValidationError whose Msg is the text APISIX's
// validator gives, without a prefix (the caller adds its own, as APISIX
// does: "invalid configuration: " for objects, "failed to check the
// configuration of plugin NAME err: " for plugins).
func (s *Schema) Validate(raw json.RawMessage) error {
	v, err := parseJSON(raw)
	if err != nil {
		return err
	}
	if e := s.validateTree(v); e != nil {
		return e
	}
	return nil
}

// JSON returns the schema as one self-contained document (every $ref
// replaced by its target). The slice is shared: callers must not modify it.
func (s *Schema) JSON() []byte {
	s.bundledOnce.Do(func() {
		s.bundled = appendJSON(nil, s.bundle(s.docs[s.file], s.file, 0))
	})
	return s.bundled
}

// bundle copies v with $refs replaced by their targets. depth bounds
// recursive schemas (none of the embedded ones is).
func (s *Schema) bundle(v *jval, file string, depth int) *jval {
	if v == nil || depth > 32 {
		return v
	}
	switch v.kind {
	case jObject:
		if r := v.get("$ref"); r != nil && r.kind == jString {
			n := s.resolve(file, r.s)
			return s.bundle(n.v, n.file, depth+1)
		}
		out := &jval{kind: jObject, obj: make([]jmember, 0, len(v.obj))}
		for _, m := range v.obj {
			if m.key == "$schema" && depth > 0 {
				continue
			}
			out.obj = append(out.obj, jmember{key: m.key, val: s.bundle(m.val, file, depth+1)})
		}
		return out
	case jArray:
		out := &jval{kind: jArray, arr: make([]*jval, len(v.arr))}
		for i, e := range v.arr {
			out.arr[i] = s.bundle(e, file, depth+1)
		}
		return out
	}
	return v
}

// validateTree validates a parsed instance. The error's Msg has no prefix.
func (s *Schema) validateTree(v *jval) *ValidationError {
	err := s.lib.Validate(v.toAny())
	if err == nil {
		return nil
	}
	var verr *jsonschema.ValidationError
	if !errors.As(err, &verr) {
		return &ValidationError{Msg: err.Error()}
	}
	return s.translate(verr, v)
}

// snode is a node of a schema document and the file it is in (for
// relative $refs).
type snode struct {
	v    *jval
	file string
}

// deref follows $ref until a schema without one.
func (s *Schema) deref(n snode) snode {
	for i := 0; i < 32 && n.v != nil && n.v.kind == jObject; i++ {
		r := n.v.get("$ref")
		if r == nil || r.kind != jString {
			break
		}
		n = s.resolve(n.file, r.s)
	}
	return n
}

// resolve finds ref ("file.json#/pointer", "#/pointer" or "file.json")
// from a document named file.
func (s *Schema) resolve(file, ref string) snode {
	f, frag, _ := strings.Cut(ref, "#")
	if f == "" {
		f = file
	} else {
		f = path.Join(path.Dir(file), f)
	}
	v := s.docs[f]
	if frag != "" {
		for _, tok := range strings.Split(frag, "/")[1:] {
			tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
			v = v.child(tok)
		}
	}
	return snode{v, f}
}

// child is member k of an object, or item k of an array; nil if absent.
func (v *jval) child(k string) *jval {
	if v == nil {
		return nil
	}
	switch v.kind {
	case jObject:
		return v.get(k)
	case jArray:
		i, err := strconv.Atoi(k)
		if err != nil || i < 0 || i >= len(v.arr) {
			return nil
		}
		return v.arr[i]
	}
	return nil
}

// toAny converts v to the form the schema library reads: maps, slices,
// json.Number, string, bool and nil. Of repeated object members the last
// wins, as in APISIX's JSON decoder.
func (v *jval) toAny() any {
	switch v.kind {
	case jBool:
		return v.b
	case jNumber:
		return json.Number(v.s)
	case jString:
		return v.s
	case jArray:
		a := make([]any, len(v.arr))
		for i, e := range v.arr {
			a[i] = e.toAny()
		}
		return a
	case jObject:
		m := make(map[string]any, len(v.obj))
		for _, mem := range v.obj {
			m[mem.key] = mem.val.toAny()
		}
		return m
	}
	return nil
}

// decodeValid fills dst (a pointer to one of the model's structs) from v,
// which has passed schema s. Plain encoding/json does the work, with the
// model's own UnmarshalJSON for ids, nodes and vars; numbers the schema
// types as integer but that are written as 2.0 or 1e3 (which the schema,
// like APISIX, accepts) are first rewritten in integer form, since
// encoding/json only reads the latter into an int.
func (s *Schema) decodeValid(v *jval, dst any) error {
	s.intForms(v, snode{s.docs[s.file], s.file}, 0)
	if err := json.Unmarshal(appendJSON(nil, v), dst); err != nil {
		var ve *ValidationError
		if errors.As(err, &ve) {
			return ve
		}
		return &ValidationError{Msg: "invalid configuration: " + err.Error()}
	}
	return nil
}

// intForms rewrites, in place, integral numbers at integer-typed places of
// the schema into plain integer literals. It follows properties and items
// only (the struct fields); values under anyOf (ids, nodes) are read by
// their own UnmarshalJSON, which accepts every integral form.
func (s *Schema) intForms(v *jval, n snode, depth int) {
	if depth > 32 {
		return
	}
	n = s.deref(n)
	if n.v == nil {
		return
	}
	switch v.kind {
	case jNumber:
		if t := n.v.get("type"); t != nil && t.kind == jString && t.s == "integer" {
			if i, ok := v.integer(); ok {
				v.s = strconv.FormatInt(i, 10)
			}
		}
	case jObject:
		props := n.v.get("properties")
		if props == nil {
			return
		}
		for _, m := range v.obj {
			if p := props.get(m.key); p != nil {
				s.intForms(m.val, snode{p, n.file}, depth+1)
			}
		}
	case jArray:
		if it := n.v.get("items"); it != nil && it.kind == jObject {
			for _, e := range v.arr {
				s.intForms(e, snode{it, n.file}, depth+1)
			}
		}
	}
}
