package load

import (
	"bytes"
	"errors"
)

// Errors returned by this package.
var (
	ErrMalformed = errors.New("load: malformed response")
	ErrTooLarge  = errors.New("load: response head too large")
	ErrTrailing  = errors.New("load: bytes after response")
	ErrConfig    = errors.New("load: bad config")
)

const (
	stHead = iota
	stBody
	stChunkSize
	stChunkData
	stChunkCRLF
	stTrailer
	stUntilClose
)

// parser reads one HTTP/1.1 response incrementally. The zero value expects
// a response head.
type parser struct {
	state  uint8
	status int
	remain int
	close  bool
}

var crlf = []byte("\r\n")

// feed consumes a prefix of b. It returns the bytes consumed and whether the
// response is complete. A head is consumed only once it is whole, so with
// consumed == 0 and done false the caller must supply more bytes. feed does
// not retain b.
func (p *parser) feed(b []byte, maxHead int) (consumed int, done bool, err error) {
	for consumed < len(b) {
		rest := b[consumed:]
		switch p.state {
		case stHead:
			end := bytes.Index(rest, crlfcrlf)
			if end < 0 {
				if len(rest) > maxHead {
					return consumed, false, ErrTooLarge
				}
				return consumed, false, nil
			}
			if err := p.head(rest[:end+2]); err != nil {
				return consumed, false, err
			}
			consumed += end + 4
			if p.state == stBody && p.remain == 0 {
				p.reset()
				return consumed, true, nil
			}
		case stBody:
			k := min(p.remain, len(rest))
			p.remain -= k
			consumed += k
			if p.remain == 0 {
				p.reset()
				return consumed, true, nil
			}
		case stChunkSize, stTrailer:
			end := bytes.Index(rest, crlf)
			if end < 0 {
				if len(rest) > maxHead {
					return consumed, false, ErrTooLarge
				}
				return consumed, false, nil
			}
			line := rest[:end]
			consumed += end + 2
			if p.state == stTrailer {
				if len(line) == 0 {
					p.reset()
					return consumed, true, nil
				}
				continue
			}
			n, ok := parseHex(line)
			if !ok {
				return consumed, false, ErrMalformed
			}
			if n == 0 {
				p.state = stTrailer
			} else {
				p.state, p.remain = stChunkData, n
			}
		case stChunkData:
			k := min(p.remain, len(rest))
			p.remain -= k
			consumed += k
			if p.remain == 0 {
				p.state = stChunkCRLF
			}
		case stChunkCRLF:
			if len(rest) < 2 {
				return consumed, false, nil
			}
			if rest[0] != '\r' || rest[1] != '\n' {
				return consumed, false, ErrMalformed
			}
			consumed += 2
			p.state = stChunkSize
		case stUntilClose:
			return len(b), false, nil
		}
	}
	return consumed, false, nil
}

// eof tells the parser the connection was closed; it reports whether that
// completed a close-delimited response.
func (p *parser) eof() bool {
	if p.state == stUntilClose {
		p.reset()
		return true
	}
	return false
}

func (p *parser) reset() {
	status, cl := p.status, p.close
	*p = parser{status: status, close: cl}
}

var (
	crlfcrlf  = []byte("\r\n\r\n")
	hContLen  = []byte("content-length:")
	hTransEnc = []byte("transfer-encoding:")
	hConn     = []byte("connection:")
	vChunked  = []byte("chunked")
	vClose    = []byte("close")
)

// head parses a status line and headers, each line ending in CRLF.
func (p *parser) head(h []byte) error {
	eol := bytes.Index(h, crlf)
	line := h[:eol]
	// HTTP/1.x SSS
	if len(line) < 12 || !bytes.HasPrefix(line, []byte("HTTP/1.")) || line[8] != ' ' {
		return ErrMalformed
	}
	st := 0
	for _, c := range line[9:12] {
		if c < '0' || c > '9' {
			return ErrMalformed
		}
		st = st*10 + int(c-'0')
	}
	p.status = st
	p.close = line[7] == '0'
	h = h[eol+2:]
	cl, chunked := -1, false
	for len(h) > 0 {
		eol = bytes.Index(h, crlf)
		line, h = h[:eol], h[eol+2:]
		switch {
		case hasPrefixFold(line, hContLen):
			n, ok := parseDec(bytes.TrimSpace(line[len(hContLen):]))
			if !ok || cl >= 0 && cl != n {
				return ErrMalformed
			}
			cl = n
		case hasPrefixFold(line, hTransEnc):
			chunked = containsFold(line[len(hTransEnc):], vChunked)
		case hasPrefixFold(line, hConn):
			if containsFold(line[len(hConn):], vClose) {
				p.close = true
			}
		}
	}
	switch {
	case st/100 == 1 || st == 204 || st == 304:
		p.state, p.remain = stBody, 0
	case chunked:
		p.state, p.remain = stChunkSize, 0
	case cl >= 0:
		p.state, p.remain = stBody, cl
	default:
		p.state, p.remain = stUntilClose, 0
	}
	return nil
}

func parseDec(b []byte) (int, bool) {
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}

func parseHex(b []byte) (int, bool) {
	if i := bytes.IndexByte(b, ';'); i >= 0 {
		b = b[:i]
	}
	b = bytes.TrimSpace(b)
	if len(b) == 0 || len(b) > 15 {
		return 0, false
	}
	n := 0
	for _, c := range b {
		var d byte
		switch {
		case '0' <= c && c <= '9':
			d = c - '0'
		case 'a' <= c && c <= 'f':
			d = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, false
		}
		n = n<<4 | int(d)
	}
	return n, true
}

func lower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

func hasPrefixFold(b, low []byte) bool {
	if len(b) < len(low) {
		return false
	}
	for i, c := range low {
		if lower(b[i]) != c {
			return false
		}
	}
	return true
}

func containsFold(b, low []byte) bool {
	for i := 0; i+len(low) <= len(b); i++ {
		if hasPrefixFold(b[i:], low) {
			return true
		}
	}
	return false
}
