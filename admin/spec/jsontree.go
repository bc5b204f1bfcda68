package spec

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math"
	"strconv"
	"unicode/utf8"
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

// float returns v as a float64 when it is a number.
func (v *jval) float() (float64, bool) {
	if v.kind != jNumber {
		return 0, false
	}
	f, err := strconv.ParseFloat(v.s, 64)
	if err != nil {
		return 0, false
	}
	return f, true
}

// parseJSON parses one JSON document.
func parseJSON(data []byte) (*jval, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := parseValue(dec)
	if err != nil {
		return nil, syntaxErr(err)
	}
	if _, err := dec.Token(); err != io.EOF {
		if err == nil {
			return nil, &SyntaxError{Msg: "unexpected data after the top-level value"}
		}
		return nil, syntaxErr(err)
	}
	return v, nil
}

func syntaxErr(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return &SyntaxError{Msg: "unexpected end of input"}
	}
	return &SyntaxError{Msg: err.Error()}
}

func parseValue(dec *json.Decoder) (*jval, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch t := tok.(type) {
	case nil:
		return &jval{kind: jNull}, nil
	case bool:
		return &jval{kind: jBool, b: t}, nil
	case json.Number:
		return &jval{kind: jNumber, s: string(t)}, nil
	case string:
		return &jval{kind: jString, s: t}, nil
	case json.Delim:
		switch t {
		case '{':
			v := &jval{kind: jObject, obj: []jmember{}}
			for dec.More() {
				kt, err := dec.Token()
				if err != nil {
					return nil, err
				}
				k, _ := kt.(string)
				mv, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				v.obj = append(v.obj, jmember{key: k, val: mv})
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		case '[':
			v := &jval{kind: jArray, arr: []*jval{}}
			for dec.More() {
				ev, err := parseValue(dec)
				if err != nil {
					return nil, err
				}
				v.arr = append(v.arr, ev)
			}
			if _, err := dec.Token(); err != nil {
				return nil, err
			}
			return v, nil
		}
	}
	return nil, errors.New("unexpected token")
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

// appendJSONString appends s as a JSON string literal (no HTML escaping).
func appendJSONString(b []byte, s string) []byte {
	const hex = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			switch {
			case c == '"' || c == '\\':
				b = append(b, '\\', c)
			case c == '\n':
				b = append(b, '\\', 'n')
			case c == '\r':
				b = append(b, '\\', 'r')
			case c == '\t':
				b = append(b, '\\', 't')
			case c < 0x20:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xf])
			default:
				b = append(b, c)
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b = append(b, `\ufffd`...)
		case r == '\u2028' || r == '\u2029':
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xf])
		default:
			b = append(b, s[i:i+size]...)
		}
		i += size
	}
	return append(b, '"')
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
