package responserewrite

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unsafe"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/resub"
	"coregate/plugins/internal/varexpr"
	"coregate/plugins/internal/vartpl"
)

// Name is the plugin's wire name.
const Name = "response-rewrite"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is response-rewrite's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin            = Plugin{}
	_ plugins.HeaderFilterPhase = (*instance)(nil)
	_ plugins.BodyFilterPhase   = (*instance)(nil)
	_ plugins.LogPhase          = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// APISIX's messages, as check_schema writes them.
var (
	ErrBase64      = errors.New("invalid base64 content")
	ErrFieldLength = errors.New("invalid field length in header")
	ErrValueType   = errors.New("invalid type as header value")
	// ErrBodyFilters is the schema's dependencies refusing body and
	// filters together, as APISIX's validator writes it.
	ErrBodyFilters = errors.New(`failed to validate dependent schema for "filters|body": value wasn't supposed to match schema`)
)

// conf is a configuration, with APISIX's defaults.
type conf struct {
	MaxRespBodySize int             `json:"max_resp_body_size"`
	Headers         json.RawMessage `json:"headers"`
	Body            *string         `json:"body"`
	BodyBase64      bool            `json:"body_base64"`
	StatusCode      int             `json:"status_code"`
	Vars            json.RawMessage `json:"vars"`
	Filters         []filterConf    `json:"filters"`
}

type filterConf struct {
	Regex   string `json:"regex"`
	Scope   string `json:"scope"`
	Replace string `json:"replace"`
	Options string `json:"options"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{MaxRespBodySize: 67108864}
	if err := json.Unmarshal(raw, &c); err != nil {
		return c, err
	}
	for i := range c.Filters {
		if c.Filters[i].Scope == "" {
			c.Filters[i].Scope = "once"
		}
		// options' default, "jo", changes nothing (compileRegex).
	}
	return c, nil
}

// Check implements plugins.Plugin: the old form of headers, the base64
// body, the filters' patterns and the vars, as check_schema does.
func (Plugin) Check(raw json.RawMessage) error {
	_, err := compile(raw)
	return err
}

// Build implements plugins.Plugin. A configuration without body or
// filters builds a headersOnly instance, which keeps its rules only.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	in, err := compile(raw)
	if err != nil {
		return nil, err
	}
	if !in.hasBody && len(in.filters) == 0 {
		if s, ok := in.rules.oneLiteral(); ok {
			return s, nil
		}
		r := in.rules // a copy: the instance, three times as large, is not kept
		return headersOnly{&r}, nil
	}
	return in, nil
}

// setLiteral is the instance of the most common configuration, headers
// that set one field to a literal value (`{"headers":{"set":{"X-Route":
// "r1"}}}`, or its plain-object form) and nothing else: no status, no
// vars, no add or remove. It keeps the name and the value, the decoded
// configuration's strings, 32 bytes, a size class (48 with the value a
// copy in a byte slice), where a headersOnly instance of the same
// configuration holds its rules (112 bytes), a one-element slice of
// header (64) and a scratch buffer the value is rendered into on the first
// response (8): at 50 000 routes each with a header of its own, some 150
// bytes a route (BenchmarkRouteMemory, TestSetLiteralSize). value is
// read-only, for the instance's lifetime, viewed as bytes on each
// response: SetResponseHeader copies it, so that it needs no rendering
// and no scratch. Safe for use by any number of loops.
type setLiteral struct {
	name  string
	value string
}

var _ plugins.HeaderFilterPhase = (*setLiteral)(nil)

// HeaderFilter implements plugins.HeaderFilterPhase: the one field set,
// as headersOnly's with no vars and no status.
func (s *setLiteral) HeaderFilter(c plugins.Ctx) {
	c.SetResponseHeader(s.name, unsafe.Slice(unsafe.StringData(s.value), len(s.value)))
}

// oneLiteral is r as a setLiteral where that is all it does: one field
// set to a value without variables.
func (r *rules) oneLiteral() (*setLiteral, bool) {
	if r.status != 0 || r.cond != nil || len(r.add) != 0 || len(r.remove) != 0 || len(r.set) != 1 {
		return nil, false
	}
	h := &r.set[0]
	lit, ok := h.value.Literal()
	if !ok {
		return nil, false
	}
	return &setLiteral{name: h.name, value: lit}, true
}

// headersOnly is an instance whose configuration leaves the body alone
// (status_code, headers, vars): it runs in header_filter only, so that the
// worker forwards the body as it comes, its Content-Length kept, as
// APISIX's does, where a body_filter phase would have it frame the body
// itself (chunked) and see every piece. Safe as the rules it holds.
type headersOnly struct{ r *rules }

var _ plugins.HeaderFilterPhase = headersOnly{}

// HeaderFilter implements plugins.HeaderFilterPhase: vars, then the
// status and the headers, as instance's without a body.
func (h headersOnly) HeaderFilter(c plugins.Ctx) {
	if !h.r.matched(c) {
		return
	}
	if h.r.status != 0 {
		c.SetStatus(h.r.status)
	}
	h.r.setHeaders(c)
}

// compile reads a configuration into an instance, with check_schema's
// errors.
func compile(raw json.RawMessage) (*instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	if c.Body != nil && c.Filters != nil {
		return nil, ErrBodyFilters
	}
	in := &instance{rules: rules{status: c.StatusCode}, max: c.MaxRespBodySize}
	if len(c.Headers) > 0 {
		if err := in.compileHeaders(c.Headers); err != nil {
			return nil, err
		}
	}
	if c.Body != nil {
		in.hasBody = true
		in.body = []byte(*c.Body)
		if c.BodyBase64 {
			if in.body, err = decodeBase64(*c.Body); err != nil {
				return nil, err
			}
		}
	} else if c.BodyBase64 {
		return nil, ErrBase64
	}
	if len(c.Vars) > 0 {
		in.cond = new(cond)
		if in.cond.vars, err = varexpr.Compile(c.Vars); err != nil {
			return nil, fmt.Errorf("failed to validate the 'vars' expression: %w", err)
		}
		in.cond.ev.ResponseStatus = true
	}
	for _, f := range c.Filters {
		re, err := compileRegex(f.Regex, f.Options)
		if err != nil {
			return nil, fmt.Errorf("regex %q validation failed: %w", f.Regex, err)
		}
		tm, err := resub.ParseTemplate(f.Replace)
		if err != nil {
			return nil, fmt.Errorf("filters: replace %q: %w", f.Replace, err)
		}
		fl := filter{re: re, tmpl: tm, global: f.Scope == "global"}
		if prefix, complete := re.LiteralPrefix(); complete && prefix != "" {
			fl.lit = []byte(prefix)
			fl.fixed, fl.isFixed = tm.Literal()
			var w [8]byte
			k := copy(w[:], fl.lit)
			fl.head = binary.LittleEndian.Uint64(w[:])
			fl.headMask = ^uint64(0) >> (64 - 8*k)
			if fl.isFixed && len(fl.fixed) == k && k == len(fl.lit) {
				var w [8]byte
				copy(w[:], fl.fixed)
				fl.fixedHead = binary.LittleEndian.Uint64(w[:])
				fl.swept = fl.global && k >= 4 && !bordered(fl.lit)
				fl.wide = k > 4
				for j := range k {
					fl.probe[j] = uint64(fl.lit[j]) * 0x0101010101010101
					fl.keep[j] = ^uint64(0)
				}
			}
		}
		in.filters = append(in.filters, fl)
	}
	if len(in.filters) == 1 && in.max < 1<<(64-takenShift) {
		f := &in.filters[0]
		in.streamed = f.lit != nil && f.isFixed && len(f.fixed) == len(f.lit)
	}
	return in, nil
}

// decodeBase64 is ngx.decode_base64: standard alphabet, padding optional;
// an empty or malformed text is ErrBase64.
func decodeBase64(s string) ([]byte, error) {
	if s == "" {
		return nil, ErrBase64
	}
	b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(s, "="))
	if err != nil {
		return nil, ErrBase64
	}
	return b, nil
}

// compileHeaders reads headers in either of APISIX's forms: {add, set,
// remove} (3.x) or a plain object of fields to set.
func (in *instance) compileHeaders(raw json.RawMessage) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	isArr := func(k string) bool {
		v := bytes.TrimSpace(obj[k])
		return len(v) > 0 && (v[0] == '[' || v[0] == '{')
	}
	if !isArr("add") && !isArr("set") && !isArr("remove") {
		return in.compileSet(obj)
	}
	if a := obj["add"]; len(a) > 0 {
		var adds []string
		if err := json.Unmarshal(a, &adds); err != nil {
			return err
		}
		for _, s := range adds {
			m := addRe.FindStringSubmatch(s)
			if m == nil {
				return fmt.Errorf("invalid header %q in headers.add: want \"Name: value\" with no spaces in the name", s)
			}
			in.add = append(in.add, header{name: m[1], value: vartpl.Parse(m[2])})
		}
	}
	if s := obj["set"]; len(s) > 0 {
		var set map[string]json.RawMessage
		if err := json.Unmarshal(s, &set); err != nil {
			return err
		}
		if err := in.compileSet(set); err != nil {
			return err
		}
	}
	if r := obj["remove"]; len(r) > 0 {
		if err := json.Unmarshal(r, &in.remove); err != nil {
			return err
		}
	}
	return nil
}

// addRe is create_header_operation's reading of an "add" entry.
var addRe = regexp.MustCompile(`^([^:\s]+)\s*:\s*([^:]+)$`)

// compileSet reads an object of fields to set, in name order (APISIX
// walks it with pairs, in no order).
func (in *instance) compileSet(obj map[string]json.RawMessage) error {
	names := make([]string, 0, len(obj))
	for k := range obj {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if k == "" {
			return ErrFieldLength
		}
		v, ok := headerText(obj[k])
		if !ok {
			return ErrValueType
		}
		in.set = append(in.set, header{name: k, value: vartpl.Parse(v)})
	}
	return nil
}

// headerText is a header's value as APISIX writes it: a string as is, a
// number as Lua's tostring ("%.14g"); false for other types.
func headerText(raw json.RawMessage) (string, bool) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return strconv.FormatFloat(f, 'g', 14, 64), true
	}
	return "", false
}

// compileRegex compiles a filter's pattern with its ngx.re options: i, m
// and s map to RE2's flags, a anchors the pattern at the start, j, o, u,
// U, d, D and J (PCRE's JIT, caching, UTF-8, DFA and duplicate names) need
// nothing; x (extended) has no RE2 counterpart and is refused.
func compileRegex(pattern, options string) (*regexp.Regexp, error) {
	var flags []byte
	anchored := false
	for i := 0; i < len(options); i++ {
		switch c := options[i]; c {
		case 'i', 'm', 's':
			if bytes.IndexByte(flags, c) < 0 {
				flags = append(flags, c)
			}
		case 'a':
			anchored = true
		case 'j', 'o', 'u', 'U', 'd', 'D', 'J':
		case 'x':
			return nil, fmt.Errorf("flag \"x\" (extended) is not supported (flags %q)", options)
		default:
			return nil, fmt.Errorf("unknown flag %q (flags %q)", string(c), options)
		}
	}
	p := pattern
	if anchored {
		p = `\A(?:` + p + `)`
	}
	if len(flags) > 0 {
		p = "(?" + string(flags) + ")" + p
	}
	re, err := regexp.Compile(p)
	if err != nil {
		return nil, errors.New("failed to compile the regex (RE2 syntax: no lookaround, no backreferences): " + err.Error())
	}
	return re, nil
}

// header is one field to add or set, its value resolved per response.
type header struct {
	name  string
	value vartpl.Template
}

// filter is one compiled filter. lit is the text of a pattern that is a
// literal (no metacharacters, no flags that change matching): it is found
// without regexp (index), and so without its allocations. fixed is, for
// such a pattern, the replacement when it refers to no group (isFixed):
// written as it is, and over the match in place when it is as long.
type filter struct {
	re      *regexp.Regexp
	lit     []byte
	fixed   []byte
	isFixed bool
	tmpl    resub.Template
	global  bool
	// head is the literal's first eight bytes (fewer: the rest zero)
	// read as a little-endian word, headMask the bits that are its.
	head, headMask uint64
	// fixedHead is fixed read as head is the literal, where fixed is as
	// long as the literal and at most eight bytes (put).
	fixedHead uint64
	// swept: a global filter whose literal, of four to eight bytes, is
	// replaced by fixed as long and has no border (no proper prefix that
	// is also its suffix), so that its matches never overlap and are all
	// of its places: sweep rewrites a stretch of them without looking at
	// each. probe is the literal's bytes, each in every byte of a word,
	// keep all ones for each of them (zero past its length); wide: the
	// literal is longer than four bytes, and sweep reads eight words at
	// each place, not four.
	swept bool
	wide  bool
	probe [8]uint64
	keep  [8]uint64
}

// maxFalseStarts is the number of places where the literal's first byte
// but not the rest is found that index tolerates in one call before it
// hands the search to bytes.Index, which is linear in the worst case.
const maxFalseStarts = 16

// index is the position of the literal's first match in body at or after
// from; -1 when none. A body's matches may be a few bytes apart (the bench
// row's: every 10 bytes), where a call of bytes.Index costs more than its
// search: the first byte is looked for eight bytes at a time in a word (a
// word's bytes equal to it found by the carry of a subtraction, the lowest
// one exactly), and the rest compared where it is (matchAt). Past
// swarWords words without it, bytes.IndexByte's vector search takes over.
func (f *filter) index(body []byte, from int) int {
	const lo, hi = 0x0101010101010101, 0x8080808080808080
	lit := f.lit
	c0 := lit[0]
	pat := uint64(c0) * lo
	end := len(body) - len(lit) + 1 // past the last place a match can start
	fails := 0
	for i := from; i < end; i++ {
		if body[i] != c0 {
			found := false
			for w := 0; w < swarWords && i+8 <= end; w++ {
				v := binary.LittleEndian.Uint64(body[i:]) ^ pat
				if z := (v - lo) &^ v & hi; z != 0 {
					i += bits.TrailingZeros64(z) >> 3
					found = true
					break
				}
				i += 8
			}
			if !found {
				j := bytes.IndexByte(body[i:end], c0)
				if j < 0 {
					return -1
				}
				i += j
			}
		}
		if f.matchAt(body, i) {
			return i
		}
		if fails++; fails > maxFalseStarts {
			if j := bytes.Index(body[i+1:], lit); j >= 0 {
				return i + 1 + j
			}
			return -1
		}
	}
	return -1
}

// matchAt reports whether the literal is at body[i:], i+len(lit) within
// body: its first eight bytes compared as a word where body has eight
// from i, the rest as a string.
func (f *filter) matchAt(body []byte, i int) bool {
	n := len(f.lit)
	if i+8 <= len(body) {
		if (binary.LittleEndian.Uint64(body[i:])^f.head)&f.headMask != 0 {
			return false
		}
		return n <= 8 || string(body[i+8:i+n]) == string(f.lit[8:])
	}
	return string(body[i:i+n]) == string(f.lit)
}

// swarWords is how many words index reads looking for the literal's first
// byte before it calls bytes.IndexByte, whose vector search pays for its
// call only over a longer stretch.
const swarWords = 4

// next is the indices of the literal's first match in body at or after
// from, in caps; nil when none.
func (f *filter) next(body []byte, from int, caps *[2]int) []int {
	i := f.index(body, from)
	if i < 0 {
		return nil
	}
	caps[0], caps[1] = i, i+len(f.lit)
	return caps[:]
}

// overwrite replaces the literal's matches in body (the first, for once)
// in place with fixed, which is as long, and returns the end of the last
// match, 0 when none. A global search goes on from the end of the last
// match, past what it wrote.
func (f *filter) overwrite(body []byte) int { return f.overwriteFrom(body, f.index(body, 0)) }

// overwriteFrom is overwrite where the first match is at i (index's), -1
// for none. A swept filter's matches are rewritten from each one index
// finds by sweep, until it meets a stretch without one.
func (f *filter) overwriteFrom(body []byte, i int) int {
	end := 0
	for i >= 0 {
		if f.swept {
			e, stop := f.sweep(body, i)
			end = max(end, e)
			i = f.index(body, stop)
			continue
		}
		f.put(body, i)
		end = i + len(f.lit)
		if !f.global {
			break
		}
		i = f.index(body, end)
	}
	return end
}

// sweep rewrites in place the matches of a swept filter's literal in body
// from i, one of them, eight places at a time: a word's byte k is zero
// where the literal is at i+k (the literal's bytes compared in words read
// at i, i+1, ... each XORed with its byte in every lane, ORed together),
// found exactly (the high bit of each byte, set where its low seven bits
// or itself is not zero). Those bytes, as a one at each place a match
// starts, multiplied by the literal XOR fixed, give in one multiplication
// what turns each match into fixed, XORed over the word, and in the high
// word of the product what spills into the next: matches do not overlap,
// so no product's bytes carry into another's (sweepWord). Every word is
// written, two at a time. That costs no branch per match, where the bench
// row's body has one every 10 bytes, and stops after two words without
// one (index crosses a long stretch without one faster), or before the
// last places of body, where a word read would pass its end. It returns
// the end of the last match and stop, where the search goes on (at or
// past that end).
func (f *filter) sweep(body []byte, i int) (end, stop int) {
	// In locals, which the stores into body cannot change.
	p0, p1, p2, p3 := f.probe[0], f.probe[1], f.probe[2], f.probe[3]
	delta, wide := f.head^f.fixedHead, f.wide
	var spill uint64  // the changes of the last word's matches past it
	var x0, x1 uint64 // wideWord's, for a wide literal
	// The starts of the last two words read with a match in either,
	// and the bytes past them.
	var last0, last1 uint64
	lastLeft := 0
	b := body[i:]
	quiet := false
	// Two words at a time, then one where there is room for one only.
	for len(b) >= 23 {
		if wide {
			x0, x1 = f.wideWord(b), f.wideWord(b[8:])
		}
		s0, w0, h0 := sweepWord(b, p0, p1, p2, p3, x0, delta, spill)
		s1, w1, h1 := sweepWord(b[8:], p0, p1, p2, p3, x1, delta, h0)
		binary.LittleEndian.PutUint64(b, w0)
		binary.LittleEndian.PutUint64(b[8:], w1)
		spill = h1
		b = b[16:]
		if s0|s1 == 0 {
			quiet = true // two words without a match: spill is zero
			break
		}
		last0, last1, lastLeft = s0, s1, len(b)
	}
	if !quiet && len(b) >= 15 {
		if wide {
			x0 = f.wideWord(b)
		}
		s0, w0, h0 := sweepWord(b, p0, p1, p2, p3, x0, delta, spill)
		binary.LittleEndian.PutUint64(b, w0)
		spill = h0
		b = b[8:]
		if s0 != 0 {
			last0, last1, lastLeft = 0, s0, len(b)
		}
	}
	i = len(body) - len(b)
	if last0|last1 == 0 {
		// No word was read: the match at i is within the last places.
		f.put(body, i)
		return i + len(f.lit), i + len(f.lit)
	}
	for k := i; spill != 0; k++ {
		body[k] ^= byte(spill)
		spill >>= 8
	}
	at, last := len(body)-lastLeft-8, last1 // the last word with a match
	if last == 0 {
		at, last = at-8, last0
	}
	end = at + (63-bits.LeadingZeros64(last))>>3 + len(f.lit)
	return end, max(i, end)
}

// sweepM7 and sweepHi are sweepWord's masks: variables, since the
// compiler writes a 64-bit constant into a register at each use, where a
// variable is read as an operand. Never changed.
var sweepM7, sweepHi uint64 = 0x7f7f7f7f7f7f7f7f, 0x8080808080808080

// sweepWord is sweep's reading of the word that begins b (fifteen bytes
// at least), whose places are compared with the literal's first four
// bytes p0-p3 (each in every byte of a word) and, where x is not zero,
// with the rest (wideWord's): it returns the starts of the matches in it
// (a one in each such byte), the word with them (delta: the literal XOR
// fixed) and spill (the word before's) applied, and the spill of its own
// matches into the next.
func sweepWord(b []byte, p0, p1, p2, p3, x, delta, spill uint64) (starts, w, next uint64) {
	m7, hi := sweepM7, sweepHi
	w = binary.LittleEndian.Uint64(b)
	v := x | (w ^ p0) |
		(binary.LittleEndian.Uint64(b[1:]) ^ p1) |
		(binary.LittleEndian.Uint64(b[2:]) ^ p2) |
		(binary.LittleEndian.Uint64(b[3:]) ^ p3)
	starts = ^((v&m7 + m7) | v) & hi >> 7
	next, lo := bits.Mul64(starts, delta)
	return starts, w ^ lo ^ spill, next
}

// wideWord is sweep's comparison of the bytes of a literal longer than
// four past its fourth, at the eight places that begin b.
func (f *filter) wideWord(b []byte) uint64 {
	return (binary.LittleEndian.Uint64(b[4:])^f.probe[4])&f.keep[4] |
		(binary.LittleEndian.Uint64(b[5:])^f.probe[5])&f.keep[5] |
		(binary.LittleEndian.Uint64(b[6:])^f.probe[6])&f.keep[6] |
		(binary.LittleEndian.Uint64(b[7:])^f.probe[7])&f.keep[7]
}

// bordered reports whether lit has a border: a proper prefix that is also
// its suffix, so that two of its matches may overlap.
func bordered(lit []byte) bool {
	for k := 1; k < len(lit); k++ {
		if string(lit[:k]) == string(lit[len(lit)-k:]) {
			return true
		}
	}
	return false
}

// put writes fixed, as long as the literal, at body[i:]: one of one, two,
// four or eight bytes with a store of its width (fixedHead), where copy
// would call memmove for each match, a few bytes apart in the bench row's
// body; a store wider than the match would cover bytes the search reads
// next, which a load then waits for.
func (f *filter) put(body []byte, i int) {
	switch len(f.fixed) {
	case 1:
		body[i] = byte(f.fixedHead)
	case 2:
		binary.LittleEndian.PutUint16(body[i:], uint16(f.fixedHead))
	case 4:
		binary.LittleEndian.PutUint32(body[i:], uint32(f.fixedHead))
	case 8:
		binary.LittleEndian.PutUint64(body[i:], f.fixedHead)
	default:
		copy(body[i:], f.fixed)
	}
}

// instance is one built configuration: its rules, and its body or
// filters. It belongs to one event loop (see plugins.Plugin): its scratch
// space and body buffers are used without locks.
type instance struct {
	rules
	hasBody bool
	body    []byte // the new body, decoded
	filters []filter
	max     int // max_resp_body_size
	// streamed: the one filter is a literal replaced by text as long
	// (overwrite), whose body is rewritten piece by piece (stream).
	streamed bool
	bufs     []bodyBuf // the filters' buffers, by slot
	free     []uint32  // idle slots of bufs
}

// rules is what a configuration does whatever its body: its status, its
// headers and its vars, all a headersOnly instance keeps (at 50 000
// routes each with headers of its own, 112 bytes a route where the whole
// instance was 384: TestRulesSize). It belongs to one event loop, as the
// instance: scratch, the headers' values rendered, is used without locks.
type rules struct {
	status   int
	add, set []header
	remove   []string
	cond     *cond // nil without vars
	scratch  []byte
}

// cond is a configuration's vars and their evaluator, apart from its
// rules since most configurations have none.
type cond struct {
	vars varexpr.Expr
	ev   varexpr.Evaluator // $status read from the response
}

// matched reports whether the vars, if any, hold for c's response.
func (r *rules) matched(c plugins.Ctx) bool {
	return r.cond == nil || r.cond.ev.Eval(c, &r.cond.vars)
}

// setHeaders applies the headers' add, set and remove to c's response.
func (r *rules) setHeaders(c plugins.Ctx) {
	for i := range r.add {
		h := &r.add[i]
		r.scratch, _ = h.value.Render(r.scratch[:0], c)
		c.AddResponseHeader(h.name, r.scratch)
	}
	for i := range r.set {
		h := &r.set[i]
		r.scratch, _ = h.value.Render(r.scratch[:0], c)
		c.SetResponseHeader(h.name, r.scratch)
	}
	for _, name := range r.remove {
		c.RemoveResponseHeader(name)
	}
}

// bodyBuf holds one response's body while the filters wait for its end.
type bodyBuf struct {
	in, out []byte
}

// The request's state, kept (Ctx.Keep) from header_filter for
// body_filter and log: the flags, the filters' buffer slot above them,
// and, for a streamed body, the bytes of it body_filter has taken, above
// the slot.
const (
	stMatched  = 1 << iota // vars held: the response is rewritten
	stGzip                 // the body is gzip-encoded: decoded for the filters
	stAsIs                 // an encoding the filters cannot read: not kept, left alone
	stSlot                 // a buffer slot is held, its index at slotShift
	stOnce                 // streamed: a once filter has replaced its match
	stCut                  // streamed: max_resp_body_size reached, the rest dropped
	slotShift  = 8
	slotBits   = 24
	takenShift = slotShift + slotBits
)

// HeaderFilter implements plugins.HeaderFilterPhase: vars, then the
// status, the headers the new body invalidates, and the headers'
// add, set and remove, as APISIX's header_filter.
func (in *instance) HeaderFilter(c plugins.Ctx) {
	if !in.matched(c) {
		return
	}
	st := uint64(stMatched)
	if in.status != 0 {
		c.SetStatus(in.status)
	}
	if in.hasBody || len(in.filters) > 0 {
		enc := c.ResponseHeader("Content-Encoding")
		switch {
		case transferCoded(c.ResponseHeader("Transfer-Encoding")):
			// A transfer coding besides chunked (gzip, chunked),
			// which the worker keeps: the body is sent as it came,
			// neither read as plain text nor replaced by text the
			// client would decode.
			st |= stAsIs
		case len(in.filters) == 0 || len(enc) == 0 || httpvar.EqualFold(enc, "identity"):
		case httpvar.EqualFold(enc, "gzip"):
			st |= stGzip
		default:
			st |= stAsIs
		}
		// The body is changed only where body_filter finds the state
		// kept (an encoding the filters cannot read is not, nor past
		// Ctx's MaxKept): there the headers stay.
		// Content-Length goes always (the worker frames the body, and
		// a HEAD's answer goes without it); the others where the
		// response has them (ResponseHeader is nil only for a field
		// that is absent), since each removal is an edit the head's
		// every field is compared with.
		if st&stAsIs == 0 && c.Keep(in, st) {
			c.RemoveResponseHeader("Content-Length")
			if enc != nil {
				c.RemoveResponseHeader("Content-Encoding")
			}
			if c.ResponseHeader("Last-Modified") != nil {
				c.RemoveResponseHeader("Last-Modified")
			}
			if c.ResponseHeader("ETag") != nil {
				c.RemoveResponseHeader("ETag")
			}
		}
	}
	in.setHeaders(c)
}

// transferCoded reports whether te, the response's (first)
// Transfer-Encoding field, names a coding besides chunked.
func transferCoded(te []byte) bool {
	return len(te) > 0 && !httpvar.EqualFold(te, "chunked")
}

// BodyFilter implements plugins.BodyFilterPhase: a new body replaces the
// upstream's (sent at its end); filters hold the body, up to
// max_resp_body_size (the rest is dropped, as APISIX truncates), and
// send it rewritten at its end.
func (in *instance) BodyFilter(c plugins.Ctx, chunk []byte, eof bool) []byte {
	st, ok := c.Kept(in)
	if !ok || st&stMatched == 0 {
		return chunk
	}
	if len(in.filters) == 0 {
		if !in.hasBody {
			return chunk
		}
		if eof {
			return in.body
		}
		return nil
	}
	if in.streamed && st&stGzip == 0 {
		return in.stream(c, st, chunk, eof)
	}
	if st&stSlot == 0 {
		s := in.takeSlot()
		st |= stSlot | uint64(s)<<slotShift
		// A second Keep of the owner replaces the first: it does not
		// fail where the first did not.
		c.Keep(in, st)
	}
	b := &in.bufs[slotOf(st)]
	if room := in.max - len(b.in); room > 0 {
		b.in = append(b.in, chunk[:min(room, len(chunk))]...)
	}
	if !eof {
		return nil
	}
	body := b.in
	if st&stGzip != 0 {
		body = gunzip(body, in.max)
	}
	return in.rewrite(b, body)
}

// stream is body_filter for a streamed configuration (one literal filter
// replaced by text as long, on a body not gzip-encoded): each piece is
// rewritten and sent on, but for its last bytes where they begin the
// literal (a match the next piece may complete), held in the slot's
// buffer and sent before the next piece, with which they are searched
// again. So the body is not held whole, and the matches are those of the
// whole body: found from the end of each, as overwrite finds them. A piece
// with no match goes as it came; one with a match is copied into the
// slot's buffer and rewritten there, not in chunk, which may be a body
// another plugin keeps (a body_filter's before this one, response-rewrite's
// body or echo's). Past max_resp_body_size the body is cut, as the held
// body is: a match the cut divides is not one. What it returns is chunk
// or the slot's, valid until the next call.
func (in *instance) stream(c plugins.Ctx, st uint64, chunk []byte, eof bool) []byte {
	if st&stCut != 0 {
		return nil
	}
	f := &in.filters[0]
	kept := st
	taken := int(st >> takenShift)
	if room := in.max - taken; len(chunk) >= room {
		chunk, eof = chunk[:room], true
		st |= stCut
	}
	st += uint64(len(chunk)) << takenShift
	data, own := chunk, false // own: data is the slot's b.out
	var b *bodyBuf
	if st&stSlot != 0 {
		if b = &in.bufs[slotOf(st)]; len(b.in) > 0 {
			// The last piece's held bytes come first.
			b.out = append(append(b.out[:0], b.in...), chunk...)
			b.in, data, own = b.in[:0], b.out, true
		}
	}
	hold := len(data)
	if st&stOnce == 0 {
		i := f.index(data, 0)
		if i >= 0 && !own {
			b, st = in.slot(st)
			b.out = append(b.out[:0], data...)
			data = b.out
		}
		end := f.overwriteFrom(data, i)
		if end > 0 && !f.global {
			st |= stOnce
		} else if !eof {
			hold = f.heldFrom(data, end)
		}
	}
	if hold < len(data) {
		b, st = in.slot(st)
		// data is chunk or b.out, never b.in.
		b.in = append(b.in[:0], data[hold:]...)
	}
	if st != kept {
		// A second Keep of the owner replaces the first: it does not
		// fail where the first did not.
		c.Keep(in, st)
	}
	return data[:hold]
}

// slot is the buffers of the slot st holds, or of one it takes, with st
// saying so.
func (in *instance) slot(st uint64) (*bodyBuf, uint64) {
	if st&stSlot == 0 {
		s := in.takeSlot()
		st |= stSlot | uint64(s)<<slotShift
	}
	return &in.bufs[slotOf(st)], st
}

// heldFrom is where the bytes of data a piece to come may complete a
// match with begin: the first place past the last match (end) and past
// the last place overwrite tried from which the rest of data begins the
// literal; len(data) when there is none.
func (f *filter) heldFrom(data []byte, end int) int {
	n := len(f.lit)
	for p := max(end, len(data)-n+1); p < len(data); p++ {
		if string(data[p:]) == string(f.lit[:len(data)-p]) {
			return p
		}
	}
	return len(data)
}

// rewrite runs the filters over body, in b's buffers; what it returns is
// b's, valid until the slot is given back (Log).
func (in *instance) rewrite(b *bodyBuf, body []byte) []byte {
	for i := range in.filters {
		f := &in.filters[i]
		var out []byte
		if f.isFixed && len(f.fixed) == len(f.lit) {
			// body is the slot's (or gunzip's): the matches are
			// replaced where they are, and it stays the subject.
			_ = f.overwrite(body)
			continue
		} else if f.lit != nil {
			// A literal: found from the end of each match, as a
			// global substitution does; once stops at the first.
			var caps [2]int
			m := f.next(body, 0, &caps)
			if m == nil {
				continue
			}
			out = b.out[:0]
			last := 0
			for m != nil {
				out = append(out, body[last:m[0]]...)
				if f.isFixed {
					out = append(out, f.fixed...)
				} else {
					out = f.tmpl.Append(out, body, m)
				}
				last = m[1]
				if !f.global {
					break
				}
				m = f.next(body, last, &caps)
			}
			out = append(out, body[last:]...)
		} else if f.global {
			ms := f.re.FindAllSubmatchIndex(body, -1)
			if len(ms) == 0 {
				continue
			}
			out = b.out[:0]
			last := 0
			for _, m := range ms {
				out = append(out, body[last:m[0]]...)
				out = f.tmpl.Append(out, body, m)
				last = m[1]
			}
			out = append(out, body[last:]...)
		} else {
			m := f.re.FindSubmatchIndex(body)
			if m == nil {
				continue
			}
			out = append(b.out[:0], body[:m[0]]...)
			out = f.tmpl.Append(out, body, m)
			out = append(out, body[m[1]:]...)
		}
		// The result becomes the next filter's subject, and the
		// buffer it was read from the next one's output.
		b.in, b.out = out, b.in[:0]
		body = out
	}
	return body
}

// gunzip decodes a gzip body, its first max bytes (the rest dropped, as
// the body is cut before decoding: a small body that decodes to a huge
// one costs no more). A body cut at max_resp_body_size ends its stream
// early: what decodes of it is the body. One it cannot decode is sent as
// it came.
func gunzip(b []byte, max int) []byte {
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		return b
	}
	out, err := io.ReadAll(io.LimitReader(zr, int64(max)))
	if err != nil && (err != io.ErrUnexpectedEOF || len(b) < max) {
		return b
	}
	return out
}

// slotOf is the index of the buffer slot st holds.
func slotOf(st uint64) uint32 { return uint32(st>>slotShift) & (1<<slotBits - 1) }

// takeSlot takes an idle buffer slot, or a new one.
func (in *instance) takeSlot() uint32 {
	if n := len(in.free); n > 0 {
		s := in.free[n-1]
		in.free = in.free[:n-1]
		return s
	}
	in.bufs = append(in.bufs, bodyBuf{})
	return uint32(len(in.bufs) - 1)
}

// maxIdleBuf is the capacity past which a slot's buffers are dropped when
// given back rather than kept for the next response.
const maxIdleBuf = 1 << 20

// Log implements plugins.LogPhase: the filters' buffer slot is given back.
func (in *instance) Log(c plugins.Ctx) {
	st, ok := c.Kept(in)
	if !ok || st&stSlot == 0 {
		return
	}
	s := slotOf(st)
	b := &in.bufs[s]
	b.in, b.out = b.in[:0], b.out[:0]
	if cap(b.in) > maxIdleBuf {
		b.in = nil
	}
	if cap(b.out) > maxIdleBuf {
		b.out = nil
	}
	in.free = append(in.free, s)
}
