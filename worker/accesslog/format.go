package accesslog

import (
	"errors"
	"fmt"
	"strings"

	"coregate/httpvar"
	"coregate/internal/jsonesc"
)

// Literal is the Kind of a Part that is literal text: no variable has it.
const Literal = httpvar.Unknown

// Part is one piece of a compiled format: literal text, or a variable of
// httpvar's table. Each variable has nginx's or APISIX's meaning; a value
// that is not set is written "-", as nginx does.
type Part struct {
	// Kind is the variable's, or Literal.
	Kind httpvar.Kind
	// Text is a Literal's text.
	Text string
	// Name is the httpvar.Var's name of an HTTP, SentHTTP, Arg or Cookie
	// part.
	Name string
}

// Escape is how variable values are escaped (nginx's log_format escape=).
type Escape uint8

// Escapes.
const (
	// EscapeDefault writes '"', '\\' and bytes below 0x20 or above 0x7e
	// as \xHH.
	EscapeDefault Escape = iota
	// EscapeJSON writes values as in a JSON string.
	EscapeJSON
	// EscapeNone writes values as they are.
	EscapeNone
)

// ParseEscape reads access_log_format_escape: default, json or none.
func ParseEscape(s string) (Escape, error) {
	switch s {
	case "", "default":
		return EscapeDefault, nil
	case "json":
		return EscapeJSON, nil
	case "none":
		return EscapeNone, nil
	}
	return 0, fmt.Errorf("access log: unknown escape %q (want default, json or none)", s)
}

// Format is a compiled log format. It is immutable and may be shared.
type Format struct {
	Parts  []Part
	Escape Escape
}

// ErrFormat is matched by the errors of Compile.
var ErrFormat = errors.New("access log format")

// Compile reads an nginx log format: text with $name or ${name}
// variables, names made of letters, digits and '_', resolved by
// httpvar.Parse. A variable not in httpvar's table is an error, as an
// unknown variable is in nginx.
func Compile(format string, esc Escape) (*Format, error) {
	f := &Format{Escape: esc}
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			f.Parts = append(f.Parts, Part{Kind: Literal, Text: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(format); {
		c := format[i]
		if c != '$' {
			lit.WriteByte(c)
			i++
			continue
		}
		i++
		braced := i < len(format) && format[i] == '{'
		if braced {
			i++
		}
		start := i
		for i < len(format) && isNameByte(format[i]) {
			i++
		}
		name := format[start:i]
		if braced {
			if i >= len(format) || format[i] != '}' {
				return nil, fmt.Errorf("%w: missing } after ${%s", ErrFormat, name)
			}
			i++
		}
		if name == "" {
			return nil, fmt.Errorf("%w: $ without a variable name at offset %d", ErrFormat, start-1)
		}
		p, err := variable(name)
		if err != nil {
			return nil, err
		}
		flush()
		f.Parts = append(f.Parts, p)
	}
	flush()
	return f, nil
}

func variable(name string) (Part, error) {
	v := httpvar.Parse(name)
	if v.Kind == httpvar.Unknown {
		return Part{}, fmt.Errorf("%w: unknown variable $%s", ErrFormat, name)
	}
	return Part{Kind: v.Kind, Name: v.Name}, nil
}

func isNameByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

const hexDigits = "0123456789ABCDEF"

// AppendUnset appends what stands for a value that is not set: "-", or
// nothing for EscapeJSON, as nginx writes them.
func AppendUnset(b []byte, esc Escape) []byte {
	if esc == EscapeJSON {
		return b
	}
	return append(b, '-')
}

// AppendValue appends a variable's value (set, possibly empty) escaped as
// esc.
func AppendValue(b, v []byte, esc Escape) []byte {
	switch esc {
	case EscapeNone:
		return append(b, v...)
	case EscapeJSON:
		return jsonesc.Append(b, v, jsonesc.Nginx)
	}
	i := 0
	for i < len(v) && !escDefault(v[i]) {
		i++
	}
	b = append(b, v[:i]...) // most values need no escape: one copy
	for _, c := range v[i:] {
		if escDefault(c) {
			b = append(b, '\\', 'x', hexDigits[c>>4], hexDigits[c&15])
			continue
		}
		b = append(b, c)
	}
	return b
}

func escDefault(c byte) bool { return c == '"' || c == '\\' || c < 0x20 || c > 0x7e }
