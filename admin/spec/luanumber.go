package spec

import "strconv"

// LuaNumber converts b the way Lua's tonumber converts a string: optional
// surrounding whitespace, an optional sign, then a decimal number (with
// optional fraction and exponent) or a hexadecimal integer "0x...". A
// decimal out of range is ±Inf (or 0), as in Lua. It is the one reading of
// numbers written as strings: ${{VAR}} values in configuration files and
// vars comparisons in the worker. It does not allocate for inputs of up to
// 32 bytes that are well formed: the syntax is checked here first so that
// strconv never builds an error.
func LuaNumber(b []byte) (float64, bool) {
	b = trimLuaSpace(b)
	if len(b) == 0 {
		return 0, false
	}
	neg := false
	body := b
	if body[0] == '+' || body[0] == '-' {
		neg = body[0] == '-'
		body = body[1:]
	}
	if v, ok := smallInt(body); ok {
		if neg {
			v = -v
		}
		return v, true
	}
	if isHexNumber(body) {
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

// smallInt reads b when it is decimal digits alone, at most 15 of them
// (every such integer is exact in a float64, as ParseFloat gives it): the
// numbers requests mostly carry ($status, a port, an id), read without
// ParseFloat.
func smallInt(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return float64(n), true
}

// luaInteger returns the integer s is written as, when LuaNumber accepted
// s as f and s is written as one (decimal digits or hexadecimal, no
// fraction or exponent) that fits in an int64: exactly for decimal, as Lua
// has it (a double) for hexadecimal.
func luaInteger(s string, f float64) (int64, bool) {
	b := trimLuaSpace([]byte(s))
	body := b
	if len(body) > 0 && (body[0] == '+' || body[0] == '-') {
		body = body[1:]
	}
	if isHexNumber(body) {
		if f >= -(1<<63) && f < 1<<63 {
			return int64(f), true
		}
		return 0, false
	}
	i, err := strconv.ParseInt(string(b), 10, 64)
	return i, err == nil
}

func isHexNumber(body []byte) bool {
	return len(body) > 2 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X')
}

func trimLuaSpace(b []byte) []byte {
	for len(b) > 0 && isLuaSpace(b[0]) {
		b = b[1:]
	}
	for len(b) > 0 && isLuaSpace(b[len(b)-1]) {
		b = b[:len(b)-1]
	}
	return b
}

func isLuaSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
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
