package proxyrewrite

import (
	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/resub"
)

// This file holds two of the substitutions proxy-rewrite makes, each as
// APISIX makes it, written as scanners over bytes so that a request
// allocates nothing (the third, regex_uri's template, is package resub's):
//
//   - the captures in a header value, as core.utils.resolve_var_with_captures
//     (pattern (?<!\\)\$\{?(\d+)\}?);
//   - the variables in uri and in header values, as core.utils.resolve_var
//     (pattern (?<!\\)\$(\{\s*([^}]+?)\s*\}|([\w\.]+)), with "${name ?? default}").

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

// isWord is PCRE's \w without UTF mode, and '.': the characters of a
// $name.
func isWord(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || isDigit(c) || c == '_' || c == '.'
}

// isSpace is PCRE's \s.
func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\v' || c == '\f' || c == '\r'
}

// expandCaptures appends tpl with each $N, ${N} (an unclosed brace too)
// not preceded by '\' replaced by capture N of the regex_uri match (caps
// into s; none when caps is nil): resolve_var_with_captures.
func expandCaptures(dst, tpl, s []byte, caps []int) []byte {
	for i := 0; i < len(tpl); i++ {
		c := tpl[i]
		if c != '$' || (i > 0 && tpl[i-1] == '\\') {
			dst = append(dst, c)
			continue
		}
		j := i + 1
		if j < len(tpl) && tpl[j] == '{' {
			j++
		}
		k := j
		n := 0
		for k < len(tpl) && isDigit(tpl[k]) {
			if n < 1<<20 {
				n = n*10 + int(tpl[k]-'0')
			}
			k++
		}
		if k == j {
			dst = append(dst, c)
			continue
		}
		if k < len(tpl) && tpl[k] == '}' {
			k++
		}
		if caps != nil {
			dst = append(dst, resub.Group(s, caps, n)...)
		}
		i = k - 1
	}
	return dst
}

// varRef is one $name or ${name ?? default} found in a template.
type varRef struct {
	start, end int    // the reference's bytes in the template
	name       []byte // the variable
	def        []byte // the default after "??"
	hasDef     bool
}

// nextVar finds the first variable reference of tpl at or after from, as
// resolve_var's pattern does; ok is false when there is none.
func nextVar(tpl []byte, from int) (r varRef, ok bool) {
	for i := from; i < len(tpl); i++ {
		if tpl[i] != '$' || (i > 0 && tpl[i-1] == '\\') || i+1 >= len(tpl) {
			continue
		}
		if tpl[i+1] == '{' {
			close := -1
			for k := i + 2; k < len(tpl); k++ {
				if tpl[k] == '}' {
					close = k
					break
				}
			}
			if close < 0 || close == i+2 {
				continue // neither form matches at this '$'
			}
			inner := tpl[i+2 : close]
			// \s*([^}]+?)\s*: the name keeps at least one byte.
			a, b := 0, len(inner)
			for a < b-1 && isSpace(inner[a]) {
				a++
			}
			for b > a+1 && isSpace(inner[b-1]) {
				b--
			}
			r = varRef{start: i, end: close + 1, name: inner[a:b]}
			// ngx_re.split(variable, [[\s*\?\?\s*]]): the name, then the
			// default.
			if q := indexQQ(r.name); q >= 0 {
				name, rest := trimRight(r.name[:q]), trimLeft(r.name[q+2:])
				if q2 := indexQQ(rest); q2 >= 0 {
					rest = trimRight(rest[:q2])
				}
				r.name, r.def, r.hasDef = name, rest, true
			}
			return r, true
		}
		k := i + 1
		for k < len(tpl) && isWord(tpl[k]) {
			k++
		}
		if k == i+1 {
			continue
		}
		return varRef{start: i, end: k, name: tpl[i+1 : k]}, true
	}
	return varRef{}, false
}

func indexQQ(b []byte) int {
	for i := 0; i+1 < len(b); i++ {
		if b[i] == '?' && b[i+1] == '?' {
			return i
		}
	}
	return -1
}

func trimRight(b []byte) []byte {
	for len(b) > 0 && isSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func trimLeft(b []byte) []byte {
	for len(b) > 0 && isSpace(b[0]) {
		b = b[1:]
	}
	return b
}

// vars resolves variable names through a Ctx without allocating: a name
// is looked up in a table of names resolved by httpvar.Parse, filled at
// Build with the names the configuration writes and, up to a bound, with
// names that only a capture brings.
//
// names is made with its first name: most configurations write none (a
// plain uri), and a worker keeps an instance per route, so an empty map
// made for each was 48 bytes a route at 50 000 routes.
type vars struct {
	names  map[string]httpvar.Var // nil until a name is written
	static int                    // how many names the configuration wrote
}

// set records name's resolution.
func (v *vars) set(name string, x httpvar.Var) {
	if v.names == nil {
		v.names = make(map[string]httpvar.Var)
	}
	v.names[name] = x
}

// maxDynamicNames bounds the names interned while serving requests (names
// that came from a capture, so from the client): past it, such a name
// costs an allocation per use instead of memory for ever.
const maxDynamicNames = 64

// intern records the variable names tpl refers to.
func (v *vars) intern(tpl []byte) {
	for from := 0; ; {
		r, ok := nextVar(tpl, from)
		if !ok {
			return
		}
		v.set(string(r.name), httpvar.Parse(string(r.name)))
		from = r.end
	}
}

func (v *vars) resolve(b []byte) httpvar.Var {
	if x, ok := v.names[string(b)]; ok {
		return x
	}
	x := httpvar.Parse(string(b))
	if len(v.names) < v.static+maxDynamicNames {
		v.set(string(b), x)
	}
	return x
}

// expand appends tpl with its variable references resolved through c:
// an unset variable is its default, or nothing; with escapeQuestion every
// '?' a variable brings is written "%3F" (proxy-rewrite's
// escape_separator for uri).
func (v *vars) expand(dst, tpl []byte, c plugins.Ctx, escapeQuestion bool) []byte {
	from := 0
	for {
		r, ok := nextVar(tpl, from)
		if !ok {
			return append(dst, tpl[from:]...)
		}
		dst = append(dst, tpl[from:r.start]...)
		val := c.Var(v.resolve(r.name))
		if val == nil && r.hasDef {
			val = r.def
		}
		if escapeQuestion {
			for _, b := range val {
				if b == '?' {
					dst = append(dst, "%3F"...)
				} else {
					dst = append(dst, b)
				}
			}
		} else {
			dst = append(dst, val...)
		}
		from = r.end
	}
}
