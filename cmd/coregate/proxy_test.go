package main

import (
	"bufio"
	"fmt"
	"io"
	"net/http"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/internal/e2e"
)

// echoUpstream answers "METHOD path body" for every request.
func echoUpstream(t testing.TB) *httpUpstream {
	return newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "%s %s %s", r.Method, r.URL.RequestURI(), b)
	})
}

// TestPipelining: requests sent back to back on one connection, with and
// without bodies, are answered in order.
func TestPipelining(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	reqs := "GET /a HTTP/1.1\r\nHost: x\r\n\r\n" +
		"POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello" +
		"GET /nowhere-matched-by-no-route HTTP/1.1\r\nHost: x\r\n\r\n" +
		"PUT /c HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2;ext=1\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n" +
		"HEAD /d HTTP/1.1\r\nHost: x\r\n\r\n" +
		"GET /e?q=1 HTTP/1.1\r\nHost: x\r\n\r\n"
	if _, err := io.WriteString(c, reqs); err != nil {
		t.Fatal(err)
	}
	br := newReader(c)
	var got []string
	for _, m := range []string{"GET", "POST", "GET", "PUT", "HEAD", "GET"} {
		r := readOne(t, br, m)
		got = append(got, strconv.Itoa(r.status)+" "+r.body)
	}
	want := []string{"200 GET /a ", "200 POST /b hello", "200 GET /nowhere-matched-by-no-route ", "200 PUT /c abcde", "200 ", "200 GET /e?q=1 "}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answers (-want +got):\n%s", diff)
	}
}

// TestPipeliningMany sends a long pipeline in small pieces.
func TestPipeliningMany(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	var b strings.Builder
	const n = 200
	for i := range n {
		fmt.Fprintf(&b, "POST /%d HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%d", i, len(strconv.Itoa(i)), i)
	}
	go func() {
		s := b.String()
		for len(s) > 0 {
			k := min(len(s), 777)
			if _, err := io.WriteString(c, s[:k]); err != nil {
				return
			}
			s = s[k:]
		}
	}()
	for i, r := range readResponses(t, newReader(c), n, "POST") {
		b, _ := io.ReadAll(r.Body)
		if want := fmt.Sprintf("POST /%d %d", i, i); r.StatusCode != 200 || string(b) != want {
			t.Fatalf("answer %d: %d %q, want %q", i, r.StatusCode, b, want)
		}
	}
}

// TestRequestBodies: Content-Length and chunked request bodies reach the
// origin byte for byte, chunked framing kept valid.
func TestRequestBodies(t *testing.T) {
	t.Parallel()
	type seen struct {
		body []byte
		te   []string
		cl   int64
	}
	seenCh := make(chan seen, 4)
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(req *http.Request, body []byte, _ int) (string, bool) {
			seenCh <- seen{body: body, te: req.TransferEncoding, cl: req.ContentLength}
			return okResponse("ok"), true
		})
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	big := strings.Repeat("0123456789abcdef", 40<<10) // 640 KiB
	tests := []struct {
		name, raw, body string
		chunked         bool
	}{
		{"content-length", "POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world", "hello world", false},
		{"content-length large", "POST /cl HTTP/1.1\r\nHost: x\r\nContent-Length: " + strconv.Itoa(len(big)) + "\r\n\r\n" + big, big, false},
		{"chunked", "POST /ch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n1;name=value\r\n \r\nA\r\n0123456789\r\n0\r\nX-Sum: 1\r\n\r\n", "hello 0123456789", true},
		{"chunked empty", "POST /ch HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "", true},
	}
	for _, tc := range tests {
		c := dialGateway(t, g)
		go func() { _, _ = io.WriteString(c, tc.raw) }()
		r := readOne(t, newReader(c), "POST")
		if r.status != 200 {
			t.Fatalf("%s: status %d", tc.name, r.status)
		}
		var s seen
		select {
		case s = <-seenCh:
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: origin saw nothing", tc.name)
		}
		if string(s.body) != tc.body {
			t.Errorf("%s: origin got %d bytes, want %d (equal: %v)", tc.name, len(s.body), len(tc.body), string(s.body) == tc.body)
		}
		if gotChunked := len(s.te) == 1 && s.te[0] == "chunked"; gotChunked != tc.chunked {
			t.Errorf("%s: origin saw Transfer-Encoding %v, Content-Length %d", tc.name, s.te, s.cl)
		}
	}
	// The chunked framing is the gateway's: the data as chunks of its own,
	// no extension, no trailer field.
	got := up.Received()
	if strings.Contains(got, "name=value") || strings.Contains(got, "X-Sum") {
		t.Errorf("chunk extensions or trailer fields forwarded:\n%q", got)
	}
	if !strings.Contains(got, "hello 0123456789\r\n0\r\n\r\n") {
		t.Errorf("chunked body not re-framed by the gateway:\n%q", got)
	}
}

// TestResponseBodies: Content-Length, chunked and close-delimited answers
// reach the client whole. A close-delimited one goes to an HTTP/1.1
// client chunked, its connection kept, and to an HTTP/1.0 client as it
// came, ending with the connection.
func TestResponseBodies(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 300<<10)
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(req *http.Request, _ []byte, _ int) (string, bool) {
			switch req.URL.Path {
			case "/cl":
				return okResponse(big), true
			case "/chunked":
				return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n" +
					"4\r\nabcd\r\n" + strconv.FormatInt(int64(len(big)), 16) + ";x=y\r\n" + big + "\r\n0\r\nX-T: 1\r\n\r\n", true
			case "/close":
				return "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n" + big, false
			case "/close10":
				return "HTTP/1.0 200 OK\r\n\r\n" + big, false
			}
			return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n", true
		})
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	tests := []struct {
		path      string
		proto     string // the client's
		body      string
		chunked   bool
		connClose bool
	}{
		{"/cl", "HTTP/1.1", big, false, false},
		{"/chunked", "HTTP/1.1", "abcd" + big, true, false},
		{"/close", "HTTP/1.1", big, true, false},
		{"/close10", "HTTP/1.1", big, true, false},
		{"/chunked", "HTTP/1.0", "abcd" + big, false, true},
		{"/close", "HTTP/1.0", big, false, true},
	}
	for _, tc := range tests {
		t.Run(tc.path[1:]+"-"+tc.proto[5:], func(t *testing.T) {
			c := dialGateway(t, g)
			_, _ = io.WriteString(c, "GET "+tc.path+" "+tc.proto+"\r\nHost: x\r\n\r\n")
			br := newReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.body {
				t.Errorf("body: %d bytes, want %d", len(b), len(tc.body))
			}
			if got := len(resp.TransferEncoding) > 0; got != tc.chunked {
				t.Errorf("chunked = %v, want %v", got, tc.chunked)
			}
			if resp.Close != tc.connClose {
				t.Errorf("Connection: close = %v, want %v", resp.Close, tc.connClose)
			}
			if tc.connClose {
				expectClosed(t, c, br, 2*time.Second)
				return
			}
			// The connection stays usable.
			_, _ = io.WriteString(c, "GET /cl HTTP/1.1\r\nHost: x\r\n\r\n")
			if r := readOne(t, br, "GET"); r.status != 200 || len(r.body) != len(big) {
				t.Errorf("next request: %d, %d bytes", r.status, len(r.body))
			}
		})
	}
}

// TestNoBodyAnswers: HEAD, 204 and 304 answers carry no body and leave the
// client connection usable.
func TestNoBodyAnswers(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/204":
			w.WriteHeader(204)
		case "/304":
			w.Header().Set("ETag", `"v1"`)
			w.WriteHeader(304)
		default:
			w.Header().Set("Content-Length", "10")
			_, _ = io.WriteString(w, "0123456789")
		}
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	_, _ = io.WriteString(c, "HEAD /h HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /204 HTTP/1.1\r\nHost: x\r\n\r\n"+
		"GET /304 HTTP/1.1\r\nHost: x\r\nIf-None-Match: \"v1\"\r\n\r\n"+
		"GET /after HTTP/1.1\r\nHost: x\r\n\r\n")
	br := newReader(c)
	type ans struct {
		Status int
		Body   string
		CL     string
	}
	var got []ans
	for _, m := range []string{"HEAD", "GET", "GET", "GET"} {
		resp, err := http.ReadResponse(br, &http.Request{Method: m})
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		got = append(got, ans{resp.StatusCode, string(b), resp.Header.Get("Content-Length")})
	}
	want := []ans{{200, "", "10"}, {204, "", ""}, {304, "", ""}, {200, "0123456789", "10"}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	// Nothing stray after the last answer.
	_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if n, _ := br.Read(make([]byte, 1)); n != 0 {
		t.Errorf("stray bytes after the answers")
	}
}

// TestHTTP10AndConnectionClose: HTTP/1.0 clients with and without
// keep-alive, and Connection: close from a 1.1 client.
func TestHTTP10AndConnectionClose(t *testing.T) {
	t.Parallel()
	up := echoUpstream(t)
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	t.Run("1.0 close", func(t *testing.T) {
		c := dialGateway(t, g)
		_, _ = io.WriteString(c, "GET /a HTTP/1.0\r\nHost: x\r\n\r\n")
		br := newReader(c)
		r := readOne(t, br, "GET")
		if r.status != 200 || r.body != "GET /a " {
			t.Fatalf("%d %q", r.status, r.body)
		}
		expectClosed(t, c, br, 2*time.Second)
	})
	t.Run("1.0 no host", func(t *testing.T) {
		c := dialGateway(t, g)
		_, _ = io.WriteString(c, "GET /nohost HTTP/1.0\r\n\r\n")
		br := newReader(c)
		if r := readOne(t, br, "GET"); r.status != 200 || r.body != "GET /nohost " {
			t.Fatalf("%d %q", r.status, r.body)
		}
	})
	t.Run("1.0 keep-alive", func(t *testing.T) {
		c := dialGateway(t, g)
		br := newReader(c)
		for i := range 3 {
			_, _ = fmt.Fprintf(c, "GET /k%d HTTP/1.0\r\nHost: x\r\nConnection: keep-alive\r\n\r\n", i)
			r := readOne(t, br, "GET")
			if r.status != 200 || r.body != fmt.Sprintf("GET /k%d ", i) {
				t.Fatalf("%d: %d %q", i, r.status, r.body)
			}
			if got := r.header.Get("Connection"); !strings.EqualFold(got, "keep-alive") {
				t.Errorf("%d: Connection %q, want keep-alive", i, got)
			}
			if r.header.Get("Content-Length") == "" {
				t.Errorf("%d: no Content-Length in a kept-alive 1.0 answer", i)
			}
		}
	})
	t.Run("1.1 close", func(t *testing.T) {
		c := dialGateway(t, g)
		_, _ = io.WriteString(c, "GET /c HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /never HTTP/1.1\r\nHost: x\r\n\r\n")
		br := newReader(c)
		r := readOne(t, br, "GET")
		if r.status != 200 || r.body != "GET /c " || !r.close {
			t.Fatalf("%d %q %v", r.status, r.body, r.header)
		}
		expectClosed(t, c, br, 2*time.Second)
	})
}

// TestExpectContinue: the client gets 100 Continue before it sends the
// body, then the final answer; the origin never sees Expect.
func TestExpectContinue(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		fmt.Fprintf(w, "expect=%q body=%s", r.Header.Get("Expect"), b)
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	_, _ = io.WriteString(c, "PUT /e HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 4\r\n\r\n")
	br := newReader(c)
	_ = c.SetReadDeadline(time.Now().Add(3 * time.Second))
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q, %v; want 100 Continue", line, err)
	}
	if blank, _ := br.ReadString('\n'); blank != "\r\n" {
		t.Fatalf("100 Continue not followed by an empty line: %q", blank)
	}
	_, _ = io.WriteString(c, "data")
	r := readOne(t, br, "PUT")
	if r.status != 200 || r.body != `expect="" body=data` {
		t.Fatalf("%d %q", r.status, r.body)
	}
}

// TestHopByHopAndForwardedHeaders: hop-by-hop fields go both ways, and so
// do the fields Connection names; X-Forwarded-* and X-Real-IP are set.
func TestHopByHopAndForwardedHeaders(t *testing.T) {
	t.Parallel()
	heads := make(chan string, 1)
	up := newRawUpstream(t, func(c *rawConn) {
		tp := bufio.NewReader(c.BR)
		var head strings.Builder
		for {
			line, err := tp.ReadString('\n')
			if err != nil {
				return
			}
			head.WriteString(line)
			if line == "\r\n" {
				break
			}
		}
		heads <- head.String()
		_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\n"+
			"Connection: X-Secret-Out, keep-alive\r\n"+
			"Keep-Alive: timeout=5\r\n"+
			"Proxy-Connection: keep-alive\r\n"+
			"Upgrade: h2c\r\n"+
			"Trailer: X-Whatever\r\n"+
			"TE: trailers\r\n"+
			"X-Secret-Out: 1\r\n"+
			"X-Kept-Out: yes\r\n"+
			"Server: origin/1.0\r\n"+
			"Content-Length: 2\r\n\r\nok")
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	_, _ = io.WriteString(c, "GET /h HTTP/1.1\r\n"+
		"Host: Front.example:8443\r\n"+
		"Connection: X-Secret-In, keep-alive\r\n"+
		"Keep-Alive: timeout=5\r\n"+
		"Proxy-Connection: keep-alive\r\n"+
		"TE: trailers\r\n"+
		"Trailer: X-Whatever\r\n"+
		"Upgrade: foo/1\r\n"+
		"X-Secret-In: 1\r\n"+
		"X-Kept-In: yes\r\n"+
		"X-Forwarded-For: 203.0.113.7\r\n"+
		"X-Real-IP: 198.51.100.1\r\n"+
		"X-Forwarded-Proto: https\r\n"+
		"X-Forwarded-Port: 1\r\n"+
		"\r\n")
	r := readOne(t, newReader(c), "GET")
	var head string
	select {
	case head = <-heads:
	case <-time.After(5 * time.Second):
		t.Fatal("origin saw no request")
	}
	got := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(head), "\r\n")[1:] {
		k, v, _ := strings.Cut(line, ":")
		k = http.CanonicalHeaderKey(k)
		got[k] = append(got[k], strings.TrimSpace(v))
	}
	want := map[string][]string{
		"Host":              {"Front.example:8443"},
		"X-Kept-In":         {"yes"},
		"X-Forwarded-For":   {"203.0.113.7, 127.0.0.1"},
		"X-Real-Ip":         {"127.0.0.1"},
		"X-Forwarded-Proto": {"http"},
		"X-Forwarded-Host":  {"front.example"},
		"X-Forwarded-Port":  {strconv.Itoa(g.port)},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("request fields at the origin (-want +got):\n%s", diff)
	}
	var names []string
	for k := range r.header {
		names = append(names, k)
	}
	sort.Strings(names)
	if diff := cmp.Diff([]string{"Content-Length", "Date", "Server", "X-Kept-Out"}, names); diff != "" {
		t.Errorf("response fields at the client (-want +got):\n%s", diff)
	}
	if got := r.header.Get("Server"); got != "APISIX/3.18.0" {
		t.Errorf("Server = %q", got)
	}
}

// TestServerHeaderEverywhere: every answer, proxied or the gateway's own,
// names APISIX; enable_server_tokens: false drops the version.
func TestServerHeaderEverywhere(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	routes := routesYAML(
		obj{"id": 1, "uri": "/ok", "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": 2, "uri": "/dead", "upstream": upstreamOf(nodes(deadAddr(t)), nil)},
	)
	for _, tc := range []struct{ tokens, want string }{
		{"true", "APISIX/3.18.0"},
		{"false", "APISIX"},
	} {
		g := startGatewayConfig(t, routes, func(port int) string {
			return fmt.Sprintf("apisix:\n  node_listen: [%d]\n%s  enable_server_tokens: %s\n  enable_control: false\n"+
				"deployment:\n  role: data_plane\n  role_data_plane:\n    config_provider: yaml\n"+
				"plugin_attr:\n  prometheus:\n    enable_export_server: false\n", port, e2e.SSLListen(port), tc.tokens)
		})
		c := newClient(t)
		for _, p := range []string{"/ok", "/nothing", "/dead"} {
			if got := do(t, c, "GET", g.url(p), "", nil, nil).header.Get("Server"); got != tc.want {
				t.Errorf("%s: Server %q, want %q", p, got, tc.want)
			}
		}
		r := rawExchange(t, g.Addr(), "GET / HTTP/1.1\r\nHost: x\r\nBad Header: 1\r\n\r\n", time.Second)
		if !strings.Contains(r, "\r\nServer: "+tc.want+"\r\n") {
			t.Errorf("400 answer without Server %q:\n%s", tc.want, r)
		}
	}
}

// TestPipeliningLargeBodies: pipelined requests whose bodies and answers
// are far larger than the gateway's buffers, read slowly, still come back
// whole and in order.
func TestPipeliningLargeBodies(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		if r.Method == "GET" {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			b = []byte(strings.Repeat(r.URL.Path, n))
		}
		_, _ = w.Write(b)
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	type req struct{ method, path, body string }
	var reqs []req
	for i := range 6 {
		p := fmt.Sprintf("/%d-", i)
		if i%2 == 0 {
			reqs = append(reqs, req{"POST", p, strings.Repeat(p, 400<<10)})
		} else {
			reqs = append(reqs, req{"GET", p + "?n=" + strconv.Itoa(500<<10), ""})
		}
	}
	go func() {
		for _, r := range reqs {
			if _, err := fmt.Fprintf(c, "%s %s HTTP/1.1\r\nHost: x\r\nContent-Length: %d\r\n\r\n%s", r.method, r.path, len(r.body), r.body); err != nil {
				return
			}
		}
	}()
	br := bufio.NewReader(&throttled{r: c, bps: 40 << 20})
	for i, r := range reqs {
		got := readOne(t, br, r.method)
		want := r.body
		if r.method == "GET" {
			want = strings.Repeat(fmt.Sprintf("/%d-", i), 500<<10)
		}
		if got.status != 200 || got.body != want {
			t.Fatalf("answer %d: %d, %d bytes, want %d", i, got.status, len(got.body), len(want))
		}
	}
}

// TestRequestTarget: the origin gets the request-target as the client sent
// it (percent-encoding and query intact, routing on the decoded path), and
// an absolute-form target in origin-form, its authority as Host.
func TestRequestTarget(t *testing.T) {
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", r.RequestURI, r.Host)
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/foo*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	tests := []struct{ target, host, want string }{
		{"/f%6Fo/a%20b?x=%20&y=1", "front", "/f%6Fo/a%20b?x=%20&y=1 front"},
		{"/foo?", "front", "/foo? front"},
		{"http://abs.example:8080/foo/p?q=1", "ignored", "/foo/p?q=1 abs.example:8080"},
		{"http://abs.example", "ignored", "404"},
	}
	for _, tc := range tests {
		c := dialGateway(t, g)
		_, _ = fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\n\r\n", tc.target, tc.host)
		r := readOne(t, newReader(c), "GET")
		got := r.body
		if r.status == 404 {
			got = "404"
		}
		if got != tc.want {
			t.Errorf("%s: origin saw %q (status %d), want %q", tc.target, got, r.status, tc.want)
		}
	}
}
