// Package jsonesc escapes text for a JSON string, in the styles of the
// encoders coregate must match byte for byte: Go's encoding/json without
// HTML escaping (the Admin API's canonical JSON), nginx's log_format
// escape=json (the access log) and lua-cjson (the bodies APISIX's plugins
// answer with). It imports only the standard library, so that the config
// model may use it; its functions are safe for concurrent use and do not
// allocate beyond growing b.
package jsonesc

import "unicode/utf8"

// Style says how the bytes that need no escape in every style are written.
// '"', '\\', '\n', '\r' and '\t' are always written \" \\ \n \r \t; the
// other bytes below 0x20 as \u00hh.
type Style uint8

const (
	// Slash writes '/' as \/, as lua-cjson does.
	Slash Style = 1 << iota
	// Del writes 0x7f as \u007f, as lua-cjson does.
	Del
	// ShortBF writes '\b' and '\f' as \b and \f, not \u0008 and \u000c.
	ShortBF
	// UpperHex writes \u00hh in upper-case hex digits, as nginx does.
	UpperHex
	// UTF8 writes invalid UTF-8 as \ufffd and U+2028 and U+2029 as
	// \u2028 and \u2029, as encoding/json does; without it bytes from 0x80
	// on are written as they are.
	UTF8
)

// The styles of coregate's three writers of JSON strings.
const (
	// Go is encoding/json's (without HTML escaping): the Admin API's
	// canonical JSON (admin/spec).
	Go = UTF8
	// Nginx is nginx's log_format escape=json (ngx_escape_json).
	Nginx = ShortBF | UpperHex
	// CJSON is lua-cjson's, APISIX's encoder.
	CJSON = Slash | Del | ShortBF
)

// plain reports whether c is written as it is in style st.
func plain(c byte, st Style) bool {
	switch {
	case c < 0x20 || c == '"' || c == '\\':
		return false
	case c < 0x7f:
		return c != '/' || st&Slash == 0
	case c == 0x7f:
		return st&Del == 0
	}
	return st&UTF8 == 0
}

// Append appends s escaped in style st to b, without quotes. A value with
// nothing to escape is copied once.
func Append[T string | []byte](b []byte, s T, st Style) []byte {
	i := 0
	for i < len(s) && plain(s[i], st) {
		i++
	}
	b = append(b, s[:i]...)
	for i < len(s) {
		c := s[i]
		if plain(c, st) {
			b = append(b, c)
			i++
			continue
		}
		switch c {
		case '"', '\\', '/':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		default:
			if c >= utf8.RuneSelf && c != 0x7f {
				// Only in style UTF8.
				end := min(i+utf8.UTFMax, len(s))
				r, size := utf8.DecodeRuneInString(string(s[i:end]))
				switch {
				case r == utf8.RuneError && size == 1:
					b = append(b, `\ufffd`...)
				case r == '\u2028' || r == '\u2029':
					b = append(b, '\\', 'u', '2', '0', '2', "0123456789abcdef"[r&0xf])
				default:
					b = append(b, s[i:i+size]...)
				}
				i += size
				continue
			}
			if st&ShortBF != 0 && c == '\b' {
				b = append(b, '\\', 'b')
			} else if st&ShortBF != 0 && c == '\f' {
				b = append(b, '\\', 'f')
			} else {
				hex := "0123456789abcdef"
				if st&UpperHex != 0 {
					hex = "0123456789ABCDEF"
				}
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&15])
			}
		}
		i++
	}
	return b
}

// AppendQuoted appends s escaped in style st between double quotes.
func AppendQuoted[T string | []byte](b []byte, s T, st Style) []byte {
	return append(Append(append(b, '"'), s, st), '"')
}
