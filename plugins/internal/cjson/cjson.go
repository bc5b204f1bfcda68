// Package cjson writes JSON as APISIX's encoder (lua-cjson) writes it, for
// the bodies plugins answer with ({"error_msg":"..."}).
package cjson

// AppendString appends s as a JSON string the way APISIX's encoder
// (lua-cjson) writes it: '/' escaped too, other bytes as they are.
func AppendString(b []byte, s string) []byte {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '/':
			b = append(b, '\\', c)
		case '\n':
			b = append(b, '\\', 'n')
		case '\r':
			b = append(b, '\\', 'r')
		case '\t':
			b = append(b, '\\', 't')
		case '\b':
			b = append(b, '\\', 'b')
		case '\f':
			b = append(b, '\\', 'f')
		default:
			if c < 0x20 || c == 0x7f {
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&15])
				continue
			}
			b = append(b, c)
		}
	}
	return append(b, '"')
}
