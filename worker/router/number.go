package router

import "strconv"

// luaNumber converts b the way Lua's tonumber converts a string: optional
// surrounding whitespace, an optional sign, then a decimal number (with
// optional fraction and exponent) or a hexadecimal integer "0x...". It does
// not allocate for inputs of up to 32 bytes that are well formed: the syntax
// is checked here first so that strconv never builds an error.
func luaNumber(b []byte) (float64, bool) {
	for len(b) > 0 && isLuaSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isLuaSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	body := b
	if body[0] == '+' || body[0] == '-' {
		neg = body[0] == '-'
		body = body[1:]
	}
	if len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		var v float64
		for _, c := range body[2:] {
			d, ok := hexVal(c)
			if !ok {
				return 0, false
			}
			v = v*16 + float64(d)
		}
		if neg {
			v = -v
		}
		return v, true
	}
	if !validDecimal(body) {
		return 0, false
	}
	v, err := strconv.ParseFloat(string(b), 64)
	if err != nil {
		// Only a range error gets here; ParseFloat returns ±Inf or 0 then,
		// which is what Lua gives too.
		if ne, ok := err.(*strconv.NumError); !ok || ne.Err != strconv.ErrRange {
			return 0, false
		}
	}
	return v, true
}

func isLuaSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// validDecimal reports whether b is digits [. digits] [(e|E) [sign] digits]
// with at least one mantissa digit.
func validDecimal(b []byte) bool {
	i, digits := 0, 0
	for i < len(b) && b[i] >= '0' && b[i] <= '9' {
		i++
		digits++
	}
	if i < len(b) && b[i] == '.' {
		i++
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			digits++
		}
	}
	if digits == 0 {
		return false
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		exp := 0
		for i < len(b) && b[i] >= '0' && b[i] <= '9' {
			i++
			exp++
		}
		if exp == 0 {
			return false
		}
	}
	return i == len(b)
}
