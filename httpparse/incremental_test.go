package httpparse

import (
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// feed parses in with one parser, offering first the prefixes of in that end
// at each of cuts (ascending), each in a fresh buffer that is overwritten
// after the call, and then all of in. It returns the first result that is not
// ErrNeedMore. parse is RequestParser.Parse or ResponseParser.Parse bound to
// a message.
func feed(t *testing.T, in string, cuts []int, parse func([]byte) error) error {
	t.Helper()
	for _, k := range cuts {
		buf := []byte(in[:k])
		err := parse(buf)
		if err != ErrNeedMore {
			return err
		}
		for i := range buf {
			buf[i] = 'X' // the parser must not rely on earlier buffers
		}
	}
	return parse([]byte(in))
}

// sameError reports whether two parse results agree: both nil, or both
// errors of the same kind.
func sameError(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	for _, k := range []error{ErrNeedMore, ErrMalformed, ErrURITooLong, ErrHeadersTooLarge, ErrVersion, ErrNotImplemented} {
		if errors.Is(a, k) {
			return errors.Is(b, k)
		}
	}
	return false
}

// requestSplits checks that in parses the same whole, split in two at every
// offset, and fed a byte at a time.
func requestSplits(t *testing.T, in string, lim Limits) {
	t.Helper()
	splits(t, in, func() func([]byte, *Request) error {
		p := &RequestParser{Limits: lim}
		return p.Parse
	})
}

// responseSplits is requestSplits for a response.
func responseSplits(t *testing.T, in string, lim Limits) {
	t.Helper()
	splits(t, in, func() func([]byte, *Response) error {
		p := &ResponseParser{Limits: lim}
		return p.Parse
	})
}

// splits runs the checks of requestSplits with the Parse method of a new
// parser from newParse for each way of feeding in.
func splits[M any](t *testing.T, in string, newParse func() func([]byte, *M) error) {
	t.Helper()
	var whole M
	wantErr := newParse()([]byte(in), &whole)
	check := func(what string, cuts []int) {
		t.Helper()
		var m M
		parse := newParse()
		err := feed(t, in, cuts, func(b []byte) error { return parse(b, &m) })
		if !sameError(err, wantErr) {
			t.Fatalf("%s: Parse = %v, whole input gives %v", what, err, wantErr)
		}
		if err == nil {
			if diff := cmp.Diff(&whole, &m); diff != "" {
				t.Fatalf("%s: mismatch (-whole +split):\n%s", what, diff)
			}
		}
	}
	for k := 0; k <= len(in); k++ {
		check("split at "+strconv.Itoa(k), []int{k})
	}
	all := make([]int, len(in))
	for k := range all {
		all[k] = k
	}
	check("byte at a time", all)
}

func TestRequestSplits(t *testing.T) {
	for _, tt := range validRequests {
		t.Run(tt.name, func(t *testing.T) { requestSplits(t, tt.in, Limits{}) })
	}
	for _, tt := range rejectedRequests {
		t.Run(tt.name, func(t *testing.T) { requestSplits(t, tt.in, Limits{}) })
	}
}

func TestResponseSplits(t *testing.T) {
	for _, tt := range validResponses {
		t.Run(tt.name, func(t *testing.T) { responseSplits(t, tt.in, Limits{}) })
	}
	for _, tt := range rejectedResponses {
		t.Run(tt.name, func(t *testing.T) { responseSplits(t, tt.in, Limits{}) })
	}
}

func TestRequestLimits(t *testing.T) {
	lim := Limits{MaxRequestLine: 32, MaxHeaderBytes: 128, MaxHeaders: 3}
	const fieldHead = "GET / HTTP/1.1\r\nHost: h\r\nA: "
	line := func(n int) string { // a request line of n bytes without CRLF
		return "GET /" + strings.Repeat("a", n-len("GET / HTTP/1.1")) + " HTTP/1.1"
	}
	tests := []struct {
		name string
		in   string
		want error // nil, ErrNeedMore or a kind
	}{
		{"request line at limit", line(32) + "\r\nHost: h\r\n\r\n", nil},
		{"request line over limit", line(33) + "\r\nHost: h\r\n\r\n", ErrURITooLong},
		{"request line over limit before crlf", line(40), ErrURITooLong},
		{"long partial target", "GET /" + strings.Repeat("a", 40), ErrURITooLong},
		{"partial request line within limit", "GET /" + strings.Repeat("a", 20), ErrNeedMore},
		{"empty lines count", strings.Repeat("\r\n", 4) + line(25) + "\r\nHost: h\r\n\r\n", ErrURITooLong},
		{"empty lines within limit", strings.Repeat("\r\n", 3) + line(26) + "\r\nHost: h\r\n\r\n", nil},
		{"only empty lines", strings.Repeat("\r\n", 20), ErrURITooLong},
		{"fields at limit", "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", nil},
		{"fields over limit", "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", ErrHeadersTooLarge},
		{"fields over limit before end", "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC", ErrHeadersTooLarge},
		{"fields at limit before end", "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n", ErrNeedMore},
		{"head at limit", fieldHead + strings.Repeat("v", 128-len(fieldHead)-4) + "\r\n\r\n", nil},
		{"head over limit", fieldHead + strings.Repeat("v", 128-len(fieldHead)-3) + "\r\n\r\n", ErrHeadersTooLarge},
		{"head over limit before end", "GET / HTTP/1.1\r\nHost: h\r\nA: " + strings.Repeat("v", 200), ErrHeadersTooLarge},
		{"head at limit before end", fieldHead + strings.Repeat("v", 128-len(fieldHead)-4) + "\r\n\r", ErrNeedMore},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := RequestParser{Limits: lim}
			var r Request
			err := p.Parse([]byte(tt.in), &r)
			if !sameError(err, tt.want) {
				t.Fatalf("Parse = %v, want %v", err, tt.want)
			}
			if err == nil && r.HeadLen != len(tt.in) {
				t.Errorf("HeadLen = %d, want %d", r.HeadLen, len(tt.in))
			}
			if tt.want != ErrNeedMore {
				requestSplits(t, tt.in, lim)
			}
		})
	}
}

func TestResponseLimits(t *testing.T) {
	lim := Limits{MaxRequestLine: 8, MaxHeaderBytes: 64, MaxHeaders: 2}
	tests := []struct {
		name string
		in   string
		want error
	}{
		{"request line limit does not apply", "HTTP/1.1 200 " + strings.Repeat("r", 30) + "\r\n\r\n", nil},
		{"fields at limit", "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\n\r\n", nil},
		{"fields over limit", "HTTP/1.1 200 OK\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", ErrHeadersTooLarge},
		{"head at limit", "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("v", 64-24) + "\r\n\r\n", nil},
		{"head over limit", "HTTP/1.1 200 OK\r\nA: " + strings.Repeat("v", 64-23) + "\r\n\r\n", ErrHeadersTooLarge},
		{"long status line before end", "HTTP/1.1 200 " + strings.Repeat("r", 80), ErrHeadersTooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := ResponseParser{Limits: lim}
			var r Response
			err := p.Parse([]byte(tt.in), &r)
			if !sameError(err, tt.want) {
				t.Fatalf("Parse = %v, want %v", err, tt.want)
			}
			responseSplits(t, tt.in, lim)
		})
	}
}

func TestDefaultLimits(t *testing.T) {
	want := Limits{MaxRequestLine: 8192, MaxHeaderBytes: 32768, MaxHeaders: 100}
	if diff := cmp.Diff(want, DefaultLimits()); diff != "" {
		t.Errorf("DefaultLimits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want, Limits{MaxHeaders: -1}.resolved()); diff != "" {
		t.Errorf("resolved zero limits (-want +got):\n%s", diff)
	}
	// The defaults apply to a zero parser: 100 fields pass, 101 do not.
	head := func(n int) string {
		return "GET / HTTP/1.1\r\nHost: h\r\n" + strings.Repeat("X: y\r\n", n-1) + "\r\n"
	}
	var p RequestParser
	var r Request
	if err := p.Parse([]byte(head(100)), &r); err != nil {
		t.Errorf("100 fields: %v", err)
	}
	if err := p.Parse([]byte(head(101)), &r); !errors.Is(err, ErrHeadersTooLarge) {
		t.Errorf("101 fields: %v, want ErrHeadersTooLarge", err)
	}
	if err := p.Parse([]byte("GET /"+strings.Repeat("a", 8200)), &r); !errors.Is(err, ErrURITooLong) {
		t.Errorf("8 KiB target: %v, want ErrURITooLong", err)
	}
}

func TestPipelined(t *testing.T) {
	stream := "GET /1 HTTP/1.1\r\nHost: h\r\n\r\n" +
		"POST /2 HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nhello" +
		"\r\nPUT /3 HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n" +
		"GET /4 HTTP/1.0\r\n\r\n"
	type got struct {
		Path string
		Body string
	}
	want := []got{{"/1", ""}, {"/2", "hello"}, {"/3", "abc"}, {"/4", ""}}
	// Deliver the stream in reads of every size from 1 to 17 bytes; the
	// buffer holds the unconsumed bytes, as a connection's would.
	for step := 1; step <= 17; step++ {
		var (
			p       RequestParser
			r       Request
			c       Chunked
			buf     []byte
			results []got
			inBody  bool
			cur     got
			left    int64
		)
		for off := 0; off < len(stream); off += step {
			buf = append(buf, stream[off:min(off+step, len(stream))]...)
			for len(buf) > 0 {
				if !inBody {
					err := p.Parse(buf, &r)
					if err == ErrNeedMore {
						break
					}
					if err != nil {
						t.Fatalf("step %d: Parse: %v", step, err)
					}
					cur = got{Path: string(r.Path)}
					buf = buf[r.HeadLen:]
					left = r.ContentLength
					c.Reset()
					if !r.HasBody() {
						results = append(results, cur)
						continue
					}
					inBody = true
				}
				if r.Chunked {
					n, done, err := c.Scan(buf)
					if err != nil {
						t.Fatalf("step %d: Scan: %v", step, err)
					}
					cur.Body += string(buf[:n])
					buf = buf[n:]
					if !done {
						break
					}
					data, _, err := decodeChunked([]byte(cur.Body))
					if err != nil {
						t.Fatalf("step %d: decode: %v", step, err)
					}
					cur.Body = string(data)
				} else {
					n := min(int64(len(buf)), left)
					cur.Body += string(buf[:n])
					buf, left = buf[n:], left-n
					if left > 0 {
						break
					}
				}
				inBody = false
				results = append(results, cur)
			}
			buf = append([]byte(nil), buf...) // the next read lands in a new buffer
		}
		if diff := cmp.Diff(want, results); diff != "" {
			t.Fatalf("step %d (-want +got):\n%s", step, diff)
		}
		if len(buf) != 0 {
			t.Fatalf("step %d: %q left over", step, buf)
		}
	}
}

// TestStartLineRefusedEarly: a bad start line that arrives in pieces is
// refused once it is whole, with the status it gets when it comes in one
// piece, not when the head ends (which it may never do).
func TestStartLineRefusedEarly(t *testing.T) {
	requests := []string{
		"DELETE /g/1,9?x=48 HTTP/1.1\xff\r\nHost: h0\r\n\r",
		"GET / HTTP/2.0\r\nHost: x\r\n",
		"GET / HTTP/0.9\r\n",
		"GET /a b HTTP/1.1\r\nHost: x\r\n",
		"G@T / HTTP/1.1\r\n",
		"\r\nGET / HTTX/1.1\r\nA: b\r\n",
		// A bad version, then a bare LF the search for the head's end
		// meets in the same piece: the version is refused (505), as whole.
		"POST /s HTTP/3.1\r\nHost: x\r\nContent-Length: 50\n\r\nhello",
	}
	for _, in := range requests {
		line := strings.Index(strings.TrimLeft(in, "\r\n"), "\r\n") + len(in) - len(strings.TrimLeft(in, "\r\n"))
		refusedWhenSplit(t, in, line, requestParse)
	}
	responses := []string{
		"HTTP/1.1 2000 OK\r\nA: b\r\n",
		"HTTP/1.1 200 OK\x00\r\n",
		"HTTP/3.0 200 OK\r\n",
	}
	for _, in := range responses {
		refusedWhenSplit(t, in, strings.Index(in, "\r\n"), responseParse)
	}
}

// refusedWhenSplit checks that in, which the one-pass parse refuses, is
// refused alike when it comes in two pieces, the first of k bytes, for
// each k from 1 to last. parse returns the Parse of a new parser.
func refusedWhenSplit(t *testing.T, in string, last int, parse func() func([]byte) error) {
	t.Helper()
	want := parse()([]byte(in))
	if want == nil || want == ErrNeedMore {
		t.Fatalf("%q: whole input gives %v, want a refusal", in, want)
	}
	for k := 1; k <= last; k++ {
		if err := feed(t, in, []int{k}, parse()); !sameError(err, want) {
			t.Errorf("%q split at %d: Parse = %v, whole input gives %v", in, k, err, want)
		}
	}
}

// requestParse and responseParse return the Parse of a new parser, into a
// message of their own.
func requestParse() func([]byte) error {
	var r Request
	p := &RequestParser{}
	return func(b []byte) error { return p.Parse(b, &r) }
}

func responseParse() func([]byte) error {
	var r Response
	p := &ResponseParser{}
	return func(b []byte) error { return p.Parse(b, &r) }
}

// A bad field line in a head that arrives in pieces is refused when the
// piece that ends it arrives, with the status the one-pass parse of the
// same bytes gives, whether or not the head has ended: a client that sends
// it and waits is answered at once, not at the header timeout. (A field
// at odds with one of an earlier piece, a second Content-Length, is
// refused when the head is whole.)
func TestFieldLineRefusedEarly(t *testing.T) {
	requests := []string{
		"GET / HTTP/1.1\r\nHost: x\r\nBad Name: y\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nA : b\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nA: b\x01c\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nA: b\r\n c\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nNoColon\r\n",
		"GET / HTTP/1.1\r\n: empty\r\nHost: x\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\nA: b\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, chunked\r\n",
	}
	for _, in := range requests {
		refusedWhenSplit(t, in, len(in)-1, requestParse)
	}
	responses := []string{
		"HTTP/1.1 200 OK\r\nContent-Length: 5\r\nBad Name: y\r\n",
		"HTTP/1.1 200 OK\r\nA: b\r\n\tc\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 5, 6\r\n",
	}
	for _, in := range responses {
		refusedWhenSplit(t, in, len(in)-1, responseParse)
	}
}

// A head sent a line at a time parses as it does whole, and a field at
// odds with one of an earlier piece is refused once the head is whole,
// with the one-pass parse's status.
func TestFieldLinesOneByOne(t *testing.T) {
	for _, in := range []string{
		"POST /a?b=c HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\nA: b\r\nConnection: keep-alive\r\n\r\nabc",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
		"POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
	} {
		var whole Request
		want := new(RequestParser).Parse([]byte(in), &whole)
		var cuts []int
		for i := 0; i+1 < len(in); i++ {
			if in[i] == '\r' && in[i+1] == '\n' {
				cuts = append(cuts, i+2)
			}
		}
		cuts = cuts[:len(cuts)-1] // the last is the head's end
		var r Request
		p := &RequestParser{}
		err := feed(t, in, cuts, func(b []byte) error { return p.Parse(b, &r) })
		if !sameError(err, want) {
			t.Errorf("%q a line at a time: Parse = %v, whole input gives %v", in, err, want)
		}
		if want == nil && (string(r.Path) != string(whole.Path) || r.ContentLength != whole.ContentLength || len(r.Headers) != len(whole.Headers)) {
			t.Errorf("%q a line at a time: path %q, length %d, %d fields; whole: %q, %d, %d", in, r.Path, r.ContentLength, len(r.Headers), whole.Path, whole.ContentLength, len(whole.Headers))
		}
	}
}
