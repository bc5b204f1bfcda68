package csrf

import (
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"time"

	"coregate/admin/spec"
	"coregate/httpvar"
	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "csrf"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is csrf's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin            = Plugin{}
	_ plugins.AccessPhase       = (*instance)(nil)
	_ plugins.HeaderFilterPhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// Check implements plugins.Plugin: the schema says everything.
func (Plugin) Check(json.RawMessage) error { return nil }

// conf is a configuration, with APISIX's defaults.
type conf struct {
	Key     string `json:"key"`
	Expires int64  `json:"expires"`
	Name    string `json:"name"`
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c := conf{Expires: 7200, Name: "apisix-csrf-token"}
	if err := json.Unmarshal(raw, &c); err != nil {
		return nil, err
	}
	return &instance{
		key:     []byte(c.Key),
		expires: c.Expires,
		name:    c.Name,
		cookie:  httpvar.Parse("cookie_" + c.Name),
		rnd:     rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())),
	}, nil
}

// APISIX's answers, {error_msg = ...} as core.response.exit writes them.
var (
	noHeader  = []byte(`{"error_msg":"no csrf token in headers"}` + "\n")
	noCookie  = []byte(`{"error_msg":"no csrf cookie"}` + "\n")
	mismatch  = []byte(`{"error_msg":"csrf token mismatch"}` + "\n")
	badSigned = []byte(`{"error_msg":"Failed to verify the csrf token signature"}` + "\n")
)

// instance is one built configuration. It belongs to one event loop (see
// plugins.Plugin): its random source and scratch buffers are used without
// locks.
type instance struct {
	key     []byte
	expires int64
	name    string
	cookie  httpvar.Var // $cookie_<name>
	rnd     *rand.Rand
	// Scratch, reused: the signed text, the token's JSON, the cookie.
	sign, tok, set []byte
	dec            []byte
	tk             token // the token being verified
}

// Access implements plugins.AccessPhase: an unsafe method (not GET, HEAD
// or OPTIONS) must send the token in the header name, equal to the cookie
// name, and the token must be signed with key and not expired.
func (in *instance) Access(c plugins.Ctx) {
	switch string(c.Method()) {
	case "GET", "HEAD", "OPTIONS":
		return
	}
	h := c.Header(in.name)
	if len(h) == 0 {
		c.Exit(401, noHeader)
		return
	}
	ck := c.Var(in.cookie)
	if ck == nil {
		c.Exit(401, noCookie)
		return
	}
	if string(h) != string(ck) {
		c.Exit(401, mismatch)
		return
	}
	if !in.verify(ck, time.Unix(0, c.Now()).Unix()) {
		c.Exit(401, badSigned)
	}
}

// verify is csrf.lua's check_csrf_token: the token is base64 of a JSON
// object whose random and expires, signed with the key, give its sign,
// and expires (the time it was made) is no older than the configuration's
// expires (0: never too old).
func (in *instance) verify(token []byte, now int64) bool {
	var err error
	in.dec, err = appendDecodeBase64(in.dec[:0], token)
	if err != nil {
		return false
	}
	f := &in.tk
	if !parseToken(in.dec, f) || f.random == nil || f.expires == nil || !f.expiresNum {
		return false
	}
	if in.expires > 0 && float64(now)-f.expiresVal > float64(in.expires) {
		return false
	}
	want := in.appendSign(in.sign[:0], f.random, f.expires)
	in.sign = want
	return f.sign != nil && subtle.ConstantTimeCompare(f.sign, want) == 1
}

// appendDecodeBase64 is ngx.decode_base64: the standard alphabet, the
// padding optional.
func appendDecodeBase64(dst, s []byte) ([]byte, error) {
	for len(s) > 0 && s[len(s)-1] == '=' {
		s = s[:len(s)-1]
	}
	return base64.RawStdEncoding.AppendDecode(dst, s)
}

// appendSign appends gen_sign's hex SHA-256 of
// "{expires:<expires>,random:<random>,key:<key>}", the values as the token
// writes them (Lua's tostring of a number, "%.14g").
func (in *instance) appendSign(dst, random, expires []byte) []byte {
	b := in.tok[:0]
	b = append(b, "{expires:"...)
	b = append(b, expires...)
	b = append(b, ",random:"...)
	b = append(b, random...)
	b = append(b, ",key:"...)
	b = append(b, in.key...)
	b = append(b, '}')
	in.tok = b
	sum := sha256.Sum256(b)
	return hex.AppendEncode(dst, sum[:])
}

// HeaderFilter implements plugins.HeaderFilterPhase: every response gets
// a new token, as csrf.lua's header_filter: Set-Cookie
// "<name>=<token>;path=/;SameSite=Lax;Expires=<now + expires>".
func (in *instance) HeaderFilter(c plugins.Ctx) {
	now := time.Unix(0, c.Now()).Unix()
	var rb, eb [32]byte
	random := appendLuaNumber(rb[:0], in.rnd.Float64())
	expires := strconv.AppendInt(eb[:0], now, 10)
	sign := in.appendSign(in.sign[:0], random, expires)
	in.sign = sign
	// The token's JSON, as cjson writes the table.
	t := in.dec[:0]
	t = append(t, `{"random":`...)
	t = append(t, random...)
	t = append(t, `,"expires":`...)
	t = append(t, expires...)
	t = append(t, `,"sign":"`...)
	t = append(t, sign...)
	t = append(t, `"}`...)
	in.dec = t
	s := append(in.set[:0], in.name...)
	s = append(s, '=')
	s = base64.StdEncoding.AppendEncode(s, t)
	s = append(s, ";path=/;SameSite=Lax;Expires="...)
	s = appendCookieTime(s, time.Unix(now+in.expires, 0).UTC())
	in.set = s
	c.AddResponseHeader("Set-Cookie", s)
}

// appendLuaNumber appends f as Lua's tostring and cjson write it: "%.14g".
func appendLuaNumber(b []byte, f float64) []byte {
	return strconv.AppendFloat(b, f, 'g', 14, 64)
}

// appendCookieTime appends t as ngx.cookie_time writes it: "Thu, 18-Nov-10
// 11:27:35 GMT", the year in two digits until 2037, in four after.
func appendCookieTime(b []byte, t time.Time) []byte {
	b = append(b, t.Weekday().String()[:3]...)
	b = append(b, ", "...)
	b = append2(b, t.Day())
	b = append(b, '-')
	b = append(b, t.Month().String()[:3]...)
	b = append(b, '-')
	if y := t.Year(); y > 2037 {
		b = strconv.AppendInt(b, int64(y), 10)
	} else {
		b = append2(b, y%100)
	}
	b = append(b, ' ')
	b = append2(b, t.Hour())
	b = append(b, ':')
	b = append2(b, t.Minute())
	b = append(b, ':')
	b = append2(b, t.Second())
	return append(b, " GMT"...)
}

func append2(b []byte, n int) []byte {
	return append(b, byte('0'+n/10), byte('0'+n%10))
}

// token is what check_csrf_token reads of a token's JSON: random and
// expires as they are concatenated into the signed text (a number as
// "%.14g", a string as it is), expires's value, and sign. The slices
// point into the decoded token or into the fields' own buffers.
type token struct {
	random, expires, sign []byte
	expiresVal            float64
	expiresNum            bool
	rbuf, ebuf            [32]byte
}

// parseToken reads into t a flat JSON object of string and number members, as
// cjson decodes the token; members of other types, and strings with
// escapes (a token csrf.lua never makes), make it false.
func parseToken(b []byte, t *token) bool {
	t.random, t.expires, t.sign, t.expiresVal, t.expiresNum = nil, nil, nil, 0, false
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return skipSpace(b, i+1) == len(b)
	}
	for {
		name, j, ok := readString(b, i)
		if !ok {
			return false
		}
		i = skipSpace(b, j)
		if i >= len(b) || b[i] != ':' {
			return false
		}
		i = skipSpace(b, i+1)
		if i >= len(b) {
			return false
		}
		var val []byte
		isStr := b[i] == '"'
		if isStr {
			val, i, ok = readString(b, i)
			if !ok {
				return false
			}
		} else {
			j := i
			for j < len(b) && (b[j] == '-' || b[j] == '+' || b[j] == '.' || b[j] == 'e' || b[j] == 'E' || '0' <= b[j] && b[j] <= '9') {
				j++
			}
			val, i = b[i:j], j
			if len(val) == 0 {
				return false
			}
		}
		switch string(name) {
		case "random":
			t.random = val
			if !isStr {
				n, ok := spec.LuaNumber(val)
				if !ok {
					return false
				}
				t.random = appendLuaNumber(t.rbuf[:0], n)
			}
		case "expires":
			n, num := spec.LuaNumber(val)
			t.expires, t.expiresVal, t.expiresNum = val, n, num
			if num && !isStr {
				t.expires = appendLuaNumber(t.ebuf[:0], n)
			}
		case "sign":
			if isStr {
				t.sign = val
			}
		}
		i = skipSpace(b, i)
		if i >= len(b) {
			return false
		}
		switch b[i] {
		case ',':
			i = skipSpace(b, i+1)
		case '}':
			return skipSpace(b, i+1) == len(b)
		default:
			return false
		}
	}
}

func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// readString reads the JSON string at b[i] (its opening quote): its
// bytes, and the index after its closing quote; false for one with an
// escape or unterminated.
func readString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return b[i+1 : j], j + 1, true
		case '\\':
			return nil, i, false
		}
	}
	return nil, i, false
}
