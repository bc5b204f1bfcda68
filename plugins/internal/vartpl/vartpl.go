// Package vartpl is APISIX's strings with variables, as
// core.utils.resolve_var reads them (limit-count's, limit-req's and
// limit-conn's key of key_type var_combination, and their limits given as
// strings), resolved against a request's variables without allocating.
package vartpl

import (
	"encoding/json"
	"strings"

	"coregate/httpvar"
	"coregate/plugins"
)

// Template is a string with $var references, as APISIX's
// core.utils.resolve_var reads it: $name (letters, digits, '_' and '.') or
// ${name}, ${name ?? default}; a '$' after a backslash is literal (the
// backslash stays). A string with no '$' is kept as it is, with no part:
// a header's literal value, which a route of its own may have (50 000
// routes, 50 000 values), costs no allocation beside its string.
type Template struct {
	lit   string // the whole string, when it has no '$' (parts nil)
	parts []part
}

// part is a literal (name empty) or a variable with its default.
type part struct {
	lit        string
	name       string
	v          httpvar.Var // name, resolved
	def        string
	hasDefault bool
}

func isNameByte(c byte) bool {
	return c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// Parse reads s as a Template.
func Parse(s string) Template {
	if strings.IndexByte(s, '$') < 0 {
		return Template{lit: s}
	}
	var t Template
	var lit strings.Builder
	flush := func() {
		if lit.Len() > 0 {
			t.parts = append(t.parts, part{lit: lit.String()})
			lit.Reset()
		}
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c != '$' || (i > 0 && s[i-1] == '\\') {
			lit.WriteByte(c)
			continue
		}
		rest := s[i+1:]
		if strings.HasPrefix(rest, "{") {
			if end := strings.IndexByte(rest, '}'); end > 1 {
				inner := strings.TrimSpace(rest[1:end])
				if inner == "" {
					inner = rest[1:end]
				}
				p := part{name: inner, v: httpvar.Parse(inner)}
				if name, def, ok := cutDefault(inner); ok {
					p = part{name: name, v: httpvar.Parse(name), def: def, hasDefault: true}
				}
				flush()
				t.parts = append(t.parts, p)
				i += end + 1
				continue
			}
		}
		n := 0
		for n < len(rest) && isNameByte(rest[n]) {
			n++
		}
		if n == 0 {
			lit.WriteByte(c)
			continue
		}
		flush()
		t.parts = append(t.parts, part{name: rest[:n], v: httpvar.Parse(rest[:n])})
		i += n
	}
	flush()
	return t
}

// cutDefault splits "name ?? default" (spaces around ?? optional).
func cutDefault(s string) (name, def string, ok bool) {
	i := strings.Index(s, "??")
	if i < 0 {
		return s, "", false
	}
	return strings.TrimSpace(s[:i]), strings.TrimSpace(s[i+2:]), true
}

// Literal returns the template's text and true when it has no
// variable, so that the text is its rendering whatever the request.
func (t *Template) Literal() (string, bool) { return t.lit, t.parts == nil }

// Render appends t with c's variables to b; resolved counts the variables
// that had a value (or a default), as APISIX's n_resolved. An unset
// variable without a default renders as nothing.
func (t *Template) Render(b []byte, c plugins.Ctx) (_ []byte, resolved int) {
	if t.parts == nil {
		return append(b, t.lit...), 0
	}
	for i := range t.parts {
		p := &t.parts[i]
		if p.name == "" {
			b = append(b, p.lit...)
			continue
		}
		v := c.Var(p.v)
		switch {
		case v != nil:
			b = append(b, v...)
		case p.hasDefault:
			b = append(b, p.def...)
		default:
			continue
		}
		resolved++
	}
	return b, resolved
}

// NumberOr reads a limit given as an integer, or as a string resolved per
// request (APISIX's "$var"): the number, or the template, whichever raw is.
func NumberOr(raw json.RawMessage) (int64, *Template, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		t := Parse(s)
		return 0, &t, nil
	}
	var n int64
	if err := json.Unmarshal(raw, &n); err != nil {
		return 0, nil, err
	}
	return n, nil, nil
}
