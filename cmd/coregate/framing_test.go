package main

import (
	"bufio"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/internal/framingcheck"
)

// The proxy owns message framing: what goes upstream is written from what
// the gateway parsed. These tests send requests, hostile and mutated ones
// included, through the real binary to an origin that reads every byte it
// gets with a strict parser.

// strictUpstream is an origin that reads what it gets with
// framingcheck.Read, records each message and answers 200 with the
// request-target as the body. Anything it cannot parse as a whole message
// is recorded as a fault.
type strictUpstream struct {
	l      net.Listener
	mu     sync.Mutex
	msgs   []framingcheck.Msg
	faults []string
	wg     sync.WaitGroup
	conns  map[net.Conn]struct{}
}

func newStrictUpstream(t testing.TB) *strictUpstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &strictUpstream{l: l, conns: map[net.Conn]struct{}{}}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u.mu.Lock()
			u.conns[c] = struct{}{}
			u.mu.Unlock()
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				u.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		u.mu.Lock()
		for c := range u.conns {
			_ = c.Close()
		}
		u.mu.Unlock()
		u.wg.Wait()
	})
	return u
}

func (u *strictUpstream) Addr() string { return u.l.Addr().String() }

func (u *strictUpstream) fault(format string, args ...any) {
	u.mu.Lock()
	u.faults = append(u.faults, fmt.Sprintf(format, args...))
	u.mu.Unlock()
}

// serve reads messages from c until it closes. Bytes left over when the
// connection ends that do not make a whole message are a fault: a request
// the gateway forwarded in part.
func (u *strictUpstream) serve(c net.Conn) {
	var buf []byte
	tmp := make([]byte, 64<<10)
	for {
		// Take every whole message in buf.
		for len(buf) > 0 {
			m, n, err := framingcheck.Read(buf)
			if err != nil {
				u.fault("%v", err)
				return
			}
			if n == 0 {
				break
			}
			buf = buf[n:]
			u.mu.Lock()
			u.msgs = append(u.msgs, m)
			u.mu.Unlock()
			if _, err := io.WriteString(c, framingcheck.Answer(m)); err != nil {
				return
			}
		}
		k, err := c.Read(tmp)
		buf = append(buf, tmp[:k]...)
		if err != nil {
			if len(buf) > 0 {
				u.fault("origin: connection ended with %d bytes of an unfinished message: %q", len(buf), buf)
			}
			return
		}
	}
}

// take returns the messages and faults recorded so far and forgets them.
func (u *strictUpstream) take() ([]framingcheck.Msg, []string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	m, f := u.msgs, u.faults
	u.msgs, u.faults = nil, nil
	return m, f
}

// framingGateway starts the gateway with one catch-all route to u.
func framingGateway(t testing.TB, u *strictUpstream) *gateway {
	return startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(u.Addr()), nil)}), "")
}

// dialer opens a new connection to a gateway's listener, failing the test
// when it cannot.
type dialer func(t testing.TB) net.Conn

// plainDialer dials g's plain listener.
func plainDialer(g *gateway) dialer {
	return func(t testing.TB) net.Conn {
		t.Helper()
		c, err := net.DialTimeout("tcp", g.Addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
}

// exchangeN sends raw on a new connection to g's plain listener and reads
// n responses (exchangeOn).
func exchangeN(t testing.TB, g *gateway, raw string, n int) []result {
	t.Helper()
	return exchangeOn(t, plainDialer(g), raw, n)
}

// exchangeOn sends raw on a new connection dial makes and reads n
// responses, failing the test when one does not come.
func exchangeOn(t testing.TB, dial dialer, raw string, n int) []result {
	t.Helper()
	c := dial(t)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	var out []result
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d of %d: %v", i+1, n, err)
		}
		b, _ := io.ReadAll(resp.Body)
		out = append(out, result{status: resp.StatusCode, header: resp.Header, body: string(b), close: resp.Close})
	}
	return out
}

// TestFramingOwned: the attacks of a request-smuggling desync, each a
// request followed on the same connection by an ordinary one. The origin
// must read exactly the messages the gateway accepted, framed by the
// gateway.
func TestFramingOwned(t *testing.T) {
	t.Parallel()
	u := newStrictUpstream(t)
	g := framingGateway(t, u)
	next := "GET /next HTTP/1.1\r\nHost: x\r\n\r\n"
	tests := []struct {
		name string
		raw  string
		body string
		cl   string // the one Content-Length the origin must see, or ""
		te   bool   // whether it must see Transfer-Encoding: chunked
	}{
		{"connection names content-length",
			"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: Content-Length\r\n\r\nhello", "hello", "5", false},
		{"connection names transfer-encoding",
			"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: transfer-encoding\r\n\r\n5\r\nhello\r\n0\r\n\r\n", "hello", "", true},
		{"connection names host",
			"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nConnection: host, keep-alive\r\n\r\nhello", "hello", "5", false},
		{"content-length list",
			"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 5\r\n\r\nhello", "hello", "5", false},
		{"content-length repeated",
			"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", "hello", "5", false},
		{"content-length leading zeros",
			"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 005\r\n\r\nhello", "hello", "5", false},
		{"chunk extensions and trailer",
			"POST /a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2;a=b\r\nhe\r\n3 ;q=\"x\\\"y\"\r\nllo\r\n0;end\r\nX-T: 1\r\n\r\n", "hello", "", true},
		{"zero content-length",
			"POST /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n", "", "0", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rs := exchangeN(t, g, tc.raw+next, 2)
			if rs[0].status != 200 || rs[0].body != "/a" || rs[1].status != 200 || rs[1].body != "/next" {
				t.Fatalf("answers %d %q, %d %q", rs[0].status, rs[0].body, rs[1].status, rs[1].body)
			}
			msgs, faults := u.take()
			if len(faults) > 0 {
				t.Fatalf("origin faults: %q", faults)
			}
			if len(msgs) != 2 || msgs[0].Target != "/a" || msgs[1].Target != "/next" {
				t.Fatalf("origin read %d messages: %+v", len(msgs), msgs)
			}
			m := msgs[0]
			if m.Body != tc.body {
				t.Errorf("origin body %q, want %q", m.Body, tc.body)
			}
			wantCL := []string(nil)
			if tc.cl != "" {
				wantCL = []string{tc.cl}
			}
			if fmt.Sprint(m.CLs) != fmt.Sprint(wantCL) {
				t.Errorf("origin Content-Length fields %q, want %q", m.CLs, wantCL)
			}
			if te := len(m.TEs) == 1 && m.TEs[0] == "chunked"; te != tc.te || len(m.TEs) > 1 {
				t.Errorf("origin Transfer-Encoding fields %q", m.TEs)
			}
			if strings.Contains(m.Raw, ";a=b") || strings.Contains(m.Raw, "X-T") || strings.Contains(m.Raw, "end") {
				t.Errorf("chunk extension or trailer forwarded: %q", m.Raw)
			}
			if !strings.Contains(m.Raw, "\r\nHost: ") {
				t.Errorf("no Host line upstream: %q", m.Raw)
			}
		})
	}
}

// TestFramingRefused: malformed framing gets 400 and a closed connection,
// and not one byte of it reaches the origin.
func TestFramingRefused(t *testing.T) {
	t.Parallel()
	u := newStrictUpstream(t)
	g := framingGateway(t, u)
	chunked := "POST /bad HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
	tests := []struct{ name, raw string }{
		{"empty extension", chunked + "5;\r\nhello\r\n0\r\n\r\n"},
		{"unterminated quoted extension", chunked + "5;a=\"b\r\nhello\r\n0\r\n\r\n"},
		{"byte outside the extension grammar", chunked + "5;a=b@c\r\nhello\r\n0\r\n\r\n"},
		{"space after extension", chunked + "5;a \r\nhello\r\n0\r\n\r\n"},
		{"bad chunk size", chunked + "5x\r\nhello\r\n0\r\n\r\n"},
		{"chunk too long", chunked + "3\r\nhello\r\n0\r\n\r\n"},
		{"fault after many chunks", chunked + strings.Repeat("1\r\na\r\n", 200) + "1;=\r\na\r\n0\r\n\r\n"},
		{"conflicting content-length", "POST /bad HTTP/1.1\r\nHost: x\r\nContent-Length: 5, 6\r\n\r\nhello"},
		{"content-length and chunked", "POST /bad HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"},
		{"obs-fold", "GET /bad HTTP/1.1\r\nHost: x\r\nX: a\r\n b\r\n\r\n"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			out := rawExchange(t, g.Addr(), tc.raw, 2*time.Second)
			resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(out)), nil)
			if err != nil || resp.StatusCode != 400 || !resp.Close {
				t.Fatalf("answer %q (%v), want 400 and close", out, err)
			}
			// The closed connection is the proof rawExchange waited for;
			// one more exchange flushes anything in flight to the origin.
			if rs := exchangeN(t, g, "GET /after HTTP/1.1\r\nHost: x\r\n\r\n", 1); rs[0].status != 200 {
				t.Fatalf("next request: %d", rs[0].status)
			}
			msgs, faults := u.take()
			if len(faults) > 0 {
				t.Fatalf("origin faults: %q", faults)
			}
			for _, m := range msgs {
				if m.Target != "/after" {
					t.Errorf("origin read %q", m.Raw)
				}
			}
		})
	}
}

// TestHTTP10Upstream: an HTTP/1.0 request goes upstream as HTTP/1.1 on the
// pool's kept-alive connection; a chunked answer reaches the HTTP/1.0
// client decoded, delimited by the close.
func TestHTTP10Upstream(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lines []string
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(req *http.Request, _ []byte, _ int) (string, bool) {
			mu.Lock()
			lines = append(lines, req.Proto+" "+req.Header.Get("Connection"))
			mu.Unlock()
			if req.URL.Path == "/chunked" {
				return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3;x=y\r\nabc\r\n2\r\nde\r\n0\r\nT: 1\r\n\r\n", true
			}
			return okResponse("plain"), true
		})
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	out := rawExchange(t, g.Addr(), "GET /chunked HTTP/1.0\r\nHost: x\r\n\r\n", 2*time.Second)
	if !strings.HasSuffix(out, "\r\n\r\nabcde") || strings.Contains(strings.ToLower(out), "transfer-encoding") {
		t.Errorf("HTTP/1.0 client got %q, want the decoded body and no Transfer-Encoding", out)
	}
	out = rawExchange(t, g.Addr(), "GET /plain HTTP/1.0\r\nConnection: keep-alive\r\n\r\nGET /plain HTTP/1.0\r\n\r\n", 2*time.Second)
	if n := strings.Count(out, "\r\n\r\nplain"); n != 2 || !strings.Contains(out, "Connection: keep-alive") {
		t.Errorf("two HTTP/1.0 requests, the first kept alive: %q", out)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(lines) != 3 {
		t.Fatalf("origin saw %q", lines)
	}
	for _, l := range lines {
		if l != "HTTP/1.1 " {
			t.Errorf("origin saw %q, want HTTP/1.1 without a Connection field", l)
		}
	}
	if n := up.Accepted.Load(); n != 1 {
		t.Errorf("origin accepted %d connections, want 1 kept alive", n)
	}
}

// TestCodingToHTTP10Binary: an upstream answering "Transfer-Encoding:
// gzip, chunked" through the binary, on a route without plugins, one
// whose response-rewrite filters the body and one whose response-rewrite
// sets a header. HTTP/1.0 has no Transfer-Encoding: an HTTP/1.0 client
// would get the gzip bytes de-chunked with nothing saying they are coded,
// so it gets 502 and the error log says why, as nginx 1.23 and later
// answer a coding other than chunked alone (1.22 drops the coding and
// sends the bytes). An HTTP/1.1 client gets the coded body with its
// codings.
func TestCodingToHTTP10Binary(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(*http.Request, []byte, int) (string, bool) {
			return "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n2\r\nxy\r\n0\r\n\r\n", true
		})
	})
	rr := func(conf obj) obj { return obj{"response-rewrite": conf} }
	g := startGateway(t, routesYAML(
		obj{"id": "plain", "uri": "/plain", "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": "filter", "uri": "/filter", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": rr(obj{"filters": []obj{{"regex": "x", "replace": "z"}}})},
		obj{"id": "headers", "uri": "/headers", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": rr(obj{"headers": obj{"set": obj{"X-A": "1"}}})},
	), "")
	for _, path := range []string{"/plain", "/filter", "/headers"} {
		out := rawExchange(t, g.Addr(), "GET "+path+" HTTP/1.0\r\n\r\n", 5*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 502 ") || strings.Contains(out, "xy") {
			t.Errorf("HTTP/1.0 GET %s: %q, want 502 without the coded body", path, out)
		}
		out = rawExchange(t, g.Addr(), "GET "+path+" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n", 5*time.Second)
		if !strings.HasPrefix(out, "HTTP/1.1 200 ") || !strings.Contains(out, "\r\nTransfer-Encoding: gzip, chunked\r\n") ||
			!strings.HasSuffix(out, "\r\n\r\n2\r\nxy\r\n0\r\n\r\n") {
			t.Errorf("HTTP/1.1 GET %s: %q, want the coded body with its codings", path, out)
		}
	}
	g.WaitLog(`upstream sent unknown .+Transfer-Encoding.+ to an HTTP/1.0 request`, 3, 5*time.Second)
}

// TestResponseFramingOwned: a response whose Connection header names its
// framing fields still reaches the client framed, and the client
// connection carries the next exchange.
func TestResponseFramingOwned(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		c.ServeKeepAlive(func(req *http.Request, _ []byte, _ int) (string, bool) {
			switch req.URL.Path {
			case "/cl":
				return "HTTP/1.1 200 OK\r\nConnection: Content-Length\r\nContent-Length: 5, 5\r\n\r\nhello", true
			case "/te":
				return "HTTP/1.1 200 OK\r\nConnection: Transfer-Encoding\r\nTransfer-Encoding: chunked\r\n\r\n5;e=1\r\nhello\r\n0\r\nT: 1\r\n\r\n", true
			}
			return okResponse("next"), true
		})
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	for _, path := range []string{"/cl", "/te"} {
		out := rawExchange(t, g.Addr(), "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\nGET /n HTTP/1.1\r\nHost: x\r\n\r\n", time.Second)
		br := bufio.NewReader(strings.NewReader(out))
		rs := make([]string, 0, 2)
		for i := 0; i < 2; i++ {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("%s: response %d: %v in %q", path, i, err, out)
			}
			b, _ := io.ReadAll(resp.Body)
			rs = append(rs, string(b))
		}
		if rs[0] != "hello" || rs[1] != "next" || br.Buffered() != 0 {
			t.Errorf("%s: %q", path, out)
		}
		if strings.Contains(out, "e=1") || strings.Contains(out, "T: 1") || strings.Contains(out, "5, 5") {
			t.Errorf("%s: upstream framing copied: %q", path, out)
		}
	}
}

// The differential test: generated and mutated requests, each on its own
// connection and written at once. The test parses each with httpparse, as
// the gateway does (framingcheck.Expect); the origin reads what the
// gateway forwards with a strict parser. Every request the gateway answers
// 200 must reach the origin as exactly one message with the method,
// target, framing and body that the parse gave; a request it refuses must
// not reach it at all; and nothing else may reach it. The worker's
// FuzzFraming runs the same check in memory on the fuzzer's inputs.

// framingRun sends one input on a connection dial makes and checks the
// origin. It returns false when the input is not one whole message and
// was not sent.
func framingRun(t testing.TB, dial dialer, u *strictUpstream, raw string) bool {
	t.Helper()
	e, ok := framingcheck.Expect(raw)
	if !ok {
		return false
	}
	c := dial(t)
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, e.Raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer (%v) to %q", err, e.Raw)
	}
	body, _ := io.ReadAll(resp.Body)
	status := resp.StatusCode
	// Anything the gateway wrote upstream for this request has been read by
	// the origin once a later request's answer comes back through it.
	if status != 200 {
		if rs := exchangeOn(t, dial, "GET /sync HTTP/1.1\r\nHost: x\r\n\r\n", 1); rs[0].status != 200 {
			t.Fatalf("sync request: %d", rs[0].status)
		}
	}
	msgs, faults := u.take()
	if len(faults) > 0 {
		t.Fatalf("origin faults after %q: %q", e.Raw, faults)
	}
	if status != 200 {
		msgs = slices.DeleteFunc(msgs, func(m framingcheck.Msg) bool { return m.Target == "/sync" })
	}
	if v := framingcheck.Verdict(e, status, string(body), msgs); v != "" {
		t.Fatal(v)
	}
	return true
}

// framingCorpus returns the requests of the worker's FuzzFraming corpus,
// what the coverage-guided fuzzer found worth keeping, to send through the
// binary too. Each file is in the "go test fuzz v1" format: the request as
// a Go string literal, then the cut, which the binary's test leaves out
// (a request goes in one write).
func framingCorpus(t *testing.T) []string {
	t.Helper()
	files, err := filepath.Glob("../../worker/testdata/fuzz/FuzzFraming/*")
	if err != nil || len(files) == 0 {
		t.Fatalf("no FuzzFraming corpus (%v)", err)
	}
	var out []string
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(b), "\n")
		lit, ok := strings.CutPrefix(lines[0]+"\n"+lines[min(1, len(lines)-1)], "go test fuzz v1\nstring(")
		if !ok || !strings.HasSuffix(lit, ")") {
			t.Fatalf("%s: not a FuzzFraming corpus entry: %q", f, b)
		}
		s, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		out = append(out, s)
	}
	return out
}

// TestFramingDifferential runs the seeds, the worker's FuzzFraming corpus
// and a bounded set of generated and mutated requests through the real
// binary.
func TestFramingDifferential(t *testing.T) {
	t.Parallel()
	u := newStrictUpstream(t)
	g := framingGateway(t, u)
	framingDifferential(t, u, 2000, plainDialer(g))
}

// framingDifferential sends the seeds, the corpus and n generated inputs,
// each on a connection dial makes to a gateway whose one route goes to u.
func framingDifferential(t *testing.T, u *strictUpstream, n int, dial dialer) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	seed := rng.Uint64()
	rng = rand.New(rand.NewPCG(2, seed))
	t.Logf("seed %d", seed)
	sent, refused := 0, 0
	for _, s := range framingcheck.Seeds {
		if framingRun(t, dial, u, s) {
			sent++
		}
	}
	corpus := 0
	for _, s := range framingCorpus(t) {
		if framingRun(t, dial, u, s) {
			sent++
			corpus++
		}
	}
	t.Logf("%d inputs of the worker's FuzzFraming corpus sent", corpus)
	for i := 0; i < n; i++ {
		raw := framingcheck.Input(rng, i)
		if e, ok := framingcheck.Expect(raw); ok && e.Refused != 0 {
			refused++
		}
		if framingRun(t, dial, u, raw) {
			sent++
		}
	}
	t.Logf("%d requests sent, %d of them refused by the parser", sent, refused)
	if sent < n*7/10 || refused < n/10 {
		t.Errorf("the generator made too few whole requests (%d) or refusals (%d)", sent, refused)
	}
}
