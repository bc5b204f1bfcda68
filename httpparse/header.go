package httpparse

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
)

// HeaderID names a field the parser knows. The parser sets it on every
// Header by a case-insensitive match of the field name; HdrOther is any
// other name.
type HeaderID uint8

// The known field names.
const (
	HdrOther HeaderID = iota
	HdrHost
	HdrContentLength
	HdrTransferEncoding
	HdrConnection
	HdrUpgrade
	HdrExpect
	HdrKeepAlive
	HdrProxyConnection
	HdrTE
	HdrTrailer
	HdrProxyAuthenticate
	HdrXForwardedFor
	HdrXForwardedProto
	HdrXForwardedHost
	HdrXForwardedPort
	HdrXRealIP
	HdrServer
	HdrDate
	HdrCookie
	HdrContentType
	numHeaderIDs
)

var headerNames = [numHeaderIDs]string{
	HdrOther:             "other",
	HdrHost:              "host",
	HdrContentLength:     "content-length",
	HdrTransferEncoding:  "transfer-encoding",
	HdrConnection:        "connection",
	HdrUpgrade:           "upgrade",
	HdrExpect:            "expect",
	HdrKeepAlive:         "keep-alive",
	HdrProxyConnection:   "proxy-connection",
	HdrTE:                "te",
	HdrTrailer:           "trailer",
	HdrProxyAuthenticate: "proxy-authenticate",
	HdrXForwardedFor:     "x-forwarded-for",
	HdrXForwardedProto:   "x-forwarded-proto",
	HdrXForwardedHost:    "x-forwarded-host",
	HdrXForwardedPort:    "x-forwarded-port",
	HdrXRealIP:           "x-real-ip",
	HdrServer:            "server",
	HdrDate:              "date",
	HdrCookie:            "cookie",
	HdrContentType:       "content-type",
}

// String returns the lower-case field name of a known ID and "other" for
// HdrOther or an unknown value.
func (id HeaderID) String() string {
	if id < numHeaderIDs {
		return headerNames[id]
	}
	return "other"
}

// Header is one field line. Name and Value are sub-slices of the buffer given
// to Parse and stay valid as long as that buffer is neither modified nor
// reused. Value has leading and trailing whitespace (SP, HTAB) removed.
type Header struct {
	Name  []byte
	Value []byte
	ID    HeaderID
}

// ConnFlags is the set of tokens found in the Connection fields of a message.
type ConnFlags uint8

// The Connection tokens.
const (
	// ConnClose is the "close" token.
	ConnClose ConnFlags = 1 << iota
	// ConnKeepAlive is the "keep-alive" token.
	ConnKeepAlive
	// ConnUpgrade is the "upgrade" token.
	ConnUpgrade
	// ConnOther is any other token: it names a hop-by-hop field that a proxy
	// must drop as well (RFC 9110 §7.6.1).
	ConnOther
)

// lookupHeader returns the ID of a field name.
func lookupHeader(name []byte) HeaderID {
	switch len(name) {
	case 2:
		if equalLower(name, "te") {
			return HdrTE
		}
	case 4:
		switch toLower[name[0]] {
		case 'h':
			if equalLower(name, "host") {
				return HdrHost
			}
		case 'd':
			if equalLower(name, "date") {
				return HdrDate
			}
		}
	case 6:
		switch toLower[name[0]] {
		case 'c':
			if equalLower(name, "cookie") {
				return HdrCookie
			}
		case 'e':
			if equalLower(name, "expect") {
				return HdrExpect
			}
		case 's':
			if equalLower(name, "server") {
				return HdrServer
			}
		}
	case 7:
		switch toLower[name[0]] {
		case 'u':
			if equalLower(name, "upgrade") {
				return HdrUpgrade
			}
		case 't':
			if equalLower(name, "trailer") {
				return HdrTrailer
			}
		}
	case 9:
		if equalLower(name, "x-real-ip") {
			return HdrXRealIP
		}
	case 10:
		switch toLower[name[0]] {
		case 'c':
			if equalLower(name, "connection") {
				return HdrConnection
			}
		case 'k':
			if equalLower(name, "keep-alive") {
				return HdrKeepAlive
			}
		}
	case 12:
		if equalLower(name, "content-type") {
			return HdrContentType
		}
	case 14:
		if equalLower(name, "content-length") {
			return HdrContentLength
		}
	case 15:
		if equalLower(name, "x-forwarded-for") {
			return HdrXForwardedFor
		}
	case 16:
		switch toLower[name[0]] {
		case 'p':
			if equalLower(name, "proxy-connection") {
				return HdrProxyConnection
			}
		case 'x':
			if equalLower(name[:12], "x-forwarded-") {
				switch {
				case equalLower(name[12:], "host"):
					return HdrXForwardedHost
				case equalLower(name[12:], "port"):
					return HdrXForwardedPort
				}
			}
		}
	case 17:
		switch toLower[name[0]] {
		case 't':
			if equalLower(name, "transfer-encoding") {
				return HdrTransferEncoding
			}
		case 'x':
			if equalLower(name, "x-forwarded-proto") {
				return HdrXForwardedProto
			}
		}
	case 18:
		if equalLower(name, "proxy-authenticate") {
			return HdrProxyAuthenticate
		}
	}
	return HdrOther
}

// equalLower reports whether b equals the lower-case ASCII string s, ignoring
// the case of b.
func equalLower(b []byte, s string) bool {
	if len(b) != len(s) {
		return false
	}
	for i := 0; i < len(b); i++ {
		if toLower[b[i]] != s[i] {
			return false
		}
	}
	return true
}

// trimOWS removes SP and HTAB at both ends of b.
func trimOWS(b []byte) []byte {
	for len(b) > 0 && charClass[b[0]]&cOWS != 0 {
		b = b[1:]
	}
	for len(b) > 0 && charClass[b[len(b)-1]]&cOWS != 0 {
		b = b[:len(b)-1]
	}
	return b
}

// isToken reports whether b is a non-empty token.
func isToken(b []byte) bool {
	for _, c := range b {
		if charClass[c]&cToken == 0 {
			return false
		}
	}
	return len(b) > 0
}

// parseDigits parses 1*DIGIT as a non-negative int64.
func parseDigits(b []byte) (int64, bool) {
	if len(b) == 0 {
		return 0, false
	}
	var n int64
	for _, c := range b {
		if charClass[c]&cDigit == 0 {
			return 0, false
		}
		d := int64(c - '0')
		if n > (math.MaxInt64-d)/10 {
			return 0, false
		}
		n = n*10 + d
	}
	return n, true
}

// nextElement splits the first element off a comma-separated list and
// returns it with OWS removed, and the rest of the list after the comma.
func nextElement(list []byte) (elem, rest []byte) {
	if i := bytes.IndexByte(list, ','); i >= 0 {
		return trimOWS(list[:i]), list[i+1:]
	}
	return trimOWS(list), nil
}

// Word-at-a-time constants for skipValue.
const (
	lo8  = 0x0101010101010101
	hi8  = 0x8080808080808080
	sp8  = 0x2020202020202020
	del8 = 0x7f7f7f7f7f7f7f7f
)

// skipValue returns the index of the first byte at or after i that is not a
// field-content byte (HTAB, SP, VCHAR, obs-text), or len(b).
func skipValue(b []byte, i int) int {
	for i+8 <= len(b) {
		x := binary.LittleEndian.Uint64(b[i:])
		// The high bit of a byte is set here when the byte is below 0x20 or
		// is 0x7f; bytes of 0x80 and above (obs-text) never set it. Borrows
		// can only mark bytes above the first marked one, so the lowest mark
		// is exact.
		m := ((x - sp8) | ((x ^ del8) - lo8)) &^ x & hi8
		if m == 0 {
			i += 8
			continue
		}
		i += bits.TrailingZeros64(m) >> 3
		if b[i] != '\t' {
			return i
		}
		i++
	}
	for i < len(b) && charClass[b[i]]&cValue != 0 {
		i++
	}
	return i
}

// fieldInfo is what the field loop learns about the fields that carry
// framing and connection state.
type fieldInfo struct {
	contentLength int64  // -1 when absent
	clFirst       []byte // the first Content-Length element, to compare repeats with
	teFields      int    // number of Transfer-Encoding fields
	teValue       []byte // value of the first Transfer-Encoding field
	teCodings     int    // number of transfer-codings in all of them
	teEmpty       bool   // whether one of their lists has an empty element
	teChunked     int    // how many of them are "chunked"
	teLastChunked bool   // whether the last one is "chunked"
	teOff         int
	conn          ConnFlags
	hosts         int
	host          []byte // value of the first Host field
	hostOff       int
	expect100     bool
	upgrade       []byte // value of the first Upgrade field
}

func (f *fieldInfo) reset() {
	*f = fieldInfo{contentLength: -1}
}

// parseFields parses the field lines that start at b[i] and the empty line
// that ends them, appending each field to h. It returns h and the offset just
// past the empty line, or -1 when b ends first. maxFields is the most field
// lines allowed.
func parseFields(b []byte, i, maxFields int, h []Header, f *fieldInfo) ([]Header, int, error) {
	n := 0
	for {
		if i >= len(b) {
			return h, -1, nil
		}
		c := b[i]
		if c == '\r' {
			if i+1 >= len(b) {
				return h, -1, nil
			}
			if b[i+1] != '\n' {
				return h, 0, malformed("bare cr", i+1)
			}
			return h, i + 2, nil
		}
		if n >= maxFields {
			return h, 0, tooLarge("too many fields", i)
		}
		start := i
		for i+4 <= len(b) && charClass[b[i]]&charClass[b[i+1]]&charClass[b[i+2]]&charClass[b[i+3]]&cToken != 0 {
			i += 4
		}
		for i < len(b) && charClass[b[i]]&cToken != 0 {
			i++
		}
		if i >= len(b) {
			return h, -1, nil
		}
		if b[i] != ':' {
			switch {
			case i == start && charClass[c]&cOWS != 0:
				return h, 0, malformed("obsolete line folding", i)
			case i == start && c == '\n':
				return h, 0, malformed("bare lf", i)
			case charClass[b[i]]&cOWS != 0:
				return h, 0, malformed("whitespace before colon", i)
			}
			return h, 0, malformed("invalid field name", i)
		}
		if i == start {
			return h, 0, malformed("empty field name", i)
		}
		name := b[start:i]
		i++
		for i < len(b) && charClass[b[i]]&cOWS != 0 {
			i++
		}
		vs := i
		i = skipValue(b, i)
		if i >= len(b) {
			return h, -1, nil
		}
		if b[i] != '\r' {
			if b[i] == '\n' {
				return h, 0, malformed("bare lf", i)
			}
			return h, 0, malformed("invalid byte in field value", i)
		}
		if i+1 >= len(b) {
			return h, -1, nil
		}
		if b[i+1] != '\n' {
			return h, 0, malformed("bare cr", i+1)
		}
		ve := i
		for ve > vs && charClass[b[ve-1]]&cOWS != 0 {
			ve--
		}
		value := b[vs:ve]
		id := lookupHeader(name)
		if len(h) < cap(h) {
			h = h[:len(h)+1]
		} else {
			h = append(h, Header{})
		}
		hp := &h[len(h)-1]
		hp.Name, hp.Value, hp.ID = name, value, id
		n++
		switch id {
		case HdrContentLength:
			if err := f.addContentLength(value, vs); err != nil {
				return h, 0, err
			}
		case HdrTransferEncoding:
			if err := f.addTransferEncoding(value, vs); err != nil {
				return h, 0, err
			}
		case HdrConnection:
			if err := f.addConnection(value, vs); err != nil {
				return h, 0, err
			}
		case HdrHost:
			if f.hosts == 0 {
				f.host = value
			}
			f.hosts++
			f.hostOff = vs
		case HdrExpect:
			if equalLower(value, "100-continue") {
				f.expect100 = true
			}
		case HdrUpgrade:
			if f.upgrade == nil {
				f.upgrade = value
			}
		}
		i += 2
	}
}

// addContentLength checks a Content-Length value: a list of one or more
// identical elements of 1*DIGIT, identical to those of earlier fields too.
func (f *fieldInfo) addContentLength(v []byte, off int) error {
	if len(v) == 0 {
		return malformed("empty content-length", off)
	}
	for rest := v; rest != nil; {
		var e []byte
		e, rest = nextElement(rest)
		if f.clFirst == nil {
			n, ok := parseDigits(e)
			if !ok {
				return malformed("invalid content-length", off)
			}
			f.contentLength = n
			f.clFirst = e
		} else if !bytes.Equal(e, f.clFirst) {
			return malformed("conflicting content-length", off)
		}
	}
	return nil
}

// addTransferEncoding records the transfer-codings of a Transfer-Encoding
// value. Each coding must be a bare token; empty list elements are skipped.
func (f *fieldInfo) addTransferEncoding(v []byte, off int) error {
	if f.teFields == 0 {
		f.teValue = v
		f.teOff = off
	}
	f.teFields++
	for rest := v; rest != nil; {
		var e []byte
		e, rest = nextElement(rest)
		if len(e) == 0 {
			f.teEmpty = true
			continue
		}
		if !isToken(e) {
			return malformed("invalid transfer-coding", off)
		}
		f.teCodings++
		f.teLastChunked = equalLower(e, "chunked")
		if f.teLastChunked {
			f.teChunked++
		}
	}
	if f.teChunked > 1 {
		return malformed("chunked applied twice", off)
	}
	return nil
}

// addConnection records the tokens of a Connection value.
func (f *fieldInfo) addConnection(v []byte, off int) error {
	for rest := v; rest != nil; {
		var e []byte
		e, rest = nextElement(rest)
		switch {
		case len(e) == 0:
		case equalLower(e, "close"):
			f.conn |= ConnClose
		case equalLower(e, "keep-alive"):
			f.conn |= ConnKeepAlive
		case equalLower(e, "upgrade"):
			f.conn |= ConnUpgrade
		case isToken(e):
			f.conn |= ConnOther
		default:
			return malformed("invalid connection token", off)
		}
	}
	return nil
}

// validHost reports whether b is a valid uri-host with an optional port
// (RFC 3986 §3.2.2, without pct-encoded): a reg-name or an IPv6 literal in
// brackets, then ":" and digits. With needPort the port must be present and
// non-empty, as in the authority-form of CONNECT. An empty b is valid only
// without needPort, and only as a whole.
//
// A reg-name with an empty label is not, as nginx refuses it
// (ngx_http_validate_host): two dots in a row anywhere ("a..b", "a.."),
// or a lone "." (a host that is empty once nginx drops one trailing dot).
// A leading dot and one trailing dot are valid, as they are there; the
// trailing dot is not part of nginx's $host.
func validHost(b []byte, needPort bool) bool {
	i := 0
	if len(b) > 0 && b[0] == '[' {
		end := bytes.IndexByte(b, ']')
		if end < 0 || !validIPv6(b[1:end]) {
			return false
		}
		i = end + 1
	} else {
		for i < len(b) && charClass[b[i]]&cHost != 0 {
			if b[i] == '.' && i > 0 && b[i-1] == '.' {
				return false
			}
			i++
		}
		if i == 0 && (needPort || len(b) > 0) || i == 1 && b[0] == '.' {
			return false
		}
	}
	if i == len(b) {
		return !needPort
	}
	if b[i] != ':' {
		return false
	}
	i++
	if needPort && i == len(b) {
		return false
	}
	for ; i < len(b); i++ {
		if charClass[b[i]]&cDigit == 0 {
			return false
		}
	}
	return true
}

// validIPv6 reports whether b is an IPv6address of RFC 3986 §3.2.2,
// possibly ending in a dotted IPv4 address.
func validIPv6(b []byte) bool {
	groups := 0     // 16-bit groups seen, an IPv4 tail counting two
	elided := false // "::" seen
	i := 0
	if len(b) >= 2 && b[0] == ':' && b[1] == ':' {
		elided = true
		i = 2
		if i == len(b) {
			return true
		}
	}
	for {
		start := i
		for i < len(b) && i-start < 4 && charClass[b[i]]&cHex != 0 {
			i++
		}
		if i < len(b) && b[i] == '.' {
			if !validIPv4(b[start:]) {
				return false
			}
			groups += 2
			break
		}
		if i == start {
			return false
		}
		groups++
		if i == len(b) {
			break
		}
		if b[i] != ':' {
			return false
		}
		i++
		if i < len(b) && b[i] == ':' {
			if elided {
				return false
			}
			elided = true
			i++
			if i == len(b) {
				break
			}
		} else if i == len(b) {
			return false
		}
	}
	if elided {
		return groups <= 7
	}
	return groups == 8
}

// validIPv4 reports whether b is a dotted-decimal IPv4 address with no
// leading zeros.
func validIPv4(b []byte) bool {
	parts := 0
	i := 0
	for {
		start := i
		v := 0
		for i < len(b) && charClass[b[i]]&cDigit != 0 && i-start < 3 {
			v = v*10 + int(b[i]-'0')
			i++
		}
		if i == start || v > 255 || (i-start > 1 && b[start] == '0') {
			return false
		}
		parts++
		if i == len(b) {
			return parts == 4
		}
		if b[i] != '.' || parts == 4 {
			return false
		}
		i++
	}
}
