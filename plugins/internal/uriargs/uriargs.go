// Package uriargs reads and edits a request's query arguments as APISIX's
// authentication plugins see them through ngx.req.get_uri_args: names and
// values unescaped ("%XX", '+' for a space), an argument given twice a
// table, one without '=' the boolean true. key-auth and jwt-auth find
// their credential with it, and take it out of the request with
// hide_credentials.
package uriargs

// Scratch holds the buffers of Arg and Without, reused from call to call
// so that neither allocates once they have grown. What they return lives
// until the next call on the same Scratch. The zero value is ready; a
// Scratch is not safe for concurrent use (a plugin instance keeps one,
// used on its event loop).
type Scratch struct {
	val    []byte // Arg's value, unescaped
	target []byte // Without's target
}

// Arg finds the query argument name in q as ngx.req.get_uri_args does:
// n is how many times it occurs, v the last occurrence's value,
// unescaped, nil when it has no '=' (never nil otherwise: "name=" is an
// empty value).
func (s *Scratch) Arg(q []byte, name string) (n int, v []byte) {
	for len(q) > 0 {
		var kv []byte
		kv, q = cut(q, '&')
		key, val, eq := cutEq(kv)
		if !unescapedEqual(key, name) {
			continue
		}
		n++
		v = nil
		if eq {
			if s.val == nil {
				s.val = make([]byte, 0, 64)
			}
			s.val = unescape(s.val[:0], val)
			v = s.val
		}
	}
	return n, v
}

// Without returns the request target path?q without the argument name,
// every occurrence of it (compared unescaped); the other arguments keep
// their bytes and order, and no '?' is left when none remains.
func (s *Scratch) Without(path, q []byte, name string) []byte {
	t := append(s.target[:0], path...)
	mark := len(t)
	for len(q) > 0 {
		var kv []byte
		kv, q = cut(q, '&')
		if key, _, _ := cutEq(kv); unescapedEqual(key, name) {
			continue
		}
		if len(t) == mark {
			t = append(t, '?')
		} else {
			t = append(t, '&')
		}
		t = append(t, kv...)
	}
	s.target = t
	return t
}

// cut splits b at the first sep.
func cut(b []byte, sep byte) (before, after []byte) {
	for i, ch := range b {
		if ch == sep {
			return b[:i], b[i+1:]
		}
	}
	return b, nil
}

// cutEq splits one argument into its name and value.
func cutEq(kv []byte) (name, val []byte, eq bool) {
	for i, ch := range kv {
		if ch == '=' {
			return kv[:i], kv[i+1:], true
		}
	}
	return kv, nil, false
}

func unhex(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c - 'a' + 10)
	case 'A' <= c && c <= 'F':
		return int(c - 'A' + 10)
	}
	return -1
}

// unescapeAt decodes the byte of s at i as an argument's byte: "%XX" (3
// bytes), '+' a space, an invalid escape itself.
func unescapeAt(s []byte, i int) (b byte, width int) {
	switch s[i] {
	case '+':
		return ' ', 1
	case '%':
		if i+2 < len(s) {
			if h, l := unhex(s[i+1]), unhex(s[i+2]); h >= 0 && l >= 0 {
				return byte(h<<4 | l), 3
			}
		}
	}
	return s[i], 1
}

// unescape appends s, unescaped, to dst.
func unescape(dst, s []byte) []byte {
	for i := 0; i < len(s); {
		b, w := unescapeAt(s, i)
		dst = append(dst, b)
		i += w
	}
	return dst
}

// unescapedEqual reports whether s, unescaped, is name.
func unescapedEqual(s []byte, name string) bool {
	j := 0
	for i := 0; i < len(s); {
		b, w := unescapeAt(s, i)
		if j >= len(name) || name[j] != b {
			return false
		}
		i += w
		j++
	}
	return j == len(name)
}

// Decode is ngx.decode_args(q, 0), every argument of q as a table: a
// name's value unescaped (a string), the boolean true for an argument
// without '=', the values in order (a []any) for a name given more than
// once. Arguments with an empty name are skipped. It allocates: for the
// plugins that validate a form body as a whole (request-validation).
func Decode(q []byte) map[string]any {
	out := map[string]any{}
	for len(q) > 0 {
		var kv []byte
		kv, q = cut(q, '&')
		key, val, eq := cutEq(kv)
		if len(key) == 0 {
			continue
		}
		name := string(unescape(nil, key))
		var v any = true
		if eq {
			v = string(unescape(nil, val))
		}
		switch prev := out[name].(type) {
		case nil:
			out[name] = v
		case []any:
			out[name] = append(prev, v)
		default:
			out[name] = []any{prev, v}
		}
	}
	return out
}
