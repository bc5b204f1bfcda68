package main

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"strings"
	"testing"
	"time"

	"coregate/admin/adminapi"
)

// TestAdminAPIResponseRewrite configures response-rewrite through the
// Admin API (stored in etcd) and sees its effect with a real client and a
// real upstream: a configuration APISIX refuses is refused with its
// message; the status, body and headers of the upstream's answer are
// replaced (the worker frames the new body); filters rewrite a body that
// comes in pieces, and a gzip one, sent plain; vars limit the rewrite to
// the upstream's 500s; the gateway's own 502 page is rewritten too; an
// HTTP/1.0 client gets the new body delimited by the close. The plugin is
// in the plugin list, with its schema.
func TestAdminAPIResponseRewrite(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"v1"`)
		w.Header().Set("X-Up", "1")
		switch r.URL.Path {
		case "/empty":
			w.Header().Set("Content-Length", "0")
			return
		case "/vars":
			if r.URL.Query().Get("fail") != "" {
				w.WriteHeader(500)
			}
		}
		if r.URL.Query().Get("gz") != "" {
			var z bytes.Buffer
			zw := gzip.NewWriter(&z)
			_, _ = zw.Write([]byte("hello world"))
			_ = zw.Close()
			w.Header().Set("Content-Encoding", "gzip")
			_, _ = w.Write(z.Bytes())
			return
		}
		// Two pieces, flushed apart: the upstream's body is chunked.
		_, _ = w.Write([]byte("hello "))
		w.(http.Flusher).Flush()
		_, _ = w.Write([]byte("world"))
	})
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)

	if r := admin.do(t, c, "GET", "plugins/list", ""); r.status != 200 || !strings.Contains(r.body, `"response-rewrite"`) {
		t.Fatalf("plugins/list: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "schema/plugins/response-rewrite", ""); r.status != 200 || !strings.Contains(r.body, `"max_resp_body_size"`) {
		t.Fatalf("schema/plugins/response-rewrite: %d %s", r.status, r.body)
	}
	route := func(uri, conf, node string) string {
		return fmt.Sprintf(`{"uri":%q,"plugins":{"response-rewrite":%s},"upstream":{"nodes":{%q:1}}}`, uri, conf, node)
	}
	for conf, msg := range map[string]string{
		`{"body":"1","body_base64":true}`: `failed to check the configuration of plugin response-rewrite err: invalid base64 content`,
		`{"status_code":599}`:             `failed to check the configuration of plugin response-rewrite err: property \"status_code\" validation failed: expected 599 to be at most 598`,
	} {
		if r := admin.do(t, c, "PUT", "routes/1", route("/hello", conf, up.Addr())); r.status != 400 || !strings.Contains(r.body, msg) {
			t.Fatalf("%s: %d %s", conf, r.status, r.body)
		}
	}
	down := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	for id, body := range map[string]string{
		"1": route("/hello", `{"status_code":201,"body":"new body\n","headers":{"add":["X-Added: $uri"],"set":{"X-Set":"on"},"remove":["X-Up"]}}`, up.Addr()),
		"2": route("/filter", `{"filters":[{"regex":"l","scope":"global","replace":"t"},{"regex":"(\\w+) (\\w+)","replace":"$2 $1"}]}`, up.Addr()),
		"3": route("/vars", `{"vars":[["status","==",500]],"status_code":503,"body":"resting\n"}`, up.Addr()),
		"4": route("/empty", `{"body":"filled","headers":{"X-Old":"form"}}`, up.Addr()),
		"5": route("/down", `{"status_code":200,"body":"fine"}`, down),
	} {
		if r := admin.do(t, c, "PUT", "routes/"+id, body); r.status != 201 {
			t.Fatalf("PUT routes/%s: %d %s", id, r.status, r.body)
		}
	}
	eventually(t, 10*time.Second, func() error {
		for _, path := range []string{"/hello", "/filter", "/vars", "/empty", "/down"} {
			if r := do(t, c, "GET", g.url(path), "", nil, nil); r.status == 404 {
				return fmt.Errorf("GET %s: %d", path, r.status)
			}
		}
		return nil
	})
	for _, tc := range []struct {
		path   string
		status int
		body   string
		hdr    map[string]string
	}{
		{"/hello", 201, "new body\n", map[string]string{"X-Added": "/hello", "X-Set": "on", "X-Up": "", "ETag": ""}},
		{"/filter", 200, "wortd hetto", map[string]string{"X-Up": "1", "ETag": ""}},
		{"/filter?gz=1", 200, "wortd hetto", map[string]string{"Content-Encoding": ""}},
		{"/vars?fail=1", 503, "resting\n", nil},
		{"/vars", 200, "hello world", map[string]string{"ETag": `"v1"`}},
		{"/empty", 200, "filled", map[string]string{"X-Old": "form"}},
		{"/down", 200, "fine", nil},
	} {
		for range 2 { // the second on a reused connection
			r := do(t, c, "GET", g.url(tc.path), "", map[string]string{"Accept-Encoding": "gzip"}, nil)
			if r.status != tc.status || r.body != tc.body {
				t.Fatalf("GET %s: %d %q, want %d %q", tc.path, r.status, r.body, tc.status, tc.body)
			}
			for k, v := range tc.hdr {
				if got := r.header.Get(k); got != v {
					t.Errorf("GET %s: %s %q, want %q", tc.path, k, got, v)
				}
			}
		}
	}
	// An HTTP/1.0 client gets the new body delimited by the close.
	for _, path := range []string{"/hello", "/filter"} {
		conn, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(conn, "GET "+path+" HTTP/1.0\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		conn.Close()
		if want := map[string]string{"/hello": "new body\n", "/filter": "wortd hetto"}[path]; err != nil || string(body) != want ||
			!resp.Close || len(resp.TransferEncoding) != 0 {
			t.Errorf("HTTP/1.0 %s: %q (err %v, close %v, transfer-encoding %q), want %q", path, body, err, resp.Close, resp.TransferEncoding, want)
		}
	}
}

// TestResponseRewriteFraming runs response-rewrite's framing cases through
// the real binary, with a real upstream that answers a 1 KiB text body with
// its Content-Length, and on /coded a gzip body under Transfer-Encoding:
// gzip, chunked. On one raw connection, pipelined: a HEAD through a new
// body and through filters goes without Content-Length (and without
// chunked), each GET after it gets the changed body, and headers alone
// forward the body with its Content-Length. On /coded the gzip bytes come
// back as they went, decoding to the upstream's text, whether the route
// filters the body or replaces it.
func TestResponseRewriteFraming(t *testing.T) {
	text := strings.Repeat("1234567890", 102) + "1234"
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write([]byte(text))
	_ = zw.Close()
	up := newRawUpstream(t, func(c *rawConn) {
		for {
			req, _, err := c.ReadRequest()
			if err != nil {
				return
			}
			if strings.HasPrefix(req.URL.Path, "/coded") {
				gz := z.String()
				_, err = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nContent-Type: text/plain\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n0\r\n\r\n",
					len(gz)/2, gz[:len(gz)/2], len(gz)-len(gz)/2, gz[len(gz)/2:])
			} else {
				_, err = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Type: text/plain\r\nETag: \"v1\"\r\n\r\n%s", len(text), text)
			}
			if err != nil {
				return
			}
		}
	})
	filter := obj{"response-rewrite": obj{"headers": obj{"set": obj{"X-Server-Id": "3"}},
		"filters": []obj{{"regex": "5678", "replace": "abcd", "scope": "global"}}}}
	body := obj{"response-rewrite": obj{"body": "new body"}}
	g := startGateway(t, routesYAML(
		obj{"id": "body", "uri": "/body", "plugins": body, "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "filter", "uri": "/filter", "plugins": filter, "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "headers", "uri": "/headers", "plugins": obj{"response-rewrite": obj{"headers": obj{"set": obj{"X-Server-Id": "3"}}}},
			"upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "coded-filter", "uri": "/coded-filter", "plugins": filter, "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "coded-body", "uri": "/coded-body", "plugins": body, "upstream": upstreamOf(nodes(up.Addr()), nil)},
	), "")
	reqs := []struct {
		method, path, body, length string // length: the Content-Length said, "" for none
	}{
		{"HEAD", "/body", "", ""},
		{"GET", "/body", "new body", ""},
		{"HEAD", "/filter", "", ""},
		{"GET", "/filter", strings.ReplaceAll(text, "5678", "abcd"), ""},
		{"HEAD", "/headers", "", "1024"},
		{"GET", "/headers", text, "1024"},
		{"GET", "/body", "new body", ""},
	}
	heads := make([][2]string, len(reqs))
	for i, r := range reqs {
		heads[i] = [2]string{r.method, r.path}
	}
	answers, _, _ := pipelined(t, g.Addr(), heads)
	for i, r := range reqs {
		resp, got, err := answers[i].resp, answers[i].body, answers[i].err
		if err != nil || resp.StatusCode != 200 || string(got) != r.body || resp.Close {
			t.Fatalf("answer %d (%s %s): %d, %d bytes (err %v, close %v), want 200, %d bytes", i, r.method, r.path, resp.StatusCode, len(got), err, resp.Close, len(r.body))
		}
		chunked := len(resp.TransferEncoding) > 0
		if cl := resp.Header.Get("Content-Length"); cl != r.length || chunked != (r.method == "GET" && r.length == "") {
			t.Errorf("answer %d (%s %s): Content-Length %q, Transfer-Encoding %q, want %q", i, r.method, r.path, cl, resp.TransferEncoding, r.length)
		}
		if r.path != "/body" && resp.Header.Get("X-Server-Id") != "3" {
			t.Errorf("answer %d (%s %s): X-Server-Id %q", i, r.method, r.path, resp.Header.Get("X-Server-Id"))
		}
	}
	// net/http reads no coding but chunked: the coded answers are read
	// by hand.
	for _, path := range []string{"/coded-filter", "/coded-body"} {
		c, err := net.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		raw, err := io.ReadAll(c)
		c.Close()
		head, chunks, _ := strings.Cut(string(raw), "\r\n\r\n")
		if err != nil || !strings.HasPrefix(head, "HTTP/1.1 200 ") || !strings.Contains(head, "\r\nTransfer-Encoding: gzip, chunked\r\n") ||
			strings.Contains(head, "Content-Length") {
			t.Fatalf("GET %s: head %q (err %v)", path, head, err)
		}
		gz, err := io.ReadAll(httputil.NewChunkedReader(strings.NewReader(chunks)))
		if err != nil || string(gz) != z.String() {
			t.Fatalf("GET %s: chunks %q (err %v), want the upstream's gzip bytes", path, chunks, err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(gz))
		if err != nil {
			t.Fatal(err)
		}
		if plain, err := io.ReadAll(zr); err != nil || string(plain) != text {
			t.Fatalf("GET %s: decodes to %d bytes (err %v), want the upstream's text", path, len(plain), err)
		}
	}
}

// TestResponseRewriteStreamed: a filter whose literal is replaced by text
// as long (the bench row's, "5678" → "abcd") rewrites the body as it comes
// through the real binary: a real upstream sends the first part of its
// body, with the literal's first bytes at its end, and waits; the client
// reads that part, rewritten, before the upstream sends the rest, whose
// first bytes complete the literal: the match across the two reads is
// replaced. So with a Content-Length upstream body and a chunked one (the
// literal also split between two chunks of one read), global and once.
// A gzip body (Content-Encoding) in two reads is still decoded whole and
// sent plain; a 204 and a 304 through the filter have no body, and the
// connection goes on.
func TestResponseRewriteStreamed(t *testing.T) {
	t.Parallel()
	part1 := strings.Repeat("1234567890", 40) + "123456" // the literal's "56" ends it
	part2 := "7890" + strings.Repeat("1234567890", 40)
	text := part1 + part2
	var z bytes.Buffer
	zw := gzip.NewWriter(&z)
	_, _ = zw.Write([]byte(text))
	_ = zw.Close()
	gz := z.String()
	release := make(chan struct{}, 1) // the test has read the first part
	wait := func(c *rawConn) bool {
		select {
		case <-release:
			return true
		case <-c.Quit:
		case <-time.After(10 * time.Second):
		}
		return false
	}
	up := newRawUpstream(t, func(c *rawConn) {
		for {
			req, _, err := c.ReadRequest()
			if err != nil {
				return
			}
			switch p := strings.TrimPrefix(req.URL.Path, "/once"); p {
			case "/cl":
				_, err = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nETag: \"v1\"\r\n\r\n%s", len(text), part1)
				if err == nil && wait(c) {
					_, err = io.WriteString(c, part2)
				}
			case "/chunked":
				// "...12345" and "6" in one read, "7890..." in the next.
				a, b := part1[:len(part1)-1], part1[len(part1)-1:]
				_, err = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n%x\r\n%s\r\n%x\r\n%s\r\n", len(a), a, len(b), b)
				if err == nil && wait(c) {
					_, err = fmt.Fprintf(c, "%x\r\n%s\r\n0\r\n\r\n", len(part2), part2)
				}
			case "/gzip":
				_, err = fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nContent-Encoding: gzip\r\n\r\n%s", len(gz), gz[:len(gz)/2])
				if err == nil {
					time.Sleep(50 * time.Millisecond)
					_, err = io.WriteString(c, gz[len(gz)/2:])
				}
			case "/204":
				_, err = io.WriteString(c, "HTTP/1.1 204 No Content\r\nETag: \"v1\"\r\n\r\n")
			case "/304":
				_, err = io.WriteString(c, "HTTP/1.1 304 Not Modified\r\nETag: \"v1\"\r\n\r\n")
			}
			if err != nil {
				return
			}
		}
	})
	filter := func(scope string) obj {
		return obj{"response-rewrite": obj{"filters": []obj{{"regex": "5678", "replace": "abcd", "scope": scope}}}}
	}
	g := startGateway(t, routesYAML(
		obj{"id": "global", "uri": "/*", "plugins": filter("global"), "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "once", "uri": "/once/*", "plugins": filter("once"), "upstream": upstreamOf(nodes(up.Addr()), nil)},
	), "")
	conn, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(conn)
	for _, tc := range []struct{ path, want string }{
		{"/cl", strings.ReplaceAll(text, "5678", "abcd")},
		{"/chunked", strings.ReplaceAll(text, "5678", "abcd")},
		{"/once/cl", strings.Replace(text, "5678", "abcd", 1)},
		{"/once/chunked", strings.Replace(text, "5678", "abcd", 1)},
	} {
		if _, err := io.WriteString(conn, "GET "+tc.path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", tc.path, err)
		}
		if resp.StatusCode != 200 || resp.Header.Get("Content-Length") != "" || resp.Header.Get("ETag") != "" ||
			len(resp.TransferEncoding) != 1 {
			t.Fatalf("GET %s: %d, headers %v, Transfer-Encoding %q", tc.path, resp.StatusCode, resp.Header, resp.TransferEncoding)
		}
		// All of the first part but the literal's first bytes at its
		// end comes before the upstream sends the rest.
		first := make([]byte, len(part1)-2)
		_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.ReadFull(resp.Body, first); err != nil {
			t.Fatalf("GET %s: the first %d bytes of the body before the upstream's last: %v (the body is held)", tc.path, len(first), err)
		}
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		release <- struct{}{}
		rest, err := io.ReadAll(resp.Body)
		if got := string(first) + string(rest); err != nil || got != tc.want {
			t.Fatalf("GET %s: %d bytes (err %v), want %d:\n%q\nwant\n%q", tc.path, len(got), err, len(tc.want), got, tc.want)
		}
	}
	c := newClient(t)
	if r := do(t, c, "GET", g.url("/gzip"), "", map[string]string{"Accept-Encoding": "gzip"}, nil); r.status != 200 ||
		r.body != strings.ReplaceAll(text, "5678", "abcd") || r.header.Get("Content-Encoding") != "" {
		t.Fatalf("GET /gzip: %d, Content-Encoding %q, %q", r.status, r.header.Get("Content-Encoding"), r.body)
	}
	for _, tc := range []struct {
		path   string
		status int
	}{{"/204", 204}, {"/304", 304}, {"/204", 204}} {
		if r := do(t, c, "GET", g.url(tc.path), "", nil, nil); r.status != tc.status || r.body != "" {
			t.Fatalf("GET %s: %d %q, want %d and no body", tc.path, r.status, r.body, tc.status)
		}
	}
}
