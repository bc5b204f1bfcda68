package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"strconv"
	"strings"
	"unicode/utf8"

	"coregate/internal/jsonesc"
)

// jkind is the JSON type of a jval.
type jkind uint8

const (
	jNull jkind = iota
	jBool
	jNumber
	jString
	jArray
	jObject
)

// jval is a parsed JSON value that keeps object members in written order
// (nodes maps and plugin configs are stored back as written) and numbers as
// their literal text.
type jval struct {
	kind jkind
	b    bool
	s    string // string value, or the number literal
	arr  []*jval
	obj  []jmember
}

type jmember struct {
	key string
	val *jval
}

// get returns the member named k, or nil.
func (v *jval) get(k string) *jval {
	for i := range v.obj {
		if v.obj[i].key == k {
			return v.obj[i].val
		}
	}
	return nil
}

// luaType names v's type the way APISIX's schema messages do (Lua types:
// objects and arrays are both "table", JSON null is "userdata").
func (v *jval) luaType() string {
	switch v.kind {
	case jBool:
		return "boolean"
	case jNumber:
		return "number"
	case jString:
		return "string"
	case jArray, jObject:
		return "table"
	}
	return "userdata"
}

// integer returns v as an integer when it is a number with no fractional
// part that fits an int64 (APISIX accepts 1.0 and 1e3 where an integer is
// wanted).
func (v *jval) integer() (int64, bool) {
	if v.kind != jNumber {
		return 0, false
	}
	if n, err := strconv.ParseInt(v.s, 10, 64); err == nil {
		return n, true
	}
	f, err := strconv.ParseFloat(v.s, 64)
	if err != nil || f != math.Trunc(f) || f < math.MinInt64 || f >= math.MaxInt64 {
		return 0, false
	}
	return int64(f), true
}

// parseJSON parses one JSON document. Well-formed input (json.Valid, which
// does not allocate) is read by a direct scan; for other input,
// encoding/json says what is wrong and where.
func parseJSON(data []byte) (*jval, error) {
	if !json.Valid(data) {
		var x any
		err := json.Unmarshal(data, &x)
		if err == nil {
			err = errors.New("malformed JSON")
		}
		return nil, &SyntaxError{Msg: strings.TrimPrefix(err.Error(), "json: ")}
	}
	p := scanner{b: data}
	return p.value(), nil
}

// scanner reads a document that json.Valid accepted; it does no error
// checking of its own.
type scanner struct {
	b []byte
	i int
}

func (p *scanner) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *scanner) value() *jval {
	p.ws()
	switch p.b[p.i] {
	case '{':
		p.i++
		v := &jval{kind: jObject, obj: []jmember{}}
		p.ws()
		if p.b[p.i] == '}' {
			p.i++
			return v
		}
		for {
			p.ws()
			k := p.str()
			p.ws()
			p.i++ // ':'
			v.obj = append(v.obj, jmember{key: k, val: p.value()})
			p.ws()
			c := p.b[p.i]
			p.i++
			if c == '}' {
				return v
			}
		}
	case '[':
		p.i++
		v := &jval{kind: jArray, arr: []*jval{}}
		p.ws()
		if p.b[p.i] == ']' {
			p.i++
			return v
		}
		for {
			v.arr = append(v.arr, p.value())
			p.ws()
			c := p.b[p.i]
			p.i++
			if c == ']' {
				return v
			}
		}
	case '"':
		return &jval{kind: jString, s: p.str()}
	case 't':
		p.i += 4
		return &jval{kind: jBool, b: true}
	case 'f':
		p.i += 5
		return &jval{kind: jBool}
	case 'n':
		p.i += 4
		return &jval{kind: jNull}
	}
	start := p.i
	for p.i < len(p.b) && strings.IndexByte("+-0123456789.eE", p.b[p.i]) >= 0 {
		p.i++
	}
	return &jval{kind: jNumber, s: string(p.b[start:p.i])}
}

// str reads a string literal. Plain ones are copied; those with escapes or
// invalid UTF-8 are decoded by encoding/json (which replaces bad bytes by
// U+FFFD, as the tokenizer does).
func (p *scanner) str() string {
	start := p.i
	p.i++
	plain := true
	for {
		c := p.b[p.i]
		if c == '"' {
			break
		}
		if c == '\\' {
			plain = false
			p.i += 2
			continue
		}
		if c >= utf8.RuneSelf {
			plain = false
		}
		p.i++
	}
	p.i++
	lit := p.b[start:p.i]
	if plain || utf8.Valid(lit) && bytes.IndexByte(lit, '\\') < 0 {
		return string(lit[1 : len(lit)-1])
	}
	var s string
	_ = json.Unmarshal(lit, &s)
	return s
}

// appendJSON appends v as compact JSON, members in their order.
func appendJSON(b []byte, v *jval) []byte {
	switch v.kind {
	case jNull:
		return append(b, "null"...)
	case jBool:
		return strconv.AppendBool(b, v.b)
	case jNumber:
		return append(b, v.s...)
	case jString:
		return appendJSONString(b, v.s)
	case jArray:
		b = append(b, '[')
		for i, e := range v.arr {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSON(b, e)
		}
		return append(b, ']')
	default:
		b = append(b, '{')
		for i, m := range v.obj {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendJSONString(b, m.key)
			b = append(b, ':')
			b = appendJSON(b, m.val)
		}
		return append(b, '}')
	}
}

// appendJSONString appends s as a JSON string literal, as encoding/json
// writes it without HTML escaping.
func appendJSONString(b []byte, s string) []byte {
	return jsonesc.AppendQuoted(b, s, jsonesc.Go)
}

// luaNum formats a number as Lua's tostring does (%.14g), which is how
// APISIX's schema messages print values and limits.
func luaNum(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	return strconv.FormatFloat(f, 'g', 14, 64)
}

func itoa(i int) string { return strconv.Itoa(i) }
