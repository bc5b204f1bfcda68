package mocking

import (
	_ "embed"
	"encoding/json"
	"errors"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"time"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/cjson"
)

// Name is the plugin's wire name.
const Name = "mocking"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is mocking's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin      = Plugin{}
	_ plugins.AccessPhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// supported are the content types (before any ';') APISIX answers with.
var supported = map[string]bool{
	"application/xml":  true,
	"application/json": true,
	"text/plain":       true,
	"text/html":        true,
	"text/xml":         true,
}

// ErrContentType is APISIX's refusal of a content_type it does not
// support, its text as APISIX writes it.
var ErrContentType = errors.New("unsupported content type!") //lint:ignore ST1005 APISIX's text, which clients match on

// Check implements plugins.Plugin: the content type, which the schema
// leaves open.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	if !supported[mediaType(c.ContentType)] {
		return ErrContentType
	}
	return nil
}

// mediaType is the content type before its last ';', as mocking.lua's
// parse_content_type reads it.
func mediaType(ct string) string {
	if i := strings.LastIndexByte(ct, ';'); i >= 0 {
		return ct[:i]
	}
	return ct
}

// conf is a configuration, with APISIX's defaults.
type conf struct {
	Delay           int                        `json:"delay"`
	ResponseStatus  int                        `json:"response_status"`
	ContentType     string                     `json:"content_type"`
	ResponseExample *string                    `json:"response_example"`
	ResponseSchema  json.RawMessage            `json:"response_schema"`
	WithMockHeader  bool                       `json:"with_mock_header"`
	ResponseHeaders map[string]json.RawMessage `json:"response_headers"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{ResponseStatus: 200, ContentType: "application/json;charset=utf8", WithMockHeader: true}
	err := json.Unmarshal(raw, &c)
	return c, err
}

// mockBy is the value of x-mock-by: the APISIX version the gateway
// answers as.
var mockBy = []byte("APISIX/" + spec.CompatVersion)

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	in := &instance{
		status:      c.ResponseStatus,
		contentType: []byte(c.ContentType),
		mockHeader:  c.WithMockHeader,
		delay:       time.Duration(c.Delay) * time.Second,
		body:        make([]byte, 0, 256),
		rnd:         rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}
	switch {
	case c.ResponseExample != nil:
		in.example = parseTemplate(*c.ResponseExample)
	default:
		var s map[string]any
		if err := json.Unmarshal(c.ResponseSchema, &s); err != nil {
			return nil, err
		}
		in.schema = compileObject(s)
		switch mediaType(c.ContentType) {
		case "application/xml", "text/xml":
			in.xml = true
		case "application/json", "text/plain":
		default:
			// APISIX logs "json schema body only support xml and json
			// content type" and answers an empty body.
			in.schema = nil
		}
	}
	names := make([]string, 0, len(c.ResponseHeaders))
	for k := range c.ResponseHeaders {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		in.headers = append(in.headers, header{name: k, value: parseTemplate(headerText(c.ResponseHeaders[k]))})
	}
	return in, nil
}

// headerText is a response_headers value as Lua's tostring writes it: a
// string as is, a number as "%.14g".
func headerText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return string(appendNumber(nil, f))
	}
	return string(raw)
}

type header struct {
	name  string
	value template
}

// instance is one configuration, built. Its buffers and random source are
// the event loop's (see the package doc).
type instance struct {
	status      int
	contentType []byte
	mockHeader  bool
	delay       time.Duration
	example     template // the body, when response_example is set
	schema      *node    // else the body's schema (nil: an empty body)
	xml         bool
	headers     []header

	body []byte     // the body rendered, valid until the next request
	hval []byte     // a header value rendered
	rnd  *rand.Rand // response_schema's random values
}

// Access implements plugins.AccessPhase: the answer, now or after the
// delay.
func (in *instance) Access(c plugins.Ctx) {
	b := in.body[:0]
	switch {
	case in.example != nil:
		b = in.example.render(b, c)
	case in.schema != nil && in.xml:
		b = in.appendXML(b, in.schema)
	case in.schema != nil:
		b = in.appendJSON(b, in.schema)
	}
	in.body = b
	c.SetResponseHeader("Content-Type", in.contentType)
	if in.mockHeader {
		c.SetResponseHeader("x-mock-by", mockBy)
	}
	for i := range in.headers {
		h := &in.headers[i]
		in.hval = h.value.render(in.hval[:0], c)
		c.SetResponseHeader(h.name, in.hval)
	}
	if in.delay > 0 {
		c.ExitAfter(in.delay, in.status, b)
		return
	}
	c.Exit(in.status, b)
}

// template is a text with $var references, as core.utils.resolve_var
// reads it: "$name" (name of [A-Za-z0-9_.]) or "${ name }" or
// "${ name ?? default }", not after a backslash.
type template []piece

// piece is literal text, or a variable (with its default when def is
// set).
type piece struct {
	text   string      // the literal, or the variable's name
	v      httpvar.Var // the variable, resolved
	isVar  bool
	hasDef bool
	def    string
}

func isWord(c byte) bool {
	return c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// parseTemplate splits s into its literal and variable pieces. A template
// without variables is one literal piece.
func parseTemplate(s string) template {
	t := template{}
	lit := 0
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i > 0 && s[i-1] == '\\' {
			continue
		}
		var p piece
		end := -1
		switch {
		case i+1 < len(s) && s[i+1] == '{':
			j := strings.IndexByte(s[i+2:], '}')
			if j < 0 {
				continue
			}
			inner := strings.TrimSpace(s[i+2 : i+2+j])
			if inner == "" {
				continue
			}
			name, def, hasDef := splitDefault(inner)
			p = piece{text: name, v: httpvar.Parse(name), isVar: true, hasDef: hasDef, def: def}
			end = i + 2 + j + 1
		default:
			j := i + 1
			for j < len(s) && isWord(s[j]) {
				j++
			}
			if j == i+1 {
				continue
			}
			p = piece{text: s[i+1 : j], v: httpvar.Parse(s[i+1 : j]), isVar: true}
			end = j
		}
		if lit < i {
			t = append(t, piece{text: s[lit:i]})
		}
		t = append(t, p)
		lit = end
		i = end - 1
	}
	if lit < len(s) || len(t) == 0 {
		t = append(t, piece{text: s[lit:]})
	}
	return t
}

// splitDefault splits "name ?? default" (spaces around ?? optional).
func splitDefault(s string) (name, def string, ok bool) {
	i := strings.Index(s, "??")
	if i < 0 {
		return s, "", false
	}
	name = strings.TrimRight(s[:i], " \t\r\n")
	def = strings.TrimLeft(s[i+2:], " \t\r\n")
	// A second "??" ends the default, as ngx.re.split makes a third field.
	if j := strings.Index(def, "??"); j >= 0 {
		def = strings.TrimRight(def[:j], " \t\r\n")
	}
	return name, def, true
}

// render appends the template with its variables resolved from c.
func (t template) render(b []byte, c plugins.Ctx) []byte {
	for i := range t {
		p := &t[i]
		if !p.isVar {
			b = append(b, p.text...)
			continue
		}
		v := c.Var(p.v)
		if v == nil && p.hasDef {
			b = append(b, p.def...)
			continue
		}
		b = append(b, v...)
	}
	return b
}

// The kinds of schema nodes: a property of a kind APISIX does not
// generate (or an array without items) is left out, as Lua leaves out a
// nil.
const (
	kNone = iota
	kString
	kNumber
	kInteger
	kBoolean
	kArray
	kObject
)

// node is a response_schema property, compiled.
type node struct {
	kind  uint8
	hasEx bool
	exStr string
	exNum float64
	exTru bool
	items *node
	props []prop // by name
}

type prop struct {
	name string
	node *node
}

func compileNode(m map[string]any) *node {
	typ, _ := m["type"].(string)
	n := &node{}
	ex := m["example"]
	switch strings.ToLower(typ) {
	case "array":
		items, ok := m["items"].(map[string]any)
		if !ok {
			return &node{kind: kNone}
		}
		n.kind = kArray
		n.items = compileNode(items)
	case "object":
		return compileObject(m)
	case "string":
		n.kind = kString
		n.exStr, n.hasEx = ex.(string)
	case "number", "integer":
		n.kind = kNumber
		if strings.ToLower(typ) == "integer" {
			n.kind = kInteger
		}
		n.exNum, n.hasEx = ex.(float64)
	case "boolean":
		n.kind = kBoolean
		// mocking.lua: `example and type(example) == "boolean"`: false
		// is no example.
		n.exTru = ex == true
		n.hasEx = n.exTru
	}
	return n
}

func compileObject(m map[string]any) *node {
	n := &node{kind: kObject}
	props, _ := m["properties"].(map[string]any)
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		pm, ok := props[k].(map[string]any)
		if !ok {
			continue
		}
		if c := compileNode(pm); c.kind != kNone {
			n.props = append(n.props, prop{name: k, node: c})
		}
	}
	return n
}

// appendJSON appends a value of n as lua-cjson encodes it.
func (in *instance) appendJSON(b []byte, n *node) []byte {
	switch n.kind {
	case kObject:
		b = append(b, '{')
		for i, p := range n.props {
			if i > 0 {
				b = append(b, ',')
			}
			b = cjson.AppendString(b, p.name)
			b = append(b, ':')
			b = in.appendJSON(b, p.node)
		}
		return append(b, '}')
	case kArray:
		if n.items.kind == kNone {
			return append(b, "{}"...) // a Lua table of nils: empty
		}
		b = append(b, '[')
		for i, k := 0, 1+in.rnd.IntN(3); i < k; i++ {
			if i > 0 {
				b = append(b, ',')
			}
			b = in.appendJSON(b, n.items)
		}
		return append(b, ']')
	case kString:
		if n.hasEx {
			return cjson.AppendString(b, n.exStr)
		}
		b = append(b, '"')
		b = in.appendRandomString(b)
		return append(b, '"')
	}
	return in.appendScalar(b, n)
}

// appendScalar appends a number, integer or boolean value of n.
func (in *instance) appendScalar(b []byte, n *node) []byte {
	switch n.kind {
	case kNumber:
		f := in.rnd.Float64() * 10000
		if n.hasEx {
			f = n.exNum
		}
		return appendNumber(b, f)
	case kInteger:
		if n.hasEx {
			return appendNumber(b, floor(n.exNum))
		}
		return strconv.AppendInt(b, int64(1+in.rnd.IntN(10000)), 10)
	case kBoolean:
		return strconv.AppendBool(b, n.exTru || in.rnd.IntN(2) == 1)
	case kString:
		if n.hasEx {
			return append(b, n.exStr...)
		}
		return in.appendRandomString(b)
	}
	return b
}

func floor(f float64) float64 {
	i := float64(int64(f))
	if i > f {
		i--
	}
	return i
}

func (in *instance) appendRandomString(b []byte) []byte {
	for i, k := 0, 1+in.rnd.IntN(10); i < k; i++ {
		b = append(b, byte('a'+in.rnd.IntN(26)))
	}
	return b
}

// appendNumber writes a number as Lua's "%.14g" does.
func appendNumber(b []byte, f float64) []byte {
	return strconv.AppendFloat(b, f, 'g', 14, 64)
}

// appendXML appends the generated object as xml2lua.toXml(output, "data")
// writes it: pretty, two spaces per level, lines joined by "\n", values
// unescaped; an object of one property is that property's value under
// <data>.
func (in *instance) appendXML(b []byte, root *node) []byte {
	if len(root.props) == 1 {
		return in.appendXMLValue(b, root.props[0].node, "data", 0)
	}
	return in.appendXMLValue(b, root, "data", 0)
}

func (in *instance) appendXMLValue(b []byte, n *node, tag string, level int) []byte {
	switch n.kind {
	case kArray:
		if n.items.kind == kNone {
			return xmlLine(b, level, tag, "/>")
		}
		for i, k := 0, 1+in.rnd.IntN(3); i < k; i++ {
			if i > 0 {
				b = append(b, '\n')
			}
			b = in.appendXMLValue(b, n.items, tag, level)
		}
		return b
	case kObject:
		if len(n.props) == 0 {
			return xmlLine(b, level, tag, "/>")
		}
		b = xmlLine(b, level, tag, ">")
		for _, p := range n.props {
			b = append(b, '\n')
			b = in.appendXMLValue(b, p.node, p.name, level+1)
		}
		b = append(b, '\n')
		b = appendSpaces(b, level)
		b = append(b, "</"...)
		b = append(b, tag...)
		return append(b, '>')
	}
	if n.kind == kString && n.hasEx && n.exStr == "" {
		return xmlLine(b, level, tag, "/>")
	}
	b = xmlLine(b, level, tag, ">")
	b = in.appendScalar(b, n)
	b = append(b, "</"...)
	b = append(b, tag...)
	return append(b, '>')
}

func xmlLine(b []byte, level int, tag, end string) []byte {
	b = appendSpaces(b, level)
	b = append(b, '<')
	b = append(b, tag...)
	return append(b, end...)
}

func appendSpaces(b []byte, level int) []byte {
	for i := 0; i < level; i++ {
		b = append(b, ' ', ' ')
	}
	return b
}
