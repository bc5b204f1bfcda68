package worker

import (
	"bufio"
	"io"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"

	"coregate/worker/router"
)

// rrRoutes are response-rewrite routes over one upstream: a new body,
// filters, a new body under vars that hold only for a 500, headers alone,
// and a new body on mocking's answer.
var rrRoutes = []string{
	`{"id":"r1","uri":"/body","plugins":{"response-rewrite":{"body":"new body"}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	`{"id":"r2","uri":"/filter","plugins":{"response-rewrite":{"filters":[{"regex":"o","scope":"global","replace":"00"}]}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	`{"id":"r3","uri":"/vars","plugins":{"response-rewrite":{"vars":[["status","==",500]],"body":"hidden"}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	`{"id":"r4","uri":"/headers","plugins":{"response-rewrite":{"headers":{"set":{"X-Set":"1"}},"status_code":201}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`,
	`{"id":"r5","uri":"/mock","plugins":{"mocking":{"response_example":"mocked answer","content_type":"text/plain"},"response-rewrite":{"body":"new body"}}}`,
}

// readAnswers reads the answers to the methods, in order, from out as a
// client does, with their bodies; it fails the test on bytes past them.
func readAnswers(t *testing.T, out []byte, methods ...string) []*http.Response {
	t.Helper()
	br := bufio.NewReader(strings.NewReader(string(out)))
	var resps []*http.Response
	for i, m := range methods {
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			t.Fatalf("answer %d (%s): %v in\n%q", i, m, err, out)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("answer %d (%s): body: %v in\n%q", i, m, err, out)
		}
		resp.Body = io.NopCloser(strings.NewReader(string(body)))
		resps = append(resps, resp)
	}
	if rest, _ := io.ReadAll(br); len(rest) > 0 {
		t.Fatalf("bytes past the answers: %q in\n%q", rest, out)
	}
	return resps
}

func bodyOf(r *http.Response) string {
	b, _ := io.ReadAll(r.Body)
	return string(b)
}

// TestResponseRewriteHeadLength: a HEAD through a response-rewrite that
// changes the body (body, filters) goes without the upstream's
// Content-Length, as nginx's sub_filter leaves it, and without chunked:
// the GET's body is another length, framed by the worker. Where the body
// stays (vars that do not hold, headers alone) the upstream's
// Content-Length is kept for the HEAD and, headers alone, for the GET,
// whose body is forwarded as it came. A HEAD of a local answer (mocking's)
// whose body the plugin replaces has no Content-Length either. Each HEAD's
// answer ends at its head: the pipelined GET after it reads right.
func TestResponseRewriteHeadLength(t *testing.T) {
	h := realHarness(t, rrRoutes, nil, nil)
	const up = "HTTP/1.1 200 OK\r\nContent-Length: 11\r\nETag: \"v1\"\r\n\r\n"
	for _, tc := range []struct {
		path     string
		length   string // the HEAD's Content-Length, "" for none
		body     string // the GET's
		getFrame string // the GET's: "chunked", or its Content-Length
	}{
		{"/body", "", "new body", "chunked"},
		{"/filter", "", "hell00 w00rld", "chunked"},
		{"/vars", "11", "hello world", "chunked"},
		{"/headers", "11", "hello world", "11"},
	} {
		h.cl.out = h.cl.out[:0]
		h.cl.in = append(h.cl.in, "HEAD "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\nGET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\n"...)
		h.w.OnTraffic(h.cl)
		h.up.in = append(h.up.in, up...)
		h.w.OnTraffic(h.up)
		h.up.in = append(h.up.in, up+"hello world"...)
		h.w.OnTraffic(h.up)
		r := readAnswers(t, h.cl.out, "HEAD", "GET")
		head, get := r[0], r[1]
		if cl := head.Header.Get("Content-Length"); cl != tc.length || len(head.TransferEncoding) != 0 {
			t.Errorf("HEAD %s: Content-Length %q, Transfer-Encoding %q, want %q and none:\n%q", tc.path, cl, head.TransferEncoding, tc.length, h.cl.out)
		}
		frame := get.Header.Get("Content-Length")
		if len(get.TransferEncoding) > 0 {
			frame = strings.Join(get.TransferEncoding, ",")
		}
		if b := bodyOf(get); b != tc.body || frame != tc.getFrame || h.cl.closed {
			t.Errorf("GET %s: %q framed %q, want %q framed %q:\n%q", tc.path, b, frame, tc.body, tc.getFrame, h.cl.out)
		}
		if tc.path == "/headers" && (head.StatusCode != 201 || get.Header.Get("X-Set") != "1") {
			t.Errorf("GET %s: status %d, X-Set %q: the headers were not rewritten", tc.path, head.StatusCode, get.Header.Get("X-Set"))
		}
	}
	h.cl.out = h.cl.out[:0]
	h.cl.in = append(h.cl.in, "HEAD /mock HTTP/1.1\r\nHost: x\r\n\r\nGET /mock HTTP/1.1\r\nHost: x\r\n\r\n"...)
	h.w.OnTraffic(h.cl)
	r := readAnswers(t, h.cl.out, "HEAD", "GET")
	if cl := r[0].Header.Get("Content-Length"); cl != "" {
		t.Errorf("HEAD /mock: Content-Length %q, the length of mocking's body, not the new one", cl)
	}
	if b := bodyOf(r[1]); b != "new body" || r[1].Header.Get("Content-Length") != "8" {
		t.Errorf("GET /mock: %q, Content-Length %q", b, r[1].Header.Get("Content-Length"))
	}
}

// TestResponseRewriteTransferCoding: an upstream body with a transfer
// coding besides chunked (gzip, chunked) is neither filtered as if it were
// plain text nor replaced by a plain body the client would decode: it
// goes as it came, its Transfer-Encoding and the headers a changed body
// drops (ETag) kept; the worker chunks it again. A plain chunked one is
// filtered.
func TestResponseRewriteTransferCoding(t *testing.T) {
	h := realHarness(t, rrRoutes, nil, nil)
	// Bytes a filter on "o" would change: what matters is that they reach
	// the client unchanged.
	coded := "\x1f\x8b\x08\x00o-o-o\x00\x03"
	for _, tc := range []struct{ path, te, want string }{
		{"/filter", "gzip, chunked", coded},
		{"/body", "gzip, chunked", coded},
		{"/filter", "chunked", "\x1f\x8b\x08\x0000-00-00\x00\x03"},
	} {
		h.cl.out = h.cl.out[:0]
		h.cl.in = append(h.cl.in, "GET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\n"...)
		h.w.OnTraffic(h.cl)
		h.up.in = append(h.up.in, "HTTP/1.1 200 OK\r\nTransfer-Encoding: "+tc.te+"\r\nETag: \"v1\"\r\n\r\n"+
			"5\r\n"+coded[:5]+"\r\n"+"6\r\n"+coded[5:]+"\r\n0\r\n\r\n"...)
		h.w.OnTraffic(h.up)
		// net/http reads no coding but chunked: the head is read here,
		// the chunks with httputil's reader.
		head, chunks, _ := strings.Cut(string(h.cl.out), "\r\n\r\n")
		b, err := io.ReadAll(httputil.NewChunkedReader(strings.NewReader(chunks)))
		if err != nil || string(b) != tc.want || h.cl.closed {
			t.Errorf("GET %s, %s: body %q (%v), want %q:\n%q", tc.path, tc.te, b, err, tc.want, h.cl.out)
		}
		if !strings.HasSuffix(chunks, "0\r\n\r\n") || strings.Count(head, "Transfer-Encoding") != 1 ||
			!strings.Contains(head, "\r\nTransfer-Encoding: "+tc.te+"\r\n") || strings.Contains(head, "ETag") != (tc.te != "chunked") {
			t.Errorf("GET %s, %s: answer\n%q", tc.path, tc.te, h.cl.out)
		}
	}
}

// TestResponseRewriteBodyHeaders: filters remove the fields a changed
// body makes wrong (Content-Length, Content-Encoding, Last-Modified,
// ETag) where the response has them, the upstream's, and a global rule's
// set to an empty value, which ResponseHeader tells from an absent one
// (an empty slice, not nil); a response without them gets none.
func TestResponseRewriteBodyHeaders(t *testing.T) {
	route := `{"id":"r","uri":"/row","plugins":{"response-rewrite":{"filters":[{"regex":"5678","replace":"abcd","scope":"global"}]}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`
	empty := `{"id":"g","plugins":{"response-rewrite":{"headers":{"set":{"ETag":"","Last-Modified":""}}}}}`
	for _, tc := range []struct {
		globals []string
		up      string
	}{
		{nil, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nContent-Encoding: identity\r\nETag: \"v1\"\r\nLast-Modified: Sat, 05 Dec 2026 10:00:00 GMT\r\n\r\n12345678"},
		{nil, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n12345678"},
		{[]string{empty}, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n12345678"},
		{[]string{empty}, "HTTP/1.1 200 OK\r\nContent-Length: 8\r\nETag: \"v1\"\r\n\r\n12345678"},
	} {
		w := New(Config{Listen: []string{"127.0.0.1:0"}})
		snap, err := compile(pluginSpec(t, []string{route}, tc.globals, nil, nil), router.HostURI, upstreamEnv{}, pluginSet{env: w.cfg.Plugins}, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		h := newHarnessSnap(t, w, snap)
		_, out := h.roundTrip([]byte("GET /row HTTP/1.1\r\nHost: x\r\n\r\n"), []byte(tc.up))
		r := readAnswers(t, out, "GET")[0]
		if b := bodyOf(r); b != "1234abcd" || len(r.TransferEncoding) != 1 {
			t.Errorf("globals %q, upstream %q: body %q, Transfer-Encoding %q:\n%q", tc.globals, tc.up, b, r.TransferEncoding, out)
		}
		for _, name := range []string{"Content-Length", "Content-Encoding", "ETag", "Last-Modified"} {
			if v, ok := r.Header[name]; ok {
				t.Errorf("globals %q, upstream %q: %s %q kept:\n%q", tc.globals, tc.up, name, v, out)
			}
		}
	}
}
