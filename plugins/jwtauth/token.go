package jwtauth

import (
	"bytes"
	"encoding/base64"
	"strconv"
	"unicode/utf8"
	"unsafe"
)

// token is one JWT as the request path reads it, without allocating: its
// parts are slices of the token, the decoded header and payload slices of
// the instance's scratch buffers.
type token struct {
	signed []byte // "<header>.<payload>", what the signature covers
	sig    []byte // the signature, decoded

	alg    []byte // the header's "alg", unescaped; nil when not a string
	hasAlg bool

	key      []byte // the payload's key claim, unescaped
	keyState claim
	times
}

// times are a token's exp and nbf claims, what a verification checks
// against the clock, and what the token cache keeps of a token for it.
type times struct {
	exp, nbf float64
	expState claim
	nbfState claim
}

// claim is what a payload holds under one name.
type claim uint8

const (
	absent   claim = iota
	isString       // key
	isNumber       // exp, nbf
	isOther        // any other JSON value, null included
)

// scratch holds the buffers a token is decoded into, reused from request
// to request; what a parse returns lives until the next parse.
type scratch struct {
	header, payload, sig []byte // decoded
	str                  []byte // an unescaped string
	alg, key             []byte // copies of the unescaped header's alg and key claim
}

// parse reads tok as resty.jwt's load_jwt does for a JWS: three parts
// separated by '.', the first two base64url (padding optional) JSON
// objects, the third base64url. keyClaim is the payload member naming the
// consumer. false: the token is invalid.
func (s *scratch) parse(tok []byte, keyClaim string, t *token) bool {
	*t = token{}
	d1 := bytes.IndexByte(tok, '.')
	if d1 < 0 {
		return false
	}
	d2 := bytes.IndexByte(tok[d1+1:], '.')
	if d2 < 0 {
		return false
	}
	d2 += d1 + 1
	if bytes.IndexByte(tok[d2+1:], '.') >= 0 {
		return false
	}
	var ok bool
	if s.header, ok = decodeLax(s.header, tok[:d1]); !ok {
		return false
	}
	if s.payload, ok = decodeLax(s.payload, tok[d1+1:d2]); !ok {
		return false
	}
	if s.sig, ok = decodeURL(s.sig, tok[d2+1:]); !ok {
		return false
	}
	t.signed, t.sig = tok[:d2], s.sig

	// The header: "alg", the last one if given twice, as cjson keeps.
	sc := jsonScanner{b: s.header}
	ok = sc.object(func(name, val []byte) bool {
		if !s.nameIs(name, "alg") {
			return true
		}
		t.hasAlg = true
		t.alg = nil
		if val[0] == '"' {
			v, ok := s.unquote(val)
			if !ok {
				return false
			}
			s.alg = append(s.alg[:0], v...)
			t.alg = s.alg
		}
		return true
	})
	if !ok {
		return false
	}
	sc = jsonScanner{b: s.payload}
	return sc.object(func(name, val []byte) bool {
		switch {
		case s.nameIs(name, keyClaim):
			t.keyState = isOther
			if val[0] == '"' {
				v, ok := s.unquote(val)
				if !ok {
					return false
				}
				s.key = append(s.key[:0], v...)
				t.key, t.keyState = s.key, isString
			}
			if keyClaim != "exp" && keyClaim != "nbf" {
				return true
			}
		}
		switch {
		case s.nameIs(name, "exp"):
			t.exp, t.expState = number(val)
		case s.nameIs(name, "nbf"):
			t.nbf, t.nbfState = number(val)
		}
		return true
	})
}

// nameIs reports whether a member's name, quoted, is want once unescaped.
func (s *scratch) nameIs(quoted []byte, want string) bool {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return string(raw) == want
	}
	v, ok := s.unquote(quoted)
	return ok && string(v) == want
}

// unquote returns a JSON string's value, in s.str when it has escapes.
func (s *scratch) unquote(quoted []byte) ([]byte, bool) {
	raw := quoted[1 : len(quoted)-1]
	if bytes.IndexByte(raw, '\\') < 0 {
		return raw, true
	}
	var ok bool
	s.str, ok = unescapeJSON(s.str[:0], raw)
	return s.str, ok
}

// number is a JSON value as a claim: its value when it is a number. An
// integer of up to 15 digits, what exp and nbf are, is exact in a
// float64 and read here, as ParseFloat reads it, without ParseFloat's
// some 550 instructions.
func number(val []byte) (float64, claim) {
	if c := val[0]; c != '-' && (c < '0' || c > '9') {
		return 0, isOther
	}
	if len(val) <= 16 {
		digits := val
		if val[0] == '-' {
			digits = val[1:]
		}
		n := int64(0)
		for _, c := range digits {
			if c < '0' || c > '9' {
				n = -1
				break
			}
			n = n*10 + int64(c-'0')
		}
		if n >= 0 && len(digits) > 0 && len(digits) <= 15 {
			f := float64(n)
			if val[0] == '-' {
				f = -f
			}
			return f, isNumber
		}
	}
	// The scanner checked the number's syntax; strconv copies what it
	// keeps of the string in an error, so the unsafe view does not leak.
	f, err := strconv.ParseFloat(unsafe.String(&val[0], len(val)), 64)
	if err != nil && f == 0 {
		return 0, isOther
	}
	return f, isNumber
}

// decodeLax decodes src into dst[:0] as resty.jwt's jwt_decode does: the
// URL alphabet or the standard one ('-' and '_' read as '+' and '/'),
// padding optional, and what follows a first '=' ignored
// (ngx.decode_base64). It reads four characters at a time through
// laxAlphabet, where handing each four to encoding/base64 took 5 300
// instructions of an HS256 token's 20 500 (header and payload, under
// valgrind); FuzzDecode holds it to encoding/base64's answers.
func decodeLax(dst, src []byte) ([]byte, bool) {
	n := len(src)
	if i := bytes.IndexByte(src, '='); i >= 0 {
		n = i
	}
	if n%4 == 1 {
		return dst, false
	}
	need := base64.RawStdEncoding.DecodedLen(n)
	if cap(dst) < need {
		dst = make([]byte, 0, max(need, 256))
	}
	out := dst[:need]
	src = src[:n]
	j := 0
	for ; len(src) >= 4; src = src[4:] {
		a, b, c, d := laxAlphabet[src[0]], laxAlphabet[src[1]], laxAlphabet[src[2]], laxAlphabet[src[3]]
		if a|b|c|d > 63 {
			return dst, false
		}
		out[j], out[j+1], out[j+2] = a<<2|b>>4, b<<4|c>>2, c<<6|d
		j += 3
	}
	switch len(src) {
	case 2:
		a, b := laxAlphabet[src[0]], laxAlphabet[src[1]]
		if a|b > 63 {
			return dst, false
		}
		out[j] = a<<2 | b>>4
		j++
	case 3:
		a, b, c := laxAlphabet[src[0]], laxAlphabet[src[1]], laxAlphabet[src[2]]
		if a|b|c > 63 {
			return dst, false
		}
		out[j], out[j+1] = a<<2|b>>4, b<<4|c>>2
		j += 2
	}
	return out[:j], true
}

// laxAlphabet is each character's value in decodeLax's alphabets (the
// standard one with '-' and '_' for '+' and '/'), 0xff for the others.
var laxAlphabet = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i, c := range "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/" {
		t[c] = byte(i)
	}
	t['-'], t['_'] = 62, 63
	return t
}()

// decodeURL decodes the signature as ngx.base64.decode_base64url does:
// the URL alphabet without padding.
func decodeURL(dst, src []byte) ([]byte, bool) {
	need := base64.RawURLEncoding.DecodedLen(len(src))
	if cap(dst) < need {
		dst = make([]byte, 0, max(need, 512))
	}
	n, err := base64.RawURLEncoding.Decode(dst[:need], src)
	if err != nil {
		return dst, false
	}
	return dst[:n], true
}

// jsonScanner checks one JSON text, an object, and gives its members.
type jsonScanner struct {
	b []byte
	i int
}

// object scans b, which must be a JSON object and nothing else (white
// space aside), calling member with each member's name (quoted, escapes
// not decoded) and value (as written), in order; member returns false to
// refuse the text. false: not a JSON object.
func (s *jsonScanner) object(member func(name, val []byte) bool) bool {
	s.ws()
	if !s.eat('{') {
		return false
	}
	s.ws()
	if !s.eat('}') {
		for {
			start := s.i
			if !s.str() {
				return false
			}
			name := s.b[start:s.i]
			s.ws()
			if !s.eat(':') {
				return false
			}
			s.ws()
			start = s.i
			if !s.value(0) {
				return false
			}
			if !member(name, s.b[start:s.i]) {
				return false
			}
			s.ws()
			if s.eat('}') {
				break
			}
			if !s.eat(',') {
				return false
			}
			s.ws()
		}
	}
	s.ws()
	return s.i == len(s.b)
}

// maxDepth bounds the nesting of values, as cjson's decode_max_depth.
const maxDepth = 1000

func (s *jsonScanner) value(depth int) bool {
	if s.i >= len(s.b) || depth > maxDepth {
		return false
	}
	switch c := s.b[s.i]; {
	case c == '"':
		return s.str()
	case c == '{':
		s.i++
		s.ws()
		if s.eat('}') {
			return true
		}
		for {
			if !s.str() {
				return false
			}
			s.ws()
			if !s.eat(':') {
				return false
			}
			s.ws()
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.eat('}') {
				return true
			}
			if !s.eat(',') {
				return false
			}
			s.ws()
		}
	case c == '[':
		s.i++
		s.ws()
		if s.eat(']') {
			return true
		}
		for {
			if !s.value(depth + 1) {
				return false
			}
			s.ws()
			if s.eat(']') {
				return true
			}
			if !s.eat(',') {
				return false
			}
			s.ws()
		}
	case c == '-' || '0' <= c && c <= '9':
		return s.num()
	default:
		return s.lit("true") || s.lit("false") || s.lit("null")
	}
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return
		}
	}
}

func (s *jsonScanner) eat(c byte) bool {
	if s.i < len(s.b) && s.b[s.i] == c {
		s.i++
		return true
	}
	return false
}

func (s *jsonScanner) lit(w string) bool {
	if len(s.b)-s.i >= len(w) && string(s.b[s.i:s.i+len(w)]) == w {
		s.i += len(w)
		return true
	}
	return false
}

// str scans a string, checking its escapes.
func (s *jsonScanner) str() bool {
	if !s.eat('"') {
		return false
	}
	for s.i < len(s.b) {
		c := s.b[s.i]
		s.i++
		switch {
		case c == '"':
			return true
		case c < 0x20:
			return false
		case c == '\\':
			if s.i >= len(s.b) {
				return false
			}
			e := s.b[s.i]
			s.i++
			switch e {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if len(s.b)-s.i < 4 {
					return false
				}
				for _, h := range s.b[s.i : s.i+4] {
					if unhex(h) < 0 {
						return false
					}
				}
				s.i += 4
			default:
				return false
			}
		}
	}
	return false
}

func (s *jsonScanner) num() bool {
	start := s.i
	s.eat('-')
	digits := func() int {
		n := 0
		for s.i < len(s.b) && '0' <= s.b[s.i] && s.b[s.i] <= '9' {
			s.i++
			n++
		}
		return n
	}
	if digits() == 0 {
		return false
	}
	if s.eat('.') && digits() == 0 {
		return false
	}
	if s.eat('e') || s.eat('E') {
		if !s.eat('+') {
			s.eat('-')
		}
		if digits() == 0 {
			return false
		}
	}
	return s.i > start
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

// unescapeJSON appends the value of a JSON string's contents raw (checked
// by the scanner) to dst.
func unescapeJSON(dst, raw []byte) ([]byte, bool) {
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c != '\\' {
			dst = append(dst, c)
			continue
		}
		i++
		switch raw[i] {
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(raw[i+1:])
			i += 4
			if 0xD800 <= r && r < 0xDC00 && i+6 < len(raw) && raw[i+1] == '\\' && raw[i+2] == 'u' {
				if lo := hex4(raw[i+3:]); 0xDC00 <= lo && lo < 0xE000 {
					r = 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00)
					i += 6
				}
			}
			dst = utf8.AppendRune(dst, r)
		default: // '"', '\\', '/'
			dst = append(dst, raw[i])
		}
	}
	return dst, true
}

func hex4(b []byte) rune {
	return rune(unhex(b[0])<<12 | unhex(b[1])<<8 | unhex(b[2])<<4 | unhex(b[3]))
}
