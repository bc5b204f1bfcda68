package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestPluginAnswersFraming sends, on one raw connection and in one write,
// requests whose answers plugins make or change, and reads the answers
// back one after the other as a client does: mocking's 204 and
// fault-injection's 304 with a body configured (sent without it), a HEAD
// and a GET through response-rewrite's body, and a GET through its filter
// on a chunked upstream body. Each answer ends where the next begins.
func TestPluginAnswersFraming(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = w.Write([]byte("hello "))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("world"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	routes := map[string]string{
		"1": `{"uri":"/m204","plugins":{"mocking":{"response_status":204,"response_example":"junk","content_type":"text/plain"}}}`,
		"2": `{"uri":"/f304","plugins":{"fault-injection":{"abort":{"http_status":304,"body":"junk"}}}}`,
		"3": fmt.Sprintf(`{"uri":"/rr","plugins":{"response-rewrite":{"body":"new body"}},"upstream":{"nodes":{%q:1}}}`, up.Addr()),
		"4": fmt.Sprintf(`{"uri":"/filter","plugins":{"response-rewrite":{"filters":[{"regex":"o","scope":"global","replace":"00"}]}},"upstream":{"nodes":{%q:1}}}`, up.Addr()),
	}
	for id, body := range routes {
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	eventually(t, 10*time.Second, func() error {
		for _, path := range []string{"/m204", "/f304", "/rr", "/filter"} {
			if r := do(t, c, "GET", g.url(path), "", nil, nil); r.status == 404 {
				return fmt.Errorf("GET %s: %d", path, r.status)
			}
		}
		return nil
	})
	reqs := []struct {
		method, path string
		status       int
		body         string
	}{
		{"GET", "/m204", 204, ""},
		{"GET", "/f304", 304, ""},
		{"HEAD", "/rr", 200, ""},
		{"GET", "/rr", 200, "new body"},
		{"GET", "/m204", 204, ""},
		{"GET", "/filter", 200, "hell00 w00rld"},
		{"HEAD", "/filter", 200, ""},
		{"GET", "/rr", 200, "new body"},
	}
	heads := make([][2]string, len(reqs))
	for i, r := range reqs {
		heads[i] = [2]string{r.method, r.path}
	}
	answers, conn, br := pipelined(t, g.Addr(), heads)
	for i, r := range reqs {
		resp, body, err := answers[i].resp, answers[i].body, answers[i].err
		if err != nil || resp.StatusCode != r.status || string(body) != r.body || resp.Close {
			t.Fatalf("answer %d (%s %s): %d %q (err %v, close %v), want %d %q", i, r.method, r.path, resp.StatusCode, body, err, resp.Close, r.status, r.body)
		}
		if (r.status == 204 || r.status == 304) && (resp.Header.Get("Content-Length") != "" || len(resp.TransferEncoding) != 0) {
			t.Errorf("answer %d (%s %s): framing fields %q", i, r.method, r.path, resp.Header)
		}
	}
	// Nothing more: the junk of a bodyless answer would be left here.
	_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := br.Peek(1); len(n) != 0 {
		rest, _ := br.Peek(br.Buffered())
		t.Fatalf("bytes past the last answer: %q", rest)
	}
}

// pipelinedAnswer is one answer pipelined read: its head, its body read
// whole, and the error of reading the body.
type pipelinedAnswer struct {
	resp *http.Response
	body []byte
	err  error
}

// pipelined sends the requests (method and path, Host x, no body) to addr at
// once on one connection and reads an answer to each, its body whole, as
// net/http frames it; an answer whose head cannot be read fails t. The
// connection (closed at the test's end, a 10 s deadline set) and its
// reader are returned for what may follow the answers.
func pipelined(t *testing.T, addr string, reqs [][2]string) ([]pipelinedAnswer, net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
	var b strings.Builder
	for _, r := range reqs {
		b.WriteString(r[0] + " " + r[1] + " HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	if _, err := io.WriteString(conn, b.String()); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(conn)
	answers := make([]pipelinedAnswer, len(reqs))
	for i, r := range reqs {
		resp, err := http.ReadResponse(br, &http.Request{Method: r[0]})
		if err != nil {
			t.Fatalf("answer %d (%s %s): %v", i, r[0], r[1], err)
		}
		answers[i].resp = resp
		answers[i].body, answers[i].err = io.ReadAll(resp.Body)
	}
	return answers, conn, br
}
