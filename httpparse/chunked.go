package httpparse

import "math"

// MaxChunkExt is the most bytes of chunk extensions on one chunk-size line,
// from the first ';' up to the CRLF.
const MaxChunkExt = 4096

// States of Chunked.
const (
	csSize         = iota // chunk-size digits
	csExt                 // chunk extensions, after ';'
	csSizeLF              // LF after the chunk-size line's CR
	csData                // chunk data
	csDataCR              // CR after chunk data
	csDataLF              // LF after chunk data
	csTrailerStart        // start of a trailer field line or of the final CRLF
	csTrailerName         // trailer field name
	csTrailerValue        // trailer field value, after ':'
	csTrailerLF           // LF after a trailer field line's CR
	csEndLF               // LF of the final CRLF
	csDone                // the body has ended
)

// Chunked validates a chunked body (RFC 9112 §7.1) that a proxy forwards as
// it is, framing included. It keeps its state between calls to Scan and never
// needs earlier bytes again, so the caller can forward and drop each piece as
// it arrives. The zero value is ready for a new body. A Chunked is not safe
// for concurrent use.
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
// scanned.
func (c *Chunked) Done() bool { return c.state == csDone }

// Scan consumes the chunked body bytes at the start of buf and returns how
// many belong to the body (framing included) and whether the body, with its
// last chunk and trailer section, ends within them. Bytes after the end are
// not consumed: n is then less than len(buf) and those bytes start the next
// message. Without done, all of buf was consumed and the body goes on in the
// next call's bytes. After done, Scan returns 0, true, nil until Reset;
// after an error it returns that error until Reset.
//
// The chunk-size is 1*HEXDIG, at most 16 digits and at most 2^63-1, followed
// directly by ';' or CRLF (no whitespace); chunk extensions are only checked
// for their bytes (HTAB, SP, VCHAR, obs-text) and length (MaxChunkExt).
// Trailer fields follow the rules of header fields. Every line ends in CRLF.
// An error is a *ParseError of kind ErrMalformed whose Offset counts from
// the start of the body; the body cannot be forwarded further.
func (c *Chunked) Scan(buf []byte) (n int, done bool, err error) {
	if c.err != nil {
		return 0, false, c.err
	}
	i := 0
	for i < len(buf) {
		switch c.state {
		case csSize:
			b := buf[i]
			if d := unhex[b]; d != 0xff {
				if c.digits == 16 || c.size > (math.MaxInt64-int64(d))>>4 {
					return i, false, c.fail("chunk size too large", i)
				}
				c.size = c.size<<4 | int64(d)
				c.digits++
				i++
				continue
			}
			if c.digits == 0 {
				return i, false, c.fail("invalid chunk size", i)
			}
			switch b {
			case ';':
				c.state = csExt
				c.ext = 1
			case '\r':
				c.state = csSizeLF
			default:
				return i, false, c.fail("invalid byte after chunk size", i)
			}
			i++
		case csExt:
			j := skipValue(buf, i)
			c.ext += j - i
			if c.ext > MaxChunkExt {
				return j, false, c.fail("chunk extension too long", j)
			}
			i = j
			if i >= len(buf) {
				break
			}
			if buf[i] != '\r' {
				return i, false, c.fail("invalid byte in chunk extension", i)
			}
			c.state = csSizeLF
			i++
		case csSizeLF:
			if buf[i] != '\n' {
				return i, false, c.fail("bare cr", i)
			}
			i++
			c.digits = 0
			if c.size == 0 {
				c.state = csTrailerStart
			} else {
				c.state = csData
			}
		case csData:
			k := int64(len(buf) - i)
			if k > c.size {
				k = c.size
			}
			i += int(k)
			c.size -= k
			if c.size == 0 {
				c.state = csDataCR
			}
		case csDataCR:
			if buf[i] != '\r' {
				return i, false, c.fail("missing crlf after chunk data", i)
			}
			c.state = csDataLF
			i++
		case csDataLF:
			if buf[i] != '\n' {
				return i, false, c.fail("missing crlf after chunk data", i)
			}
			c.state = csSize
			i++
		default:
			j, err := c.scanTrailer(buf, i)
			if err != nil || c.state == csDone {
				return j, c.state == csDone, err
			}
			i = j
		}
	}
	c.off += int64(i)
	return i, c.state == csDone, nil
}

// scanTrailer consumes trailer section bytes from buf[i:] and returns the
// index after them. It returns at the end of buf or of the body.
func (c *Chunked) scanTrailer(buf []byte, i int) (int, error) {
	max := c.MaxTrailerBytes
	if max <= 0 {
		max = DefaultLimits().MaxHeaderBytes
	}
	for i < len(buf) {
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
		case csDone:
			c.off += int64(i)
			return i, nil
		}
		c.trailer += i - start
		if c.trailer > max {
			return i, c.fail("trailer section too large", i)
		}
	}
	if c.state == csDone {
		c.off += int64(i)
	}
	return i, nil
}

// fail returns the error for the byte at buf[i] of this call.
func (c *Chunked) fail(reason string, i int) error {
	c.err = malformed(reason, int(c.off)+i)
	return c.err
}
