package spec

import (
	"math/big"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"github.com/santhosh-tekuri/jsonschema/v6/kind"
)

// The schema library reports every failure it finds, as a tree of errors
// keyed by instance location; APISIX's Lua validator stops at the first
// one, with a message built from the outside in:
//
//	property "upstream" validation failed: property "nodes" validation failed: object matches none of the required
//
// translate walks the library's tree alongside the schema document and
// the instance, and keeps, at each level, the failure APISIX would have
// met first. The rule, from the code api7's jsonschema generates for an
// object: its type; then its properties in the order the schema writes
// them (a missing required property counts at its place there); then
// required properties the schema does not describe; then dependencies;
// then pattern and additional properties, in the order the instance
// writes them; then min/maxProperties. For an array: min/maxItems, each
// item in order, uniqueItems. For a string: minLength, maxLength, pattern.
// For a number: minimum, exclusiveMinimum, maximum, exclusiveMaximum,
// multipleOf. Then enum, and last allOf (its first failing branch), anyOf,
// oneOf and not.

// translate turns the library's error for instance v into APISIX's
// message (without "invalid configuration: "), the path of the field at
// fault, and a detail naming the value when the message alone does not
// (an anyOf, as a bad upstream node, says only "object matches none of
// the required").
func (s *Schema) translate(verr *jsonschema.ValidationError, v *jval) *ValidationError {
	t := translator{s: s}
	root := snode{s.docs[s.file], s.file}
	msg := t.render(verr, nil, "", root, v)
	return &ValidationError{Field: t.field, Msg: msg, Detail: t.detail}
}

type translator struct {
	s      *Schema
	field  string // path of the failure reported, dotted ("upstream.nodes[0].port")
	detail string
	inAny  int // > 0 while rendering an anyOf branch for the detail
}

// render returns the message of e, an error found while validating the
// instance at location loc (field: its path as written in
// ValidationError.Field; node: the schema there; inst: the instance).
func (t *translator) render(e *jsonschema.ValidationError, loc []string, field string, node snode, inst *jval) string {
	var prefix strings.Builder
	for _, seg := range e.InstanceLocation[min(len(loc), len(e.InstanceLocation)):] {
		field = fieldJoin(field, seg, inst != nil && inst.kind == jArray)
		var p string
		p, node, inst = t.step(node, inst, seg)
		prefix.WriteString(p)
	}
	t.field = field
	return prefix.String() + t.own(e, e.InstanceLocation, field, t.s.deref(node), inst)
}

// own is the message of e at its own location: a failure of a
// dependencies schema (the schema of "dependencies": {"prop": {...}})
// prefixed as APISIX's, "failed to validate dependent schema for \"prop\": ".
func (t *translator) own(e *jsonschema.ValidationError, loc []string, field string, node snode, inst *jval) string {
	if prop, ok := dependentSchema(e.SchemaURL); ok {
		return `failed to validate dependent schema for "` + prop + `": ` + t.ownKind(e, loc, field, node, inst)
	}
	return t.ownKind(e, loc, field, node, inst)
}

// dependentSchema reports whether a schema location is that of a
// dependencies schema, and its property.
func dependentSchema(url string) (string, bool) {
	_, frag, _ := strings.Cut(url, "#")
	i := strings.LastIndex(frag, "/dependencies/")
	if i < 0 {
		return "", false
	}
	prop := frag[i+len("/dependencies/"):]
	if prop == "" || strings.Contains(prop, "/") || strings.HasSuffix(frag[:i], "/properties") {
		return "", false
	}
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(prop), true
}

// ownKind is own's message by the kind of failure.
func (t *translator) ownKind(e *jsonschema.ValidationError, loc []string, field string, node snode, inst *jval) string {
	switch k := e.ErrorKind.(type) {
	case *kind.Schema, *kind.Group, *kind.Reference:
		if len(e.Causes) == 0 {
			return "validation failed"
		}
		return t.render(t.first(e.Causes, loc, node, inst), loc, field, node, inst)
	case *kind.AllOf:
		best, bi := (*jsonschema.ValidationError)(nil), -1
		for _, c := range e.Causes {
			if i := branchIndex(c.SchemaURL, "allOf"); best == nil || i < bi {
				best, bi = c, i
			}
		}
		if best == nil {
			return "allOf failed"
		}
		sub := snode{node.v.child("allOf").child(strconv.Itoa(bi)), node.file}
		return "allOf " + strconv.Itoa(bi+1) + " failed: " + t.render(best, loc, field, sub, inst)
	case *kind.AnyOf:
		req := requiredList(node.v.child("anyOf"))
		if req == "" {
			// the branches are alternative forms of one value: say which
			// part of it fails the form it is written in
			t.anyDetail(e, loc, field, node, inst)
		}
		return "object matches none of the required" + req
	case *kind.OneOf:
		if len(k.Subschemas) < 2 {
			return "value should match only one schema, but matches none"
		}
		return "value should match only one schema, but matches both schemas " +
			strconv.Itoa(k.Subschemas[0]+1) + " and " + strconv.Itoa(k.Subschemas[1]+1)
	case *kind.Not:
		return "value wasn't supposed to match schema"
	case *kind.Type:
		want := strings.Join(k.Want, ", ")
		if len(k.Want) > 1 {
			want = "one of " + want
		}
		t.valueDetail(inst, "")
		return "wrong type: expected " + want + ", got " + inst.luaType()
	case *kind.Required:
		return `property "` + t.firstMissing(k.Missing, node) + `" is required`
	case *kind.Dependency:
		return `property "` + k.Missing[0] + `" is required when ` + k.Prop + " is set"
	case *kind.AdditionalProperties:
		return "additional properties forbidden, found " + firstWritten(k.Properties, inst)
	case *kind.MinProperties:
		return "expect object to have at least " + strconv.Itoa(k.Want) + " properties"
	case *kind.MaxProperties:
		return "expect object to have at most " + strconv.Itoa(k.Want) + " properties"
	case *kind.MinItems:
		return "expect array to have at least " + strconv.Itoa(k.Want) + " items"
	case *kind.MaxItems:
		return "expect array to have at most " + strconv.Itoa(k.Want) + " items"
	case *kind.UniqueItems:
		return "expected unique items but items " + strconv.Itoa(k.Duplicates[0]+1) + " and " +
			strconv.Itoa(k.Duplicates[1]+1) + " are equal"
	case *kind.MinLength:
		return "string too short, expected at least " + strconv.Itoa(k.Want) + ", got " + strconv.Itoa(k.Got)
	case *kind.MaxLength:
		return "string too long, expected at most " + strconv.Itoa(k.Want) + ", got " + strconv.Itoa(k.Got)
	case *kind.Pattern:
		return "failed to match pattern " + luaQuote(k.Want) + " with " + luaQuote(k.Got)
	case *kind.Minimum:
		return "expected " + ratNum(k.Got) + " to be at least " + ratNum(k.Want)
	case *kind.ExclusiveMinimum:
		return "expected " + ratNum(k.Got) + " to be greater than " + ratNum(k.Want)
	case *kind.Maximum:
		return "expected " + ratNum(k.Got) + " to be at most " + ratNum(k.Want)
	case *kind.ExclusiveMaximum:
		return "expected " + ratNum(k.Got) + " to be smaller than " + ratNum(k.Want)
	case *kind.MultipleOf:
		return "expected " + ratNum(k.Got) + " to be a multiple of " + ratNum(k.Want)
	case *kind.Enum:
		t.valueDetail(inst, enumList(node.v.child("enum")))
		return "matches none of the enum values"
	case *kind.Const:
		t.valueDetail(inst, enumList(node.v.child("const")))
		return "matches none of the enum values"
	case *kind.Format:
		return luaQuote(inst.s) + " is not a valid " + k.Want
	}
	return (&jsonschema.ValidationError{ErrorKind: e.ErrorKind}).Error()
}

// maxDetailValue bounds the value a detail quotes: a refusal names the
// value, it does not echo a megabyte back.
const maxDetailValue = 96

// valueDetail sets the detail to the value written at the failing field,
// followed by what the schema allows (want, when not empty), for the
// keywords whose APISIX message names neither ("matches none of the enum
// values", "wrong type: expected string, got number"). Inside an anyOf
// branch the branch's message is the detail, so nothing is set there.
func (t *translator) valueDetail(inst *jval, want string) {
	if t.inAny > 0 || inst == nil {
		return
	}
	v := appendJSON(nil, inst)
	if len(v) > maxDetailValue {
		n := maxDetailValue
		for n > 0 && !utf8.RuneStart(v[n]) {
			n--
		}
		v = append(v[:n:n], "..."...)
	}
	t.detail = "value " + string(v)
	if want != "" {
		t.detail += ", expected one of " + want
	}
}

// enumList renders a schema's enum array (or const value) as the list a
// detail shows: `"GET", "POST"`.
func enumList(n *jval) string {
	if n == nil {
		return ""
	}
	items := []*jval{n}
	if n.kind == jArray {
		items = n.arr
	}
	var b []byte
	for i, e := range items {
		if i > 0 {
			b = append(b, ", "...)
		}
		b = appendJSON(b, e)
	}
	return string(b)
}

// anyDetail sets the detail of an anyOf failure: the failure of the branch
// meant for the instance's JSON type (a map of nodes or a list of them; a
// string id or an integer one), or of the first branch; Field becomes the
// place of that failure.
func (t *translator) anyDetail(e *jsonschema.ValidationError, loc []string, field string, node snode, inst *jval) {
	if t.inAny > 0 || len(e.Causes) == 0 {
		return
	}
	branches := node.v.child("anyOf")
	pick := e.Causes[0]
	for _, c := range e.Causes {
		b := t.s.deref(snode{branches.child(strconv.Itoa(branchIndex(c.SchemaURL, "anyOf"))), node.file})
		if typeAdmits(b.v, inst) {
			pick = c
			break
		}
	}
	i := branchIndex(pick.SchemaURL, "anyOf")
	t.inAny++
	t.detail = t.render(pick, loc, field, snode{branches.child(strconv.Itoa(i)), node.file}, inst)
	t.inAny--
}

// typeAdmits reports whether schema node n's "type" admits inst's type.
func typeAdmits(n *jval, inst *jval) bool {
	t := n.child("type")
	return t != nil && (t.s == jsonTypes[inst.kind] || t.s == "integer" && inst.kind == jNumber)
}

var jsonTypes = [...]string{jNull: "null", jBool: "boolean", jNumber: "number", jString: "string", jArray: "array", jObject: "object"}

// step descends from the instance inst (schema node) into its member or
// item seg and returns APISIX's prefix for it.
func (t *translator) step(node snode, inst *jval, seg string) (string, snode, *jval) {
	node = t.s.deref(node)
	if inst != nil && inst.kind == jArray {
		i, _ := strconv.Atoi(seg)
		return "failed to validate item " + strconv.Itoa(i+1) + ": ",
			snode{node.v.child("items"), node.file}, inst.child(seg)
	}
	child := inst.child(seg)
	if p := node.v.child("properties").child(seg); p != nil {
		return `property "` + seg + `" validation failed: `, snode{p, node.file}, child
	}
	if pp := node.v.child("patternProperties"); pp != nil {
		for _, m := range pp.obj {
			if re := patternRegexp(m.key); re != nil && re.MatchString(seg) {
				return "failed to validate " + seg + " (matching " + luaQuote(m.key) + "): ", snode{m.val, node.file}, child
			}
		}
	}
	return "failed to validate additional property " + seg + ": ",
		snode{node.v.child("additionalProperties"), node.file}, child
}

var patternCache sync.Map // string → *regexp.Regexp (nil when it does not compile)

func patternRegexp(p string) *regexp.Regexp {
	if re, ok := patternCache.Load(p); ok {
		return re.(*regexp.Regexp)
	}
	re, _ := regexp.Compile(p)
	patternCache.Store(p, re)
	return re
}

// first returns, of errors found at or under loc, the one APISIX reports
// first (see the rule at the top of this file).
func (t *translator) first(errs []*jsonschema.ValidationError, loc []string, node snode, inst *jval) *jsonschema.ValidationError {
	node = t.s.deref(node)
	best := errs[0]
	bk := t.rank(best, loc, node, inst)
	for _, e := range errs[1:] {
		if k := t.rank(e, loc, node, inst); k.less(bk) {
			best, bk = e, k
		}
	}
	return best
}

type rankKey struct{ group, index int }

func (a rankKey) less(b rankKey) bool {
	return a.group < b.group || a.group == b.group && a.index < b.index
}

// checkOrder is the order in which APISIX's validator checks an object's
// keywords (see the top of this file); "properties" stands for each
// property in schema order, "patternProperties" for members matched by
// pattern or refused as additional, in written order.
var checkOrder = []string{
	"type", "properties", "required", "dependency", "patternProperties", "minProperties",
	"minItems", "items", "uniqueItems", "minLength", "maxLength", "pattern",
	"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum", "multipleOf",
	"format", "enum", "allOf", "anyOf", "oneOf", "not",
}

var checkRank = func() map[string]int {
	m := map[string]int{"additionalProperties": 4, "maxProperties": 5, "maxItems": 6, "const": 18}
	for i, k := range checkOrder {
		m[k] = i
	}
	return m
}()

// rank places e, found at or under loc, in checkOrder.
func (t *translator) rank(e *jsonschema.ValidationError, loc []string, node snode, inst *jval) rankKey {
	if len(e.InstanceLocation) > len(loc) {
		seg := e.InstanceLocation[len(loc)]
		if inst != nil && inst.kind == jArray {
			i, _ := strconv.Atoi(seg)
			return rankKey{checkRank["items"], i}
		}
		if i := memberIndex(node.v.child("properties"), seg); i >= 0 {
			return rankKey{checkRank["properties"], i}
		}
		return rankKey{checkRank["patternProperties"], memberIndex(inst, seg)}
	}
	switch k := e.ErrorKind.(type) {
	case *kind.Required:
		if i := memberIndex(node.v.child("properties"), t.firstMissing(k.Missing, node)); i >= 0 {
			return rankKey{checkRank["properties"], i}
		}
	case *kind.AdditionalProperties:
		return rankKey{checkRank["patternProperties"], memberIndex(inst, firstWritten(k.Properties, inst))}
	case *kind.Not:
		return rankKey{checkRank["not"], 0}
	case *kind.Reference, *kind.Group:
		if len(e.Causes) > 0 {
			return t.rank(t.first(e.Causes, loc, node, inst), loc, node, inst)
		}
	}
	if kw := e.ErrorKind.KeywordPath(); len(kw) > 0 {
		if r, ok := checkRank[kw[0]]; ok {
			return rankKey{r, 0}
		}
	}
	return rankKey{len(checkOrder), 0}
}

// firstMissing is the missing property APISIX names: the first in the
// schema's properties order, else the first in required order.
func (t *translator) firstMissing(missing []string, node snode) string {
	best, bi := missing[0], -1
	props := node.v.child("properties")
	for _, m := range missing {
		if i := memberIndex(props, m); i >= 0 && (bi < 0 || i < bi) {
			best, bi = m, i
		}
	}
	return best
}

// memberIndex is the position of member k in object v, or -1 when v is
// nil or has no such member.
func memberIndex(v *jval, k string) int {
	if v == nil {
		return -1
	}
	for i, m := range v.obj {
		if m.key == k {
			return i
		}
	}
	return -1
}

// firstWritten is, of names, the one inst writes first.
func firstWritten(names []string, inst *jval) string {
	best, bi := names[0], -1
	for _, n := range names {
		if i := memberIndex(inst, n); i >= 0 && (bi < 0 || i < bi) {
			best, bi = n, i
		}
	}
	return best
}

// branchIndex reads the index of the branch of keyword kw (allOf, anyOf)
// a schema location ends in: ".../anyOf/1" → 1.
func branchIndex(schemaURL, kw string) int {
	i := strings.LastIndex(schemaURL, "/"+kw+"/")
	if i < 0 {
		return 0
	}
	rest := schemaURL[i+len(kw)+2:]
	if j := strings.IndexByte(rest, '/'); j >= 0 {
		rest = rest[:j]
	}
	n, _ := strconv.Atoi(rest)
	return n
}

// requiredList is what APISIX appends to an anyOf failure whose branches
// list required properties: `: ["plugins","uri"] or ["upstream","uri"]`.
func requiredList(anyOf *jval) string {
	if anyOf == nil {
		return ""
	}
	var parts []string
	for _, b := range anyOf.arr {
		if r := b.child("required"); r != nil {
			parts = append(parts, string(appendJSON(nil, r)))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return ": " + strings.Join(parts, " or ")
}

// fieldJoin appends member or item seg to a field path: "upstream.nodes",
// "methods[1]", and a member whose name is not a plain word quoted,
// `nodes["127.0.0.1:80"]`.
func fieldJoin(field, seg string, item bool) string {
	switch {
	case item:
		return field + "[" + seg + "]"
	case !plainName(seg):
		return field + "[" + strconv.Quote(seg) + "]"
	case field == "":
		return seg
	}
	return field + "." + seg
}

func plainName(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-') {
			return false
		}
	}
	return s != ""
}

// ratNum prints a limit or value as Lua's tostring does.
func ratNum(r *big.Rat) string {
	if r == nil {
		return "nil"
	}
	f, _ := r.Float64()
	return luaNum(f)
}

// luaQuote quotes s as Lua's %q does, which is how APISIX's schema messages
// show patterns and values.
func luaQuote(s string) string {
	var b strings.Builder
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString("\\\n")
		case '\r':
			b.WriteString(`\r`)
		case 0:
			b.WriteString(`\0`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
