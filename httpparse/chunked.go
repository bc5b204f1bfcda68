package httpparse

import "math"

// MaxChunkExt is the most bytes of chunk extensions on one chunk-size line,
// from the first ';' up to the CRLF.
const MaxChunkExt = 4096

// States of Chunked.
const (
	csSize          = iota // chunk-size digits
	csSizeWS               // BWS after the chunk-size: ';' follows
	csExtName0             // after ';': BWS, then the extension name
	csExtName              // extension name
	csExtNameWS            // BWS after the name: '=' or ';' follows
	csExtVal0              // after '=': BWS, then a token or a quoted-string
	csExtToken             // token value
	csExtQuoted            // quoted-string value, after the opening quote
	csExtQuotedPair        // after a backslash in a quoted-string
	csExtAfterVal          // right after a value: ';', CR or BWS
	csExtAfterWS           // BWS after a value: ';' follows
	csSizeLF               // LF after the chunk-size line's CR
	csData                 // chunk data
	csDataCR               // CR after chunk data
	csDataLF               // LF after chunk data
	csTrailerStart         // start of a trailer field line or of the final CRLF
	csTrailerName          // trailer field name
	csTrailerValue         // trailer field value, after ':'
	csTrailerLF            // LF after a trailer field line's CR
	csEndLF                // LF of the final CRLF
	csDone                 // the body has ended
)

// Chunked reads a chunked body (RFC 9112 §7.1) as it streams past. It keeps
// its state between calls and never needs earlier bytes again, so the caller
// can act on each piece as it arrives and drop it. Scan validates and
// measures the body; Decode also hands out the chunk data, for a proxy that
// writes the framing of what it forwards itself. The zero value is ready for
// a new body. A Chunked is not safe for concurrent use.
//
// The chunk-size is 1*HEXDIG, at most 16 digits and at most 2^63-1,
// followed by CRLF or by chunk extensions. Chunk extensions follow the grammar of RFC 9112
// §7.1.1: *( BWS ";" BWS token [ BWS "=" BWS ( token / quoted-string ) ] ),
// at most MaxChunkExt bytes a line. Trailer fields follow the rules of
// header fields. Every line ends in CRLF. An error is a *ParseError of kind
// ErrMalformed whose Offset counts from the start of the body; the body
// cannot be forwarded further.
type Chunked struct {
	// MaxTrailerBytes is the most bytes of the trailer section, its final
	// CRLF included; zero means DefaultLimits().MaxHeaderBytes.
	MaxTrailerBytes int

	state   uint8
	digits  uint8
	size    int64 // chunk size being read, then data bytes left
	ext     int   // chunk extension bytes on this line
	trailer int   // trailer section bytes so far
	off     int64 // body bytes consumed before this call, for errors
	err     error // the error that stopped the scan
}

// Reset makes c ready for a new body and keeps MaxTrailerBytes.
func (c *Chunked) Reset() {
	*c = Chunked{MaxTrailerBytes: c.MaxTrailerBytes}
}

// DataRemaining reports how many bytes of chunk data are still to come in
// the current chunk; 0 outside of chunk data.
func (c *Chunked) DataRemaining() int64 {
	if c.state == csData {
		return c.size
	}
	return 0
}

// Done reports whether the whole body, trailer section included, has been
// read.
func (c *Chunked) Done() bool { return c.state == csDone }

// Scan consumes the chunked body bytes at the start of buf and returns how
// many belong to the body (framing included) and whether the body, with its
// last chunk and trailer section, ends within them. Bytes after the end are
// not consumed: n is then less than len(buf) and those bytes start the next
// message. Without done, all of buf was consumed and the body goes on in the
// next call's bytes. After done, Scan returns 0, true, nil until Reset;
// after an error it returns that error until Reset.
func (c *Chunked) Scan(buf []byte) (n int, done bool, err error) {
	for n < len(buf) {
		k, _, done, err := c.Decode(buf[n:])
		n += k
		if err != nil || done {
			return n, done, err
		}
	}
	return n, c.state == csDone, c.err
}

// Decode consumes chunked body bytes at the start of buf up to the end of
// the next run of chunk data, and returns how many it consumed, that data
// (a sub-slice of buf, the last len(data) bytes of buf[:n]; empty when buf
// ends before any data or the body ends), and whether the body, trailer
// section included, ended within buf[:n]. Framing (chunk-size lines,
// extensions, the CRLF after data, the trailer section) is consumed and
// checked but never returned. Call Decode again with buf[n:] until it has
// consumed all of buf or reports done; bytes after the end of the body are
// left for the next message. After done it returns 0, nil, true, nil until
// Reset; after an error it returns that error until Reset.
func (c *Chunked) Decode(buf []byte) (n int, data []byte, done bool, err error) {
	if c.err != nil {
		return 0, nil, false, c.err
	}
	i, err := c.framing(buf)
	if err != nil {
		return i, nil, false, err
	}
	if c.state == csData && i < len(buf) {
		k := int64(len(buf) - i)
		if k > c.size {
			k = c.size
		}
		data = buf[i : i+int(k)]
		i += int(k)
		c.size -= k
		if c.size == 0 {
			c.state = csDataCR
		}
	}
	c.off += int64(i)
	return i, data, c.state == csDone, nil
}

// framing consumes framing bytes from the start of buf until chunk data
// starts, the body ends or buf does, and returns the index after them.
func (c *Chunked) framing(buf []byte) (int, error) {
	i := 0
	for i < len(buf) {
		b := buf[i]
		switch c.state {
		case csSize:
			if d := unhex[b]; d != 0xff {
				if c.digits == 16 || c.size > (math.MaxInt64-int64(d))>>4 {
					return i, c.fail("chunk size too large", i)
				}
				c.size = c.size<<4 | int64(d)
				c.digits++
				i++
				continue
			}
			if c.digits == 0 {
				return i, c.fail("invalid chunk size", i)
			}
			switch b {
			case ';':
				c.state = csExtName0
				c.ext = 0
			case '\r':
				c.state = csSizeLF
			case ' ', '\t':
				c.state = csSizeWS
				c.ext = 0
			default:
				return i, c.fail("invalid byte after chunk size", i)
			}
			i++
		case csSizeWS:
			c.ext++
			if c.ext > MaxChunkExt {
				return i, c.fail("chunk extension too long", i)
			}
			switch b {
			case ';':
				c.state = csExtName0
			case ' ', '\t':
			default:
				return i, c.fail("invalid byte after chunk size", i)
			}
			i++
		case csExtName0, csExtName, csExtNameWS, csExtVal0, csExtToken,
			csExtQuoted, csExtQuotedPair, csExtAfterVal, csExtAfterWS:
			c.ext++
			if c.ext > MaxChunkExt {
				return i, c.fail("chunk extension too long", i)
			}
			if err := c.extByte(b, i); err != nil {
				return i, err
			}
			i++
		case csSizeLF:
			if b != '\n' {
				return i, c.fail("bare cr", i)
			}
			i++
			c.digits = 0
			if c.size == 0 {
				c.state = csTrailerStart
			} else {
				c.state = csData
				return i, nil
			}
		case csData:
			return i, nil
		case csDataCR:
			if b != '\r' {
				return i, c.fail("missing crlf after chunk data", i)
			}
			c.state = csDataLF
			i++
		case csDataLF:
			if b != '\n' {
				return i, c.fail("missing crlf after chunk data", i)
			}
			c.state = csSize
			i++
		case csDone:
			return i, nil
		default:
			j, err := c.scanTrailer(buf, i)
			if err != nil || c.state == csDone {
				return j, err
			}
			i = j
		}
	}
	return i, nil
}

// extByte advances the chunk extension grammar by the byte b at buf[i].
func (c *Chunked) extByte(b byte, i int) error {
	cls := charClass[b]
	switch c.state {
	case csExtName0:
		switch {
		case cls&cOWS != 0:
		case cls&cToken != 0:
			c.state = csExtName
		default:
			return c.fail("invalid chunk extension name", i)
		}
	case csExtName:
		switch {
		case cls&cToken != 0:
		case cls&cOWS != 0:
			c.state = csExtNameWS
		case b == '=':
			c.state = csExtVal0
		case b == ';':
			c.state = csExtName0
		case b == '\r':
			c.state = csSizeLF
		default:
			return c.fail("invalid byte in chunk extension", i)
		}
	case csExtNameWS:
		switch {
		case cls&cOWS != 0:
		case b == '=':
			c.state = csExtVal0
		case b == ';':
			c.state = csExtName0
		default:
			return c.fail("invalid byte in chunk extension", i)
		}
	case csExtVal0:
		switch {
		case cls&cOWS != 0:
		case cls&cToken != 0:
			c.state = csExtToken
		case b == '"':
			c.state = csExtQuoted
		default:
			return c.fail("invalid chunk extension value", i)
		}
	case csExtToken:
		switch {
		case cls&cToken != 0:
		case cls&cOWS != 0:
			c.state = csExtAfterWS
		case b == ';':
			c.state = csExtName0
		case b == '\r':
			c.state = csSizeLF
		default:
			return c.fail("invalid byte in chunk extension", i)
		}
	case csExtQuoted:
		switch {
		case b == '"':
			c.state = csExtAfterVal
		case b == '\\':
			c.state = csExtQuotedPair
		case cls&cValue == 0:
			return c.fail("invalid byte in chunk extension", i)
		}
	case csExtQuotedPair:
		if cls&cValue == 0 {
			return c.fail("invalid byte in chunk extension", i)
		}
		c.state = csExtQuoted
	case csExtAfterVal:
		switch {
		case cls&cOWS != 0:
			c.state = csExtAfterWS
		case b == ';':
			c.state = csExtName0
		case b == '\r':
			c.state = csSizeLF
		default:
			return c.fail("invalid byte in chunk extension", i)
		}
	case csExtAfterWS:
		switch {
		case cls&cOWS != 0:
		case b == ';':
			c.state = csExtName0
		default:
			return c.fail("invalid byte in chunk extension", i)
		}
	}
	return nil
}

// scanTrailer consumes trailer section bytes from buf[i:] and returns the
// index after them. It returns at the end of buf or of the body.
func (c *Chunked) scanTrailer(buf []byte, i int) (int, error) {
	max := c.MaxTrailerBytes
	if max <= 0 {
		max = DefaultLimits().MaxHeaderBytes
	}
	for i < len(buf) && c.state != csDone {
		start := i
		switch c.state {
		case csTrailerStart:
			switch b := buf[i]; {
			case b == '\r':
				c.state = csEndLF
			case charClass[b]&cToken != 0:
				c.state = csTrailerName
			case charClass[b]&cOWS != 0:
				return i, c.fail("obsolete line folding", i)
			default:
				return i, c.fail("invalid trailer field", i)
			}
			i++
		case csTrailerName:
			for i < len(buf) && charClass[buf[i]]&cToken != 0 {
				i++
			}
			if i < len(buf) {
				if buf[i] != ':' {
					return i, c.fail("invalid trailer field name", i)
				}
				c.state = csTrailerValue
				i++
			}
		case csTrailerValue:
			i = skipValue(buf, i)
			if i < len(buf) {
				if buf[i] != '\r' {
					return i, c.fail("invalid byte in trailer field value", i)
				}
				c.state = csTrailerLF
				i++
			}
		case csTrailerLF, csEndLF:
			if buf[i] != '\n' {
				return i, c.fail("bare cr", i)
			}
			i++
			if c.state == csEndLF {
				c.state = csDone
			} else {
				c.state = csTrailerStart
			}
		}
		c.trailer += i - start
		if c.trailer > max {
			return i, c.fail("trailer section too large", i)
		}
	}
	return i, nil
}

// fail returns the error for the byte at buf[i] of this call.
func (c *Chunked) fail(reason string, i int) error {
	c.err = malformed(reason, int(c.off)+i)
	return c.err
}

// AppendChunkSize appends the chunk-size line of a chunk of n data bytes,
// "<hex>\r\n", to b.
func AppendChunkSize(b []byte, n int) []byte {
	const hex = "0123456789abcdef"
	var tmp [16]byte
	i := len(tmp)
	u := uint64(n)
	for {
		i--
		tmp[i] = hex[u&15]
		u >>= 4
		if u == 0 {
			break
		}
	}
	b = append(b, tmp[i:]...)
	return append(b, '\r', '\n')
}
