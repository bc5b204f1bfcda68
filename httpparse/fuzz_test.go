package httpparse

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httputil"
	"net/textproto"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fuzzRegressions are inputs that once failed a fuzz target.
var fuzzRegressions = []string{
	// A fault in an incomplete head: seen at once whole, later when split.
	" ",
	// net/http keeps the transfer-coding of a 1xx response.
	"HTTP/1.1 100 00\r\nTrAnsfer-EnCoding:Chunked\r\n00000000000000000:00000000\r\n\r\n",
}

// fuzzSeeds returns seed inputs for the fuzz targets.
func fuzzSeeds() []string {
	s := []string{sampleRequest, sampleResponse, sampleChunked}
	s = append(s, fuzzRegressions...)
	for _, tt := range validRequests {
		s = append(s, tt.in)
	}
	for _, tt := range rejectedRequests {
		s = append(s, tt.in)
	}
	for _, tt := range validResponses {
		s = append(s, tt.in)
	}
	for _, tt := range rejectedResponses {
		s = append(s, tt.in)
	}
	return s
}

// fuzzCut picks a split point from the input itself.
func fuzzCut(data []byte) int {
	if len(data) == 0 {
		return 0
	}
	return int(data[len(data)-1]) * 7919 % (len(data) + 1)
}

// hasCommaContentLength reports a Content-Length field holding a list,
// which this package accepts when its elements are identical and net/http
// never does.
func hasCommaContentLength(hs []Header) bool {
	for _, h := range hs {
		if h.ID == HdrContentLength && bytes.IndexByte(h.Value, ',') >= 0 {
			return true
		}
	}
	return false
}

// fieldValues groups the field values by canonical name, as net/http does,
// as net/http does.
func fieldValues(hs []Header) map[string][]string {
	m := map[string][]string{}
	for _, h := range hs {
		k := textproto.CanonicalMIMEHeaderKey(string(h.Name))
		m[k] = append(m[k], string(h.Value))
	}
	return m
}

func compareFields(t *testing.T, ours []Header, theirs http.Header) {
	t.Helper()
	skip := func(k string) bool {
		return k == "Transfer-Encoding" || k == "Content-Length" || k == "Cache-Control" || k == "Host" || k == "Connection"
	}
	want := fieldValues(ours)
	got := map[string][]string{}
	for k, v := range theirs {
		if !skip(k) {
			got[k] = v
		}
	}
	for k := range want {
		if skip(k) {
			delete(want, k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("fields differ (-ours +net/http):\n%s", diff)
	}
}

// checkSplitResult checks the result of a split parse against that of the
// whole input: the same acceptance; ErrNeedMore for both when the whole is
// incomplete and faultless. A fault in an incomplete head may show in the
// whole parse and not yet in the split one, and with several faults the
// kinds may differ.
func checkSplitResult(t *testing.T, whole, split error) {
	t.Helper()
	switch {
	case (whole == nil) != (split == nil):
		t.Fatalf("split parse = %v, whole = %v", split, whole)
	case whole == ErrNeedMore && split != ErrNeedMore:
		t.Fatalf("split parse = %v, whole needs more", split)
	}
}

// FuzzRequest compares RequestParser with net/http.ReadRequest: what this
// package accepts, net/http must accept and read the same way, except for the
// documented differences. It also checks that a split input parses as the
// whole does.
func FuzzRequest(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p RequestParser
		var r Request
		err := p.Parse(data, &r)

		var p2 RequestParser
		var r2 Request
		err2 := feed(t, string(data), []int{fuzzCut(data)}, func(b []byte) error { return p2.Parse(b, &r2) })
		checkSplitResult(t, err, err2)
		if err != nil {
			if err != ErrNeedMore {
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Offset < 0 || pe.Offset > len(data) {
					t.Fatalf("bad error %#v", err)
				}
			}
			return
		}
		if diff := cmp.Diff(&r, &r2); diff != "" {
			t.Fatalf("split parse differs (-whole +split):\n%s", diff)
		}
		if r.HeadLen > len(data) || len(r.Headers) > 100 {
			t.Fatalf("HeadLen %d of %d, %d fields", r.HeadLen, len(data), len(r.Headers))
		}

		head := data[:r.HeadLen]
		for len(head) >= 2 && head[0] == '\r' && head[1] == '\n' {
			head = head[2:] // net/http does not skip empty lines
		}
		req, gerr := http.ReadRequest(bufio.NewReader(bytes.NewReader(head)))
		if gerr != nil {
			if hasCommaContentLength(r.Headers) {
				return
			}
			t.Fatalf("net/http rejects what we accept: %v\n%q", gerr, head)
		}
		if req.Method != string(r.Method) {
			t.Fatalf("method %q, net/http %q", r.Method, req.Method)
		}
		if string(r.Method) == "CONNECT" {
			if req.URL.Host != string(r.Target) {
				t.Fatalf("connect authority %q, net/http %q", r.Target, req.URL.Host)
			}
		} else if req.Host != string(r.Host) {
			t.Fatalf("host %q, net/http %q", r.Host, req.Host)
		}
		path, uerr := url.PathUnescape(string(r.Path))
		if uerr != nil {
			t.Fatalf("path %q does not unescape: %v", r.Path, uerr)
		}
		if path != req.URL.Path && !(path == "/" && req.URL.Path == "") {
			t.Fatalf("path %q, net/http %q", path, req.URL.Path)
		}
		if req.URL.RawQuery != string(r.Query) {
			t.Fatalf("query %q, net/http %q", r.Query, req.URL.RawQuery)
		}
		goChunked := slices.Equal(req.TransferEncoding, []string{"chunked"})
		switch {
		case r.Chunked != goChunked:
			t.Fatalf("chunked %v, net/http %v", r.Chunked, req.TransferEncoding)
		case r.Chunked && req.ContentLength != -1,
			!r.Chunked && r.ContentLength == -1 && req.ContentLength != 0,
			!r.Chunked && r.ContentLength >= 0 && req.ContentLength != r.ContentLength:
			t.Fatalf("content-length %d, net/http %d", r.ContentLength, req.ContentLength)
		}
		if r.KeepAlive == req.Close {
			t.Fatalf("keep-alive %v, net/http close %v", r.KeepAlive, req.Close)
		}
		compareFields(t, r.Headers, req.Header)
	})
}

// FuzzResponse compares ResponseParser with net/http.ReadResponse for a
// response to GET.
func FuzzResponse(f *testing.F) {
	for _, s := range fuzzSeeds() {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var p ResponseParser
		var r Response
		err := p.Parse(data, &r)

		var p2 ResponseParser
		var r2 Response
		err2 := feed(t, string(data), []int{fuzzCut(data)}, func(b []byte) error { return p2.Parse(b, &r2) })
		checkSplitResult(t, err, err2)
		if err != nil {
			return
		}
		if diff := cmp.Diff(&r, &r2); diff != "" {
			t.Fatalf("split parse differs (-whole +split):\n%s", diff)
		}

		head := data[:r.HeadLen]
		resp, gerr := http.ReadResponse(bufio.NewReader(bytes.NewReader(head)), &http.Request{Method: "GET"})
		if gerr != nil {
			var te bool
			for _, h := range r.Headers {
				te = te || h.ID == HdrTransferEncoding
			}
			// net/http knows no transfer-coding but a lone chunked.
			if hasCommaContentLength(r.Headers) || te && strings.Contains(gerr.Error(), "transfer encoding") {
				return
			}
			t.Fatalf("net/http rejects what we accept: %v\n%q", gerr, head)
		}
		defer resp.Body.Close()
		if resp.StatusCode != r.Status || resp.ProtoMajor != 1 || min(resp.ProtoMinor, 1) != int(r.Minor) {
			t.Fatalf("status %d %d.%d, net/http %d %d.%d", r.Status, r.Major, r.Minor, resp.StatusCode, resp.ProtoMajor, resp.ProtoMinor)
		}
		mode := ResponseBody(&r, false)
		goChunked := slices.Equal(resp.TransferEncoding, []string{"chunked"})
		ok := true
		switch mode {
		case BodyNone:
			ok = resp.ContentLength == 0 // net/http keeps the coding of a 1xx, 204 or 304
		case BodyLength:
			ok = resp.ContentLength == r.ContentLength
		case BodyChunked:
			ok = goChunked
		case BodyUntilClose:
			ok = resp.ContentLength == -1 && !goChunked
		}
		if !ok {
			t.Fatalf("body mode %d, net/http length %d coding %v", mode, resp.ContentLength, resp.TransferEncoding)
		}
		if (r.KeepAlive && mode != BodyUntilClose) == resp.Close {
			t.Fatalf("keep-alive %v mode %d, net/http close %v", r.KeepAlive, mode, resp.Close)
		}
		compareFields(t, r.Headers, resp.Header)
	})
}

// FuzzChunked compares Chunked with net/http/httputil's chunked reader and
// net/textproto's reading of the trailer section.
func FuzzChunked(f *testing.F) {
	f.Add([]byte(sampleChunked))
	f.Add([]byte("0\r\n\r\n"))
	f.Add([]byte("5;a=b\r\nhello\r\n0\r\nX: y\r\n\r\nrest"))
	f.Add([]byte("3\r\nab"))
	f.Add([]byte("1\r\n\r\r\n0\r\n\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c Chunked
		n, done, err := c.Scan(data)
		var c2 Chunked
		res := scanAll(&c2, string(data), []int{fuzzCut(data)})
		want := chunkedResult{N: n, Done: done}
		if err != nil {
			want = chunkedResult{Err: kindOf(err)}
			res.N = 0
		}
		if res != want {
			t.Fatalf("split scan %+v, whole %+v", res, want)
		}
		// Decode consumes what Scan does, split anywhere.
		var c3 Chunked
		dd, dn, ddone, derr0 := decodeAll(&c3, string(data), []int{fuzzCut(data)})
		if (derr0 != nil) != (err != nil) || (err == nil && (dn != n || ddone != done)) {
			t.Fatalf("Decode %d %v %v, Scan %d %v %v", dn, ddone, derr0, n, done, err)
		}
		if err != nil || !done {
			if err == nil && n != len(data) {
				t.Fatalf("not done after %d of %d bytes", n, len(data))
			}
			return
		}
		body := data[:n]
		payload, _, derr := decodeChunked(body)
		if derr != nil {
			t.Fatalf("byte at a time: %v", derr)
		}
		br := bufio.NewReader(bytes.NewReader(body))
		got, gerr := io.ReadAll(httputil.NewChunkedReader(br))
		if gerr != nil {
			// net/http bounds the overhead per data byte and the line
			// length; this package bounds each extension instead.
			if strings.Contains(gerr.Error(), "too much non-data") || errors.Is(gerr, bufio.ErrBufferFull) || strings.Contains(gerr.Error(), "too long") {
				return
			}
			// RFC 9112 §7.1.1 allows BWS before the ';' of an extension;
			// net/http does not. The gateway writes its own chunk-size
			// lines, so no upstream ever sees it.
			if strings.Contains(gerr.Error(), "invalid byte in chunk length") && bwsBeforeExtension(body) {
				return
			}
			t.Fatalf("net/http rejects what we accept: %v\n%q", gerr, body)
		}
		if dd != string(payload) {
			t.Fatalf("Decode data %q, byte at a time %q", dd, payload)
		}
		if !bytes.Equal(got, payload) {
			t.Fatalf("data %q, net/http %q", payload, got)
		}
		if _, terr := textproto.NewReader(br).ReadMIMEHeader(); terr != nil {
			t.Fatalf("net/textproto rejects the trailer section: %v\n%q", terr, body)
		}
		if br.Buffered() != 0 {
			t.Fatalf("%d bytes after the trailer section", br.Buffered())
		}
	})
}

// bwsBeforeExtension reports whether a chunk-size line of a chunked body
// has whitespace between the size and the ';' of its extensions.
func bwsBeforeExtension(body []byte) bool {
	for _, line := range bytes.Split(body, []byte("\r\n")) {
		i := 0
		for i < len(line) && unhex[line[i]] != 0xff {
			i++
		}
		if i == 0 {
			continue
		}
		j := i
		for j < len(line) && (line[j] == ' ' || line[j] == '\t') {
			j++
		}
		if j > i && j < len(line) && line[j] == ';' {
			return true
		}
	}
	return false
}
