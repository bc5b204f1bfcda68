package requestid

import (
	_ "embed"
	"encoding/json"
	"fmt"
	"math/bits"
	"math/rand/v2"

	"coregate/plugins"
)

// Name is the plugin's wire name.
const Name = "request-id"

//go:embed schema.json
var schema []byte

func init() { plugins.Register(Name, Plugin{}) }

// Plugin is request-id's implementation; its zero value is ready.
type Plugin struct{}

var (
	_ plugins.Plugin            = Plugin{}
	_ plugins.RewritePhase      = (*instance)(nil)
	_ plugins.HeaderFilterPhase = (*instance)(nil)
)

// Schema implements plugins.Plugin.
func (Plugin) Schema() []byte { return schema }

// defaultCharSet is APISIX's range_id.char_set, its typo ("IGK") kept.
const defaultCharSet = "abcdefghijklmnopqrstuvwxyzABCDEFGHIGKLMNOPQRSTUVWXYZ0123456789"

// maxRangeLength bounds range_id.length, which APISIX does not bound: an
// id goes in a header line both ways.
const maxRangeLength = 4096

// conf is a configuration, with APISIX's defaults.
type conf struct {
	HeaderName        string `json:"header_name"`
	IncludeInResponse bool   `json:"include_in_response"`
	Algorithm         string `json:"algorithm"`
	RangeID           struct {
		Length  int    `json:"length"`
		CharSet string `json:"char_set"`
	} `json:"range_id"`
}

func decode(raw json.RawMessage) (conf, error) {
	c := conf{HeaderName: "X-Request-Id", IncludeInResponse: true, Algorithm: "uuid"}
	c.RangeID.Length, c.RangeID.CharSet = 16, defaultCharSet
	err := json.Unmarshal(raw, &c)
	return c, err
}

// Check implements plugins.Plugin. Beyond APISIX, header_name must be a
// valid header field name (the worker would not send another), and
// range_id.length at most maxRangeLength.
func (Plugin) Check(raw json.RawMessage) error {
	c, err := decode(raw)
	if err != nil {
		return err
	}
	if !isToken(c.HeaderName) {
		return fmt.Errorf("invalid header_name %q: not a header field name", c.HeaderName)
	}
	if c.Algorithm == "range_id" && c.RangeID.Length > maxRangeLength {
		return fmt.Errorf("invalid range_id.length %d: at most %d", c.RangeID.Length, maxRangeLength)
	}
	return nil
}

// isToken reports whether s is an RFC 9110 token, a field name.
func isToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
			continue
		}
		switch c {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
			continue
		}
		return false
	}
	return true
}

// algorithm is how ids are made.
type algorithm uint8

const (
	algUUID algorithm = iota
	algNanoid
	algRangeID
	algKSUID
	algUUIDv7
)

var algorithms = map[string]algorithm{
	"uuid": algUUID, "nanoid": algNanoid, "range_id": algRangeID, "ksuid": algKSUID, "uuidv7": algUUIDv7,
}

// Build implements plugins.Plugin.
func (Plugin) Build(raw json.RawMessage, _ plugins.Env) (plugins.Instance, error) {
	c, err := decode(raw)
	if err != nil {
		return nil, err
	}
	alg, ok := algorithms[c.Algorithm]
	if !ok {
		return nil, fmt.Errorf("request-id: unknown algorithm %q", c.Algorithm)
	}
	in := &instance{header: c.HeaderName, response: c.IncludeInResponse, alg: alg, charSet: c.RangeID.CharSet}
	n := 36
	switch alg {
	case algNanoid:
		n = nanoidSize
	case algKSUID:
		n = ksuidSize
	case algRangeID:
		n = c.RangeID.Length
	}
	in.id = make([]byte, n)
	return in, nil
}

// instance is one configuration of request-id, built. It runs on one
// event loop, one request at a time: id is the scratch space an id is
// formatted into, valid until the next phase call (the Ctx copies it),
// pcg the generator of range_id's characters, last and seq uuidv7's
// monotonic state, as APISIX keeps them per worker.
//
// A request keeps, with Ctx.Keep, the random words its id was made of
// (words, up to three), so that header_filter formats the same id again
// without a per-request buffer: the instance and its key fields are the
// owners.
type instance struct {
	header   string
	response bool
	alg      algorithm
	charSet  string

	id   []byte
	pcg  rand.PCG
	last int64  // uuidv7: the millisecond of the last id
	seq  uint32 // uuidv7: the counter within it
	rand [7]byte
	keys [2]byte // the owners of the second and third words
}

// words are the state of one id: 128 random bits (w[0], w[1]), the time
// for ksuid in w[2].
type words [3]uint64

// Rewrite implements plugins.RewritePhase, as request-id.lua's rewrite: a
// request without the header (or with it empty) gets a new id in it.
func (in *instance) Rewrite(c plugins.Ctx) {
	if len(c.Header(in.header)) > 0 {
		return
	}
	w := in.generate(c.Now())
	c.SetRequestHeader(in.header, in.format(&w))
	if in.response {
		// Keep fails only past plugins.MaxKept values: the response then
		// goes without the id.
		if c.Keep(in, w[0]) && c.Keep(&in.keys[0], w[1]) && in.alg == algKSUID {
			c.Keep(&in.keys[1], w[2])
		}
	}
}

// HeaderFilter implements plugins.HeaderFilterPhase, as request-id.lua's
// header_filter: the response gets the request's id unless it has the
// header already (the upstream's).
func (in *instance) HeaderFilter(c plugins.Ctx) {
	if !in.response || len(c.ResponseHeader(in.header)) > 0 {
		return
	}
	var w words
	var ok, ok1 bool
	w[0], ok = c.Kept(in)
	w[1], ok1 = c.Kept(&in.keys[0])
	w[2], _ = c.Kept(&in.keys[1])
	if ok && ok1 {
		c.SetResponseHeader(in.header, in.format(&w))
		return
	}
	if v := c.Header(in.header); len(v) > 0 {
		c.SetResponseHeader(in.header, v)
	}
}

// generate makes the words of a new id; now is the loop's clock, Unix
// nanoseconds.
func (in *instance) generate(now int64) words {
	w := words{rand.Uint64(), rand.Uint64()}
	switch in.alg {
	case algUUID:
		w[0] = w[0]&^0xf000 | 0x4000       // version 4
		w[1] = w[1]&^(0xc0<<56) | 0x80<<56 // variant 10
	case algUUIDv7:
		w = in.v7(now / 1e6)
	case algKSUID:
		w[2] = uint64(now/1e9 - ksuidEpoch)
	}
	return w
}

// v7 is APISIX's generate_uuid_v7: the millisecond, then an 18-bit
// counter within it (12 bits where v4 has random ones, 6 after the
// variant), then 56 random bits drawn once per millisecond, so that ids
// sort by time. The clock never goes back: a millisecond earlier than the
// last id's counts on from it; past the counter's end, where APISIX waits
// for the clock, the next millisecond is taken at once.
func (in *instance) v7(ms int64) words {
	switch {
	case ms > in.last:
		in.last, in.seq = ms, 0
		r := rand.Uint64()
		for i := range in.rand {
			in.rand[i] = byte(r >> (8 * i))
		}
	default:
		in.seq++
		if in.seq > 0x3ffff {
			in.last, in.seq = in.last+1, 0
			r := rand.Uint64()
			for i := range in.rand {
				in.rand[i] = byte(r >> (8 * i))
			}
		}
	}
	w := words{uint64(in.last)<<16 | 0x7000 | uint64(in.seq>>6), uint64(0x80|in.seq&0x3f) << 56}
	for i, b := range in.rand {
		w[1] |= uint64(b) << (8 * (6 - i))
	}
	return w
}

const hexDigits = "0123456789abcdef"

// format writes the id of w into in.id and returns it.
func (in *instance) format(w *words) []byte {
	b := in.id
	switch in.alg {
	case algUUID, algUUIDv7:
		// 8-4-4-4-12 lowercase hex digits.
		j := 0
		for i := 0; i < 16; i++ {
			if i == 4 || i == 6 || i == 8 || i == 10 {
				b[j] = '-'
				j++
			}
			x := byte(w[i/8] >> (56 - 8*(i%8)))
			b[j], b[j+1] = hexDigits[x>>4], hexDigits[x&15]
			j += 2
		}
	case algNanoid:
		for i := 0; i < 10; i++ {
			b[i] = nanoidAlphabet[w[0]>>(6*i)&63]
			b[10+i] = nanoidAlphabet[w[1]>>(6*i)&63]
		}
		b[20] = nanoidAlphabet[(w[0]>>60|w[1]>>60<<4)&63]
	case algRangeID:
		in.pcg.Seed(w[0], w[1])
		n := uint64(len(in.charSet))
		for i := range b {
			hi, _ := bits.Mul64(in.pcg.Uint64(), n)
			b[i] = in.charSet[hi]
		}
	case algKSUID:
		formatKSUID(b, w)
	}
	return b
}

// nanoid's standard alphabet, 64 characters: 6 random bits a character,
// 21 characters (126 bits), as APISIX's get_nanoid.
const (
	nanoidAlphabet = "-_0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
	nanoidSize     = 21
)

// KSUID (segment.io's, resty.ksuid's): 4 bytes of seconds since
// ksuidEpoch, 16 random bytes, the 20 bytes written in base 62 over 27
// characters.
const (
	ksuidEpoch    = 1400000000
	ksuidSize     = 27
	base62Digits  = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	ksuidRawWords = 5
)

// formatKSUID writes the KSUID of w (time w[2], payload w[0], w[1]) into
// b, 27 bytes.
func formatKSUID(b []byte, w *words) {
	// The 160-bit number, big-endian in 32-bit words.
	n := [ksuidRawWords]uint32{uint32(w[2]), uint32(w[0] >> 32), uint32(w[0]), uint32(w[1] >> 32), uint32(w[1])}
	for i := len(b) - 1; i >= 0; i-- {
		var rem uint64
		for j := range n {
			cur := rem<<32 | uint64(n[j])
			n[j] = uint32(cur / 62)
			rem = cur % 62
		}
		b[i] = base62Digits[rem]
	}
}
