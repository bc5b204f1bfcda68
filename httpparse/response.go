package httpparse

// Response is a parsed response head. Its byte slices are sub-slices of the
// buffer given to ResponseParser.Parse and stay valid as long as that buffer
// is neither modified nor reused. A Response is not safe for concurrent use;
// reuse one per connection.
type Response struct {
	// Major and Minor are the HTTP version: 1.0 or 1.1. A response of
	// HTTP/1.2 to HTTP/1.9 parses as 1.1 (RFC 9110 §2.5).
	Major, Minor uint8
	// Status is the status code, 100 to 599.
	Status int
	// Reason is the reason phrase; empty when the status line has none.
	Reason []byte
	// ContentLength is the Content-Length value, or -1 when there is none.
	ContentLength int64
	// Chunked reports a Transfer-Encoding whose final coding is chunked.
	Chunked bool
	// Coded reports a Transfer-Encoding that names a coding other than
	// chunked (gzip, say), which a client of HTTP/1.0 cannot be told of.
	Coded bool
	// Conn is the set of Connection tokens.
	Conn ConnFlags
	// KeepAlive reports whether the Connection fields and the version let
	// the connection persist: HTTP/1.1 without "close", or HTTP/1.0 with
	// "keep-alive". A body read until close (BodyUntilClose) ends the
	// connection regardless.
	KeepAlive bool
	// Headers holds every field line in order. Parse truncates it and
	// appends, so its capacity is reused from one response to the next.
	Headers []Header
	// HeadLen is the length of the head, through the CRLF of the empty line
	// that ends it. The body, if any, starts there.
	HeadLen int
}

// Reset clears r and keeps the capacity of r.Headers.
func (r *Response) Reset() {
	*r = Response{ContentLength: -1, Headers: r.Headers[:0]}
}

// ResponseParser parses response heads. Its zero value is ready to use with
// the default limits (MaxRequestLine does not apply). A ResponseParser must
// not be copied after first use and is not safe for concurrent use; use one
// per upstream connection.
type ResponseParser struct {
	// Limits bounds the head; zero fields mean the defaults.
	Limits Limits

	scan headScan
	_    noCopy
}

// Reset forgets an incomplete head, so that the next Parse starts a new
// message.
func (p *ResponseParser) Reset() {
	p.scan = headScan{}
}

// Parse parses the response head at the start of buf into r, with the
// contract of RequestParser.Parse. A 1xx response is a complete head of its
// own: the caller forwards it and parses the next head for the final
// response.
func (p *ResponseParser) Parse(buf []byte, r *Response) error {
	lim := p.Limits.resolved()
	return p.scan.parseHead(buf, &lim, nil, r)
}

// parseResponse parses a response head in one pass. It returns the length of
// the head, or -1 when buf ends before the head or MaxHeaderBytes does.
func parseResponse(buf []byte, lim *Limits, r *Response) (int, error) {
	r.Reset()
	hv := buf
	if len(hv) > lim.MaxHeaderBytes {
		hv = hv[:lim.MaxHeaderBytes]
	}
	// HTTP-version SP 3DIGIT [SP reason-phrase] CRLF. RFC 9112 §4 requires
	// the SP before an empty reason; like nginx, its absence is accepted.
	if len(hv) < 13 {
		return -1, nil
	}
	minor, err := parseVersion(hv, 0)
	if err != nil {
		return 0, err
	}
	if hv[8] != ' ' {
		return 0, malformed("invalid status line", 8)
	}
	if charClass[hv[9]]&charClass[hv[10]]&charClass[hv[11]]&cDigit == 0 {
		return 0, malformed("invalid status code", 9)
	}
	status := int(hv[9]-'0')*100 + int(hv[10]-'0')*10 + int(hv[11]-'0')
	if status < 100 || status > 599 {
		return 0, malformed("status code out of range", 9)
	}
	i := 12
	if hv[i] == ' ' {
		i = skipValue(hv, 13)
		if i >= len(hv) {
			return -1, nil
		}
		r.Reason = hv[13:i]
	}
	if hv[i] != '\r' {
		return 0, malformed("invalid byte in status line", i)
	}
	if i+1 >= len(hv) {
		return -1, nil
	}
	if hv[i+1] != '\n' {
		return 0, malformed("bare cr", i+1)
	}
	r.Major, r.Minor, r.Status = 1, minor, status
	i += 2

	var f fieldInfo
	f.reset()
	var end int
	r.Headers, end, err = parseFields(hv, i, lim.MaxHeaders, r.Headers, &f)
	if err != nil || end < 0 {
		return end, err
	}
	if f.teFields > 0 {
		switch {
		case r.Minor == 0:
			return 0, malformed("transfer-encoding in http/1.0 response", f.teOff)
		case f.teCodings == 0:
			return 0, malformed("empty transfer-encoding", f.teOff)
		case f.clFirst != nil:
			return 0, malformed("content-length with transfer-encoding", f.teOff)
		}
		r.Chunked = f.teLastChunked
		r.Coded = f.teCodings > f.teChunked
	}
	r.ContentLength = f.contentLength
	r.Conn = f.conn
	r.KeepAlive = keepAlive(r.Minor, f.conn)
	r.HeadLen = end
	return end, nil
}

// BodyMode says how the body of a response is delimited.
type BodyMode uint8

// The body modes.
const (
	// BodyNone: no body follows the head.
	BodyNone BodyMode = iota
	// BodyLength: ContentLength bytes follow.
	BodyLength
	// BodyChunked: a chunked body follows; see Chunked.
	BodyChunked
	// BodyUntilClose: the body runs until the server closes the connection.
	BodyUntilClose
)

// ResponseBody applies RFC 9112 §6.3 to a parsed response: no body for a
// response to HEAD or with status 1xx, 204 or 304; then chunked, then
// Content-Length (0 is no body), and otherwise the body runs until close,
// which includes a Transfer-Encoding whose final coding is not chunked.
// It cannot tell a response to CONNECT; see ResponseBodyFor.
func ResponseBody(r *Response, requestWasHEAD bool) BodyMode {
	switch {
	case requestWasHEAD, r.Status < 200, r.Status == 204, r.Status == 304:
		return BodyNone
	case r.Chunked:
		return BodyChunked
	case r.ContentLength == 0:
		return BodyNone
	case r.ContentLength > 0:
		return BodyLength
	}
	return BodyUntilClose
}

// ResponseBodyFor is ResponseBody for a response to a request with the given
// method: a 2xx response to CONNECT has no body (the connection becomes a
// tunnel), and a response to HEAD has none either.
func ResponseBodyFor(r *Response, method []byte) BodyMode {
	if string(method) == "CONNECT" && r.Status/100 == 2 {
		return BodyNone
	}
	return ResponseBody(r, string(method) == "HEAD")
}
