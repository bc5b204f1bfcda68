package httpparse

import "bytes"

// Limits bounds the size of a message head. A zero or negative field means
// its default.
type Limits struct {
	// MaxRequestLine is the most bytes of a request line without its CRLF,
	// counting any empty lines before it (default 8192, as nginx's
	// large_client_header_buffers). A longer one is ErrURITooLong.
	MaxRequestLine int
	// MaxHeaderBytes is the most bytes of a whole head: start line, field
	// lines and the final empty line (default 32768). A larger one is
	// ErrHeadersTooLarge.
	MaxHeaderBytes int
	// MaxHeaders is the most field lines in a head (default 100). More is
	// ErrHeadersTooLarge.
	MaxHeaders int
}

// DefaultLimits returns the default limits.
func DefaultLimits() Limits {
	return Limits{MaxRequestLine: 8192, MaxHeaderBytes: 32768, MaxHeaders: 100}
}

// resolved returns l with its unset fields set to their defaults.
func (l Limits) resolved() Limits {
	d := DefaultLimits()
	if l.MaxRequestLine <= 0 {
		l.MaxRequestLine = d.MaxRequestLine
	}
	if l.MaxHeaderBytes <= 0 {
		l.MaxHeaderBytes = d.MaxHeaderBytes
	}
	if l.MaxHeaders <= 0 {
		l.MaxHeaders = d.MaxHeaders
	}
	return l
}

// noCopy makes go vet's copylocks check report copies of the struct that
// embeds it.
type noCopy struct{}

func (*noCopy) Lock()   {}
func (*noCopy) Unlock() {}

// headScan looks for the end of a head that arrives in pieces. It checks
// line endings and the limits as it goes, and keeps its place between calls,
// so bytes are looked at once however the head is split. The full parse runs
// once the end is in the buffer.
type headScan struct {
	next    int  // offset of the first line not looked at yet
	started bool // the start line is behind next
	fields  int  // field lines behind next
	active  bool // an earlier call ended with ErrNeedMore
}

// resume goes on looking for the end of the head in buf from where the last
// call stopped. It returns nil once the empty line that ends the head is in
// buf, ErrNeedMore when buf ends first, or the error the bytes seen so far
// show. request selects the request-line rules: empty lines before the start
// line are skipped, and the start line is bounded by MaxRequestLine.
// parseHead drives one Parse of a request head (req set) or a response head
// (resp set): a one-pass parse while buf may hold the whole head, and the
// incremental search for its end, remembered in s, while it does not. On
// ErrNeedMore s stays active; on any other result it is reset. (The two
// parsers are called directly, not through a func value, so that lim and
// the message do not escape: Parse allocates nothing.)
func (s *headScan) parseHead(buf []byte, lim *Limits, req *Request, resp *Response) error {
	request := req != nil
	once := func() (int, error) {
		if request {
			return parseRequest(buf, lim, req)
		}
		return parseResponse(buf, lim, resp)
	}
	if s.active {
		started, fields, from := s.started, s.fields, s.next
		if err := s.resume(buf, lim, request); err != nil {
			switch {
			case err != ErrNeedMore:
				// Refused: with the status the one-pass parse of these
				// bytes gives, however the head was split.
				if _, perr := once(); perr != nil {
					err = perr
				}
				*s = headScan{}
			case s.started && (!started || s.fields > fields):
				// Lines came whole with this piece: check them now, as the
				// one-pass parse does those of the first piece, so that a
				// bad line is refused when it arrives (as nginx refuses
				// it), not when the head ends or its timeout comes. The
				// start line, once, with the one-pass parse; new field
				// lines alone first (checkFields), so that a head sent a
				// line at a time is still looked at once. A refusal is the
				// one-pass parse's, of all of buf: it may still wait for
				// more of the start line (a version is judged on 9 bytes),
				// and then so does this parse; the head's end will refuse
				// the line.
				if !started || checkFields(buf[:s.next], from, lim, req, resp) != nil {
					if _, perr := once(); perr != nil {
						*s = headScan{}
						return perr
					}
				}
			}
			return err
		}
		*s = headScan{}
		end, err := once()
		if err == nil && end < 0 {
			err = malformed("incomplete head", len(buf))
		}
		return err
	}
	end, err := once()
	if err != nil || end >= 0 {
		return err
	}
	err = s.resume(buf, lim, request)
	if err == ErrNeedMore {
		s.active = true
		return err
	}
	*s = headScan{}
	if err == nil {
		err = malformed("incomplete head", len(buf))
	}
	return err
}

// checkFields checks the whole field lines of b from offset from on (b
// ends with the last one's CRLF) as the one-pass parse checks field lines:
// their syntax, and what a field says on its own or beside another of
// these (a Content-Length, a Transfer-Encoding, a Connection). A conflict
// with a field of an earlier piece is found when the head is whole. The
// message's header list is the scratch space: the full parse refills it.
func checkFields(b []byte, from int, lim *Limits, req *Request, resp *Response) error {
	var f fieldInfo
	f.reset()
	var err error
	if req != nil {
		req.Headers, _, err = parseFields(b, from, lim.MaxHeaders, req.Headers[:0], &f)
	} else {
		resp.Headers, _, err = parseFields(b, from, lim.MaxHeaders, resp.Headers[:0], &f)
	}
	return err
}

func (s *headScan) resume(buf []byte, lim *Limits, request bool) error {
	for {
		i := s.next
		if i >= len(buf) {
			return s.short(buf, lim, request)
		}
		if s.started || request {
			if buf[i] == '\r' {
				if i+1 >= len(buf) {
					return s.short(buf, lim, request)
				}
				if buf[i+1] != '\n' {
					return malformed("bare cr", i+1)
				}
				if !s.started {
					s.next = i + 2
					continue
				}
				if i+2 > lim.MaxHeaderBytes {
					return tooLarge("header section too large", lim.MaxHeaderBytes)
				}
				return nil
			}
			if s.started && s.fields >= lim.MaxHeaders {
				return tooLarge("too many fields", i)
			}
		}
		end := min(len(buf), lim.MaxHeaderBytes)
		if request && !s.started {
			end = min(end, lim.MaxRequestLine+2)
		}
		nl := -1
		if i < end {
			nl = bytes.IndexByte(buf[i:end], '\n')
		}
		if nl < 0 {
			return s.short(buf, lim, request)
		}
		nl += i
		if nl == i || buf[nl-1] != '\r' {
			return malformed("bare lf", nl)
		}
		if s.started {
			s.fields++
		} else {
			s.started = true
		}
		s.next = nl + 1
	}
}

// short returns the error for a head that buf ends inside of: a limit
// error when the head can no longer fit, ErrNeedMore otherwise.
func (s *headScan) short(buf []byte, lim *Limits, request bool) error {
	if request && !s.started && len(buf) >= lim.MaxRequestLine+2 {
		return &ParseError{Kind: ErrURITooLong, Reason: "request line too long", Offset: lim.MaxRequestLine}
	}
	if len(buf) >= lim.MaxHeaderBytes {
		return tooLarge("header section too large", lim.MaxHeaderBytes)
	}
	return ErrNeedMore
}

// parseVersion checks "HTTP/" DIGIT "." DIGIT at the start of b, which holds
// at least 8 bytes, and returns the minor version to use: 0 for HTTP/1.0 and
// 1 for HTTP/1.1 and any later HTTP/1.x (RFC 9110 §2.5). off is the offset of
// b in the message, for errors.
func parseVersion(b []byte, off int) (uint8, error) {
	_ = b[7]
	if b[0] != 'H' || b[1] != 'T' || b[2] != 'T' || b[3] != 'P' || b[4] != '/' ||
		charClass[b[5]]&cDigit == 0 || b[6] != '.' || charClass[b[7]]&cDigit == 0 {
		return 0, malformed("invalid http version", off)
	}
	switch b[5] {
	case '1':
	case '0':
		return 0, malformed("http/0.x is not supported", off)
	default:
		return 0, &ParseError{Kind: ErrVersion, Reason: "unsupported major version", Offset: off}
	}
	if b[7] == '0' {
		return 0, nil
	}
	return 1, nil
}

// keepAlive reports whether a connection persists after a message of HTTP/1.minor
// with Connection tokens conn (RFC 9112 §9.3).
func keepAlive(minor uint8, conn ConnFlags) bool {
	if conn&ConnClose != 0 {
		return false
	}
	return minor >= 1 || conn&ConnKeepAlive != 0
}
