package httpparse

// Request is a parsed request head. Its byte slices are sub-slices of the
// buffer given to RequestParser.Parse (except Path in one case, see below)
// and stay valid as long as that buffer is neither modified nor reused.
// A Request is not safe for concurrent use; reuse one per connection.
type Request struct {
	// Method is the request method, a token (case-sensitive).
	Method []byte
	// Target is the request-target as sent.
	Target []byte
	// Path is the path of an origin-form or absolute-form target, percent
	// encoding intact. For an absolute-form target with an empty path it is
	// "/" (RFC 9112 §3.2.1), a shared read-only slice outside the buffer. It
	// is "*" for the asterisk-form and nil for the authority-form.
	Path []byte
	// Query is the part of the target after the first '?', without it; nil
	// when there is no '?'.
	Query []byte
	// Major and Minor are the HTTP version: 1.0 or 1.1. A request of
	// HTTP/1.2 to HTTP/1.9 parses as 1.1 (RFC 9110 §2.5).
	Major, Minor uint8
	// Host is the authority the request is for: the host and port of an
	// absolute-form target (RFC 9112 §3.2.2, the Host field is then
	// ignored) or else the Host field value. It is nil when an HTTP/1.0
	// request has neither.
	Host []byte
	// ContentLength is the Content-Length value, or -1 when there is none.
	ContentLength int64
	// Chunked reports a Transfer-Encoding of chunked.
	Chunked bool
	// Conn is the set of Connection tokens.
	Conn ConnFlags
	// KeepAlive reports whether the connection persists after this request:
	// HTTP/1.1 without "close", or HTTP/1.0 with "keep-alive".
	KeepAlive bool
	// Upgrade is the value of the first Upgrade field, or nil.
	Upgrade []byte
	// Expect100 reports an Expect: 100-continue field in an HTTP/1.1 request.
	// Other expectations leave it false; the field is in Headers.
	Expect100 bool
	// Headers holds every field line in order, those with dedicated fields
	// above included. Parse truncates it and appends, so its capacity is
	// reused from one request to the next.
	Headers []Header
	// HeadLen is the length of the head, from the first byte of buf through
	// the CRLF of the empty line that ends it. The body, if any, starts there.
	HeadLen int
}

// Reset clears r and keeps the capacity of r.Headers.
func (r *Request) Reset() {
	*r = Request{ContentLength: -1, Headers: r.Headers[:0]}
}

// Rebase points r's slices that alias head, the buffer r was parsed from,
// at the same bytes of moved, a copy of head, so that r stays valid once
// head's buffer is reused, without parsing the head again. It reports
// false, changing nothing, when r was not parsed from head (the request
// line is not in it); slices that alias neither (a constant of the
// parser's) are left as they are.
func (r *Request) Rebase(head, moved []byte) bool {
	if _, ok := offsetIn(r.Method, head); !ok || len(moved) < len(head) {
		return false
	}
	r.Method = Rebase(r.Method, head, moved)
	r.Target = Rebase(r.Target, head, moved)
	r.Path = Rebase(r.Path, head, moved)
	r.Query = Rebase(r.Query, head, moved)
	r.Host = Rebase(r.Host, head, moved)
	r.Upgrade = Rebase(r.Upgrade, head, moved)
	for i := range r.Headers {
		h := &r.Headers[i]
		h.Name = Rebase(h.Name, head, moved)
		h.Value = Rebase(h.Value, head, moved)
	}
	return true
}

// Rebase returns the bytes of moved at s's place in head when s lies
// within head, else s: a slice of a head carried over to its copy.
func Rebase(s, head, moved []byte) []byte {
	off, ok := offsetIn(s, head)
	if !ok {
		return s
	}
	return moved[off : off+len(s) : off+len(s)]
}

// HasBody reports whether a body follows the head: a Content-Length above
// zero or a chunked Transfer-Encoding (RFC 9112 §6.3).
func (r *Request) HasBody() bool {
	return r.ContentLength > 0 || r.Chunked
}

// slashPath is the Path of an absolute-form target with an empty path.
var slashPath = []byte("/")[:1:1]

// RequestParser parses request heads. Its zero value is ready to use with
// the default limits. A RequestParser must not be copied after first use and
// is not safe for concurrent use; use one per connection.
type RequestParser struct {
	// Limits bounds the head; zero fields mean the defaults.
	Limits Limits

	scan headScan
	_    noCopy
}

// Reset forgets an incomplete head, so that the next Parse starts a new
// message.
func (p *RequestParser) Reset() {
	p.scan = headScan{}
}

// Parse parses the request head at the start of buf into r.
//
// On success r holds sub-slices of buf, valid as long as buf is, r.HeadLen
// bytes of buf belong to the head, and the parser is ready for the next
// message. ErrNeedMore means buf holds an incomplete head: call Parse again
// with the same bytes followed by more (the buffer may have moved). The parser
// remembers how far it looked, so bytes are not scanned again for the end of
// the head; the whole head is parsed once when its end arrives. Any other
// error is a *ParseError for a request to refuse with Status(err); the parser
// is then reset. r is only meaningful after a nil error.
func (p *RequestParser) Parse(buf []byte, r *Request) error {
	lim := p.Limits.resolved()
	return p.scan.parseHead(buf, &lim, r, nil)
}

// parseRequest parses a request head in one pass. It returns the length of
// the head, or -1 when buf ends before the head or one of the limits does.
func parseRequest(buf []byte, lim *Limits, r *Request) (int, error) {
	r.Reset()
	hv := buf
	if len(hv) > lim.MaxHeaderBytes {
		hv = hv[:lim.MaxHeaderBytes]
	}
	rv := hv
	if len(rv) > lim.MaxRequestLine+1 {
		rv = rv[:lim.MaxRequestLine+1]
	}
	i := 0
	for i < len(rv) && rv[i] == '\r' {
		if i+1 >= len(rv) {
			return -1, nil
		}
		if rv[i+1] != '\n' {
			return 0, malformed("bare cr", i+1)
		}
		i += 2
	}

	// method SP
	ms := i
	for i < len(rv) && charClass[rv[i]]&cToken != 0 {
		i++
	}
	if i >= len(rv) {
		return -1, nil
	}
	if rv[i] != ' ' || i == ms {
		return 0, malformed("invalid method", i)
	}
	r.Method = rv[ms:i]
	i++

	// request-target SP
	ts, q := i, -1
	for {
		for i+4 <= len(rv) && charClass[rv[i]]&charClass[rv[i+1]]&charClass[rv[i+2]]&charClass[rv[i+3]]&cTarget != 0 {
			i += 4
		}
		for i < len(rv) && charClass[rv[i]]&cTarget != 0 {
			i++
		}
		if i >= len(rv) {
			return -1, nil
		}
		c := rv[i]
		if c == '?' {
			if q < 0 {
				q = i
			}
			i++
			continue
		}
		if c == '%' {
			if q < 0 {
				if i+2 >= len(rv) {
					return -1, nil
				}
				if charClass[rv[i+1]]&charClass[rv[i+2]]&cHex == 0 {
					return 0, malformed("invalid percent-encoding in path", i)
				}
				i += 2
			}
			i++
			continue
		}
		break
	}
	if rv[i] != ' ' {
		return 0, malformed("invalid byte in request-target", i)
	}
	if i == ts {
		return 0, malformed("empty request-target", i)
	}
	target := rv[ts:i]
	i++

	// HTTP-version CRLF
	if i+9 > len(rv) {
		return -1, nil
	}
	minor, err := parseVersion(rv[i:i+8], i)
	if err != nil {
		return 0, err
	}
	if rv[i+8] != '\r' {
		return 0, malformed("invalid http version", i)
	}
	if i+9 >= len(hv) {
		return -1, nil
	}
	if hv[i+9] != '\n' {
		return 0, malformed("bare cr", i+9)
	}
	r.Major, r.Minor = 1, minor
	r.Target = target
	if err := r.splitTarget(q-ts, ts); err != nil {
		return 0, err
	}
	i += 10

	var f fieldInfo
	f.reset()
	var end int
	r.Headers, end, err = parseFields(hv, i, lim.MaxHeaders, r.Headers, &f)
	if err != nil || end < 0 {
		return end, err
	}

	switch {
	case f.hosts > 1:
		return 0, malformed("repeated host", f.hostOff)
	case f.hosts == 1:
		if !validHost(f.host, false) {
			return 0, malformed("invalid host", f.hostOff)
		}
		if r.Host == nil {
			r.Host = f.host
		}
	case r.Minor == 1:
		return 0, malformed("missing host", end)
	}
	if f.teFields > 0 {
		switch {
		case r.Minor == 0:
			return 0, malformed("transfer-encoding in http/1.0 request", f.teOff)
		case f.teFields > 1:
			return 0, malformed("repeated transfer-encoding", f.teOff)
		case f.clFirst != nil:
			return 0, malformed("content-length with transfer-encoding", f.teOff)
		case !equalLower(f.teValue, "chunked"):
			if f.teEmpty {
				// RFC 9110 §5.6.1 lets a recipient skip empty list
				// elements; a request has no reason to carry them.
				return 0, malformed("empty transfer coding", f.teOff)
			}
			// Codings that parse but are not just chunked: gzip,
			// "gzip, chunked" and the like.
			return 0, &ParseError{Kind: ErrNotImplemented, Reason: "transfer coding other than chunked", Offset: f.teOff}
		}
		r.Chunked = true
	}
	r.ContentLength = f.contentLength
	r.Conn = f.conn
	r.KeepAlive = keepAlive(r.Minor, f.conn)
	r.Upgrade = f.upgrade
	r.Expect100 = f.expect100 && r.Minor == 1
	r.HeadLen = end
	return end, nil
}

// splitTarget sets Path, Query and, for an absolute-form target, Host from
// r.Target. q is the index of the first '?' in the target or negative, and
// off the offset of the target in the message, for errors.
func (r *Request) splitTarget(q, off int) error {
	t := r.Target
	connect := string(r.Method) == "CONNECT"
	if q >= 0 {
		r.Query = t[q+1:]
		t = t[:q]
	}
	switch {
	case len(t) > 0 && t[0] == '/':
		if connect {
			return malformed("connect needs an authority-form target", off)
		}
		r.Path = t
	case connect:
		if r.Query != nil || !validHost(t, true) {
			return malformed("invalid authority-form target", off)
		}
	case len(r.Target) == 1 && r.Target[0] == '*':
		if string(r.Method) != "OPTIONS" {
			return malformed("asterisk-form needs options", off)
		}
		r.Path = t
	default:
		// absolute-form: http or https, "//", a non-empty authority and a
		// path-abempty (RFC 9110 §4.2).
		n := 0
		switch {
		case len(t) >= 7 && equalLower(t[:7], "http://"):
			n = 7
		case len(t) >= 8 && equalLower(t[:8], "https://"):
			n = 8
		default:
			return malformed("invalid request-target", off)
		}
		a := n
		for a < len(t) && t[a] != '/' {
			a++
		}
		auth := t[n:a]
		if len(auth) == 0 || !validHost(auth, false) {
			return malformed("invalid authority in request-target", off+n)
		}
		r.Host = auth
		r.Path = t[a:]
		if len(r.Path) == 0 {
			r.Path = slashPath
		}
	}
	return nil
}
