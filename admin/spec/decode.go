package spec

import (
	"encoding/json"
	"reflect"
	"strings"
	"sync"
)

// DecodeRoute decodes a route strictly (unknown fields, wrong JSON types and
// malformed JSON are errors) and validates it. Errors are *SyntaxError or
// *ValidationError and their text is what the Admin API answers.
func DecodeRoute(data []byte) (*Route, error) {
	r := new(Route)
	if err := decodeStrict(data, r); err != nil {
		return nil, err
	}
	if err := r.Validate(); err != nil {
		return nil, err
	}
	return r, nil
}

// DecodeService is DecodeRoute for a service.
func DecodeService(data []byte) (*Service, error) {
	s := new(Service)
	if err := decodeStrict(data, s); err != nil {
		return nil, err
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return s, nil
}

// DecodeUpstream is DecodeRoute for an upstream.
func DecodeUpstream(data []byte) (*Upstream, error) {
	u := new(Upstream)
	if err := decodeStrict(data, u); err != nil {
		return nil, err
	}
	if err := u.Validate(); err != nil {
		return nil, err
	}
	return u, nil
}

// decodeStrict parses data and fills dst (a pointer to a struct), checking
// the JSON type of every field against APISIX's schema and rejecting
// unknown fields. Value constraints are Validate's job.
func decodeStrict(data []byte, dst any) error {
	v, err := parseJSON(data)
	if err != nil {
		return err
	}
	if p := decodeValue(v, reflect.ValueOf(dst).Elem(), nil, ""); p != nil {
		return p.schemaErr()
	}
	return nil
}

var (
	typeID      = reflect.TypeFor[ID]()
	typeNodes   = reflect.TypeFor[Nodes]()
	typeVars    = reflect.TypeFor[Vars]()
	typeRaw     = reflect.TypeFor[json.RawMessage]()
	typeTimeout = reflect.TypeFor[Timeout]()
)

// required lists the properties a schema object must have, by Go type.
var required = map[reflect.Type][]string{
	typeTimeout: {"connect", "send", "read"},
}

type structFields struct {
	byName map[string]int
}

var fieldCache sync.Map // reflect.Type → *structFields

func fieldsOf(t reflect.Type) *structFields {
	if f, ok := fieldCache.Load(t); ok {
		return f.(*structFields)
	}
	sf := &structFields{byName: make(map[string]int, t.NumField())}
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" || !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		sf.byName[name] = i
	}
	f, _ := fieldCache.LoadOrStore(t, sf)
	return f.(*structFields)
}

// jsonTypeName is the schema type name of a Go type, for "wrong type"
// messages.
func jsonTypeName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.String:
		return "string"
	case reflect.Bool:
		return "boolean"
	case reflect.Int, reflect.Int64, reflect.Int32:
		return "integer"
	case reflect.Float64, reflect.Float32:
		return "number"
	case reflect.Slice:
		if t == typeRaw {
			return "object"
		}
		return "array"
	case reflect.Pointer:
		return jsonTypeName(t.Elem())
	}
	return "object"
}

func wrongType(t reflect.Type, v *jval) *problem {
	return &problem{msg: "wrong type: expected " + jsonTypeName(t) + ", got " + v.luaType()}
}

// decodeValue fills rv from v. owner and name identify the struct field rv
// is (for the rules on empty strings).
func decodeValue(v *jval, rv reflect.Value, owner reflect.Type, name string) *problem {
	t := rv.Type()
	switch t {
	case typeID:
		return rv.Addr().Interface().(*ID).fromJSON(v)
	case typeNodes:
		return rv.Addr().Interface().(*Nodes).fromJSON(v)
	case typeVars:
		if v.kind != jArray {
			return wrongType(t, v)
		}
		rv.Set(reflect.ValueOf(varsFromJSON(v)))
		return nil
	case typeRaw:
		if v.kind != jObject {
			return wrongType(t, v)
		}
		rv.SetBytes(appendJSON(nil, v))
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		if v.kind == jNull {
			return wrongType(t, v)
		}
		p := reflect.New(t.Elem())
		if pr := decodeValue(v, p.Elem(), owner, name); pr != nil {
			return pr
		}
		rv.Set(p)
		return nil
	case reflect.Struct:
		return decodeStruct(v, rv)
	case reflect.Map:
		return decodeMap(v, rv)
	case reflect.Slice:
		if v.kind != jArray {
			return wrongType(t, v)
		}
		s := reflect.MakeSlice(t, len(v.arr), len(v.arr))
		for i, e := range v.arr {
			if p := decodeValue(e, s.Index(i), nil, ""); p != nil {
				return p.item(i)
			}
		}
		rv.Set(s)
		return nil
	case reflect.String:
		if v.kind != jString {
			return wrongType(t, v)
		}
		if v.s == "" && owner != nil {
			if msg := emptyStringRule(owner, name); msg != "" {
				return &problem{msg: msg}
			}
		}
		rv.SetString(v.s)
		return nil
	case reflect.Bool:
		if v.kind != jBool {
			return wrongType(t, v)
		}
		rv.SetBool(v.b)
		return nil
	case reflect.Int, reflect.Int64, reflect.Int32:
		n, ok := v.integer()
		if !ok || rv.OverflowInt(n) {
			return wrongType(t, v)
		}
		rv.SetInt(n)
		return nil
	case reflect.Float64, reflect.Float32:
		f, ok := v.float()
		if !ok {
			return wrongType(t, v)
		}
		rv.SetFloat(f)
		return nil
	}
	return &problem{msg: "unsupported field type " + t.String()}
}

func decodeStruct(v *jval, rv reflect.Value) *problem {
	t := rv.Type()
	if v.kind != jObject {
		return wrongType(t, v)
	}
	sf := fieldsOf(t)
	for _, m := range v.obj {
		i, ok := sf.byName[m.key]
		if !ok {
			return &problem{msg: "additional properties forbidden, found " + m.key}
		}
		if p := decodeValue(m.val, rv.Field(i), t, m.key); p != nil {
			return p.in(m.key)
		}
	}
	for _, k := range required[t] {
		if v.get(k) == nil {
			return &problem{msg: `property "` + k + `" is required`}
		}
	}
	return nil
}

func decodeMap(v *jval, rv reflect.Value) *problem {
	t := rv.Type()
	if v.kind != jObject {
		return wrongType(t, v)
	}
	m := reflect.MakeMapWithSize(t, len(v.obj))
	for _, mem := range v.obj {
		e := reflect.New(t.Elem()).Elem()
		if t.Elem() == typeRaw {
			// plugin configs: any JSON value is kept; Validate checks each
			// is an object, as the plugin check does.
			e.SetBytes(appendJSON(nil, mem.val))
		} else if p := decodeValue(mem.val, e, nil, ""); p != nil {
			return p.key(mem.key)
		}
		m.SetMapIndex(reflect.ValueOf(mem.key), e)
	}
	rv.Set(m)
	return nil
}
