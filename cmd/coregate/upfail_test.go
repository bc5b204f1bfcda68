package main

import (
	"fmt"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// The faulty-upstream tests watch the one worker process of the gateway:
// its open file descriptors (/proc/<pid>/fd) and its goroutines, read from
// the worker's own goroutine profile (COREGATE_PPROF). A worker's OS thread
// count is no measure of leaks (the Go runtime keeps the threads it made),
// so it is not compared.

// probedGateway is a gateway with one worker process whose resources the
// test reads.
type probedGateway struct {
	*gateway
	pid   int    // the worker process
	pprof string // host:port of the worker's net/http/pprof
}

// startProbedGateway starts the gateway as startGateway does, with the
// worker's pprof endpoint on a free port, and finds the worker process.
func startProbedGateway(t *testing.T, apisixYAML, extra string) *probedGateway {
	t.Helper()
	pprof := "127.0.0.1:" + strconv.Itoa(freePort(t))
	g := bindGateway(e2e.Start(t, e2e.Options{Bin: binPath, APISIX: apisixYAML,
		Config: func(port int) string { return baseConfig(port, extra) },
		Env:    []string{"COREGATE_PPROF=" + pprof}, Ready: 1}))
	ws := waitWorkers(t, g.cmd.Process.Pid, 1, 10*time.Second)
	pg := &probedGateway{gateway: g, pid: ws[0].pid, pprof: pprof}
	eventually(t, 10*time.Second, func() error {
		_, err := pg.goroutines()
		return err
	})
	return pg
}

// goroutines counts the worker's goroutines from its goroutine profile,
// but for the idle workers of gnet's goroutine pool (it dials upstreams on
// them): the pool keeps an idle one up to 20 s, which is no leak.
func (g *probedGateway) goroutines() (int, error) {
	resp, err := oneShotClient().Get("http://" + g.pprof + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if !strings.HasPrefix(string(b), "goroutine profile: total ") {
		return 0, fmt.Errorf("not a goroutine profile: %q", cut(string(b)))
	}
	// Records are "N @ pc...", then one "#\tpc func file:line" line per
	// frame, then an empty line.
	_, recs, _ := strings.Cut(string(b), "\n")
	total := 0
	for _, rec := range strings.Split(recs, "\n\n") {
		if strings.TrimSpace(rec) == "" {
			continue
		}
		lines := strings.Split(strings.TrimSpace(rec), "\n")
		n, err := strconv.Atoi(strings.Fields(lines[0])[0])
		if err != nil {
			return 0, fmt.Errorf("goroutine record %q: %v", rec, err)
		}
		if len(lines) == 2 && strings.Contains(lines[1], "ants/v2.(*goWorker).run") {
			continue // idle in the pool
		}
		total += n
	}
	return total, nil
}

// usage is what the worker holds at one moment.
type usage struct{ fds, goroutines int }

// settled waits until two readings a little apart agree and returns them.
// It has the worker collect its garbage first: file descriptors that only
// a finalizer closes (objects made once at start) must not leave the count
// in the middle of the test.
func (g *probedGateway) settled(t *testing.T) usage {
	t.Helper()
	resp, err := oneShotClient().Get("http://" + g.pprof + "/debug/pprof/heap?gc=1")
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	var last usage
	var u usage
	eventually(t, 10*time.Second, func() error {
		var err error
		if u.fds, err = e2e.FDs(g.pid); err != nil {
			return err
		}
		if u.goroutines, err = g.goroutines(); err != nil {
			return err
		}
		if u != last {
			last = u
			return fmt.Errorf("worker usage still moving: %+v", u)
		}
		return nil
	})
	return u
}

// backTo waits until the worker holds what it held in base.
func (g *probedGateway) backTo(t *testing.T, base usage) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		fds, err := e2e.FDs(g.pid)
		if err != nil {
			return err
		}
		gs, err := g.goroutines()
		if err != nil {
			return err
		}
		if fds != base.fds || gs != base.goroutines {
			return fmt.Errorf("worker holds %d fds (%s) and %d goroutines, %d and %d before", fds, e2e.FDList(g.pid), gs, base.fds, base.goroutines)
		}
		return nil
	})
}

// How a faulty exchange must end for the client.
const (
	outAnswered  = iota // the gateway's own 502/504 page; the connection stays
	outTruncated        // the upstream's head, a short body, the connection closed
	outWhole            // the upstream's whole answer
)

// faultCase is one faulty upstream: fault runs on the request for
// /<name>/fault, every other request gets "ok <conn>/<request>".
type faultCase struct {
	name string
	// fault answers the faulty request on c; true keeps serving c.
	fault   func(c *rawConn) bool
	outcome int
	status  int     // outAnswered: 502 or 504
	body    string  // outWhole: the body
	cause   string  // in the error log line (regexp); "" when nothing is logged
	slow    bool    // takes the read timeout or longer
	read    float64 // timeout.read, 1 s when 0
	reuse   bool    // the faulty connection may serve later requests
}

func write(c *rawConn, parts ...string) {
	for i, p := range parts {
		if i > 0 {
			time.Sleep(150 * time.Millisecond)
		}
		if _, err := io.WriteString(c, p); err != nil {
			return
		}
	}
}

// hang holds the connection until the gateway closes it or the test ends.
func hang(c *rawConn) {
	go func() {
		<-c.Quit
		_ = c.Close()
	}()
	_, _ = io.Copy(io.Discard, c.BR)
}

// trickle writes s one byte at a time, gap apart.
func trickle(c *rawConn, s string, gap time.Duration) {
	for i := range len(s) {
		time.Sleep(gap)
		if _, err := c.Write([]byte{s[i]}); err != nil {
			return
		}
	}
}

const headCL100 = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n"
const headChunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"

var faultCases = []faultCase{
	{name: "rst-before-head", outcome: outAnswered, status: 502, cause: "reset by peer",
		fault: func(c *rawConn) bool { resetConn(c.Conn); return false }},
	{name: "rst-in-head", outcome: outAnswered, status: 502, cause: "reset by peer",
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 200 OK\r\nContent-Le", "")
			resetConn(c.Conn)
			return false
		}},
	{name: "rst-mid-body", outcome: outTruncated, cause: "reset by peer",
		fault: func(c *rawConn) bool {
			write(c, headCL100+"0123456789", "")
			resetConn(c.Conn)
			return false
		}},
	{name: "close-before-head", outcome: outAnswered, status: 502, cause: "prematurely closed",
		fault: func(c *rawConn) bool { return false }},
	{name: "close-after-head", outcome: outTruncated, cause: "prematurely closed",
		fault: func(c *rawConn) bool { write(c, headCL100); return false }},
	{name: "close-after-chunked-head", outcome: outTruncated, cause: "prematurely closed",
		fault: func(c *rawConn) bool { write(c, headChunked); return false }},
	{name: "close-in-chunk", outcome: outTruncated, cause: "prematurely closed",
		fault: func(c *rawConn) bool { write(c, headChunked+"10\r\n0123"); return false }},
	{name: "close-between-chunks", outcome: outTruncated, cause: "prematurely closed",
		fault: func(c *rawConn) bool { write(c, headChunked+"5\r\nhello\r\n"); return false }},
	{name: "close-in-trailer", outcome: outTruncated, cause: "prematurely closed",
		fault: func(c *rawConn) bool { write(c, headChunked+"5\r\nhello\r\n0\r\nX-T: 1\r\n"); return false }},
	{name: "garbage-status", outcome: outAnswered, status: 502, cause: "invalid header",
		fault: func(c *rawConn) bool { write(c, "HTTP/1.1 2OO OK\r\nContent-Length: 0\r\n\r\n"); hang(c); return false }},
	{name: "not-http", outcome: outAnswered, status: 502, cause: "invalid header",
		fault: func(c *rawConn) bool { write(c, "SSH-2.0-OpenSSH_9.6\r\n"); hang(c); return false }},
	{name: "short-binary", outcome: outAnswered, status: 502, cause: "invalid header",
		fault: func(c *rawConn) bool { write(c, "\x16\x03\x01\x02"); hang(c); return false }},
	{name: "http2-status", outcome: outAnswered, status: 502, cause: "invalid header",
		fault: func(c *rawConn) bool { write(c, "HTTP/2 200\r\ncontent-length: 0\r\n\r\n"); hang(c); return false }},
	{name: "oversized-head", outcome: outAnswered, status: 502, cause: "too big header",
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 40<<10)+"\r\nContent-Length: 0\r\n\r\n")
			hang(c)
			return false
		}},
	{name: "oversized-head-unended", outcome: outAnswered, status: 502, cause: "too big header",
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 200 OK\r\nX-Big: "+strings.Repeat("a", 40<<10))
			hang(c)
			return false
		}},
	{name: "too-many-fields", outcome: outAnswered, status: 502, cause: "too big header",
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 200 OK\r\n"+strings.Repeat("X-A: 1\r\n", 200)+"Content-Length: 0\r\n\r\n")
			hang(c)
			return false
		}},
	{name: "cl-shorter", outcome: outWhole, body: "ok", cause: "more data than specified",
		fault: func(c *rawConn) bool { write(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nokEXTRA"); return true }},
	// Bytes on an idle connection close it, silently as in nginx.
	{name: "cl-shorter-later", outcome: outWhole, body: "ok",
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok", "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nWRONG")
			return true
		}},
	{name: "cl-longer-close", outcome: outTruncated, cause: "prematurely closed",
		fault: func(c *rawConn) bool { write(c, headCL100+strings.Repeat("x", 50)); return false }},
	{name: "cl-longer-hang", outcome: outTruncated, cause: "timed out", slow: true,
		fault: func(c *rawConn) bool { write(c, headCL100+strings.Repeat("x", 50)); hang(c); return false }},
	{name: "chunk-size-lie", outcome: outTruncated, cause: "timed out", slow: true,
		fault: func(c *rawConn) bool { write(c, headChunked+"a\r\nhello\r\n0\r\n\r\n"); hang(c); return false }},
	{name: "chunk-size-overflow", outcome: outTruncated, cause: "invalid chunked",
		fault: func(c *rawConn) bool {
			write(c, headChunked+"fffffffffffffffffffff\r\nhello\r\n")
			hang(c)
			return false
		}},
	{name: "chunk-data-overrun", outcome: outTruncated, cause: "invalid chunked",
		fault: func(c *rawConn) bool { write(c, headChunked+"5\r\nhelloXX\r\n0\r\n\r\n"); hang(c); return false }},
	{name: "chunk-negative", outcome: outTruncated, cause: "invalid chunked",
		fault: func(c *rawConn) bool { write(c, headChunked+"-5\r\nhello\r\n0\r\n\r\n"); hang(c); return false }},
	{name: "chunk-bare-lf", outcome: outTruncated, cause: "invalid chunked",
		fault: func(c *rawConn) bool { write(c, headChunked+"5\r\nhello\n0\n\n"); hang(c); return false }},
	{name: "never-answers", outcome: outAnswered, status: 504, cause: "timed out", slow: true,
		fault: func(c *rawConn) bool { hang(c); return false }},
	{name: "trickle-head", reuse: true, outcome: outWhole, body: "ok", slow: true, read: 2,
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 200 OK\r\nContent-Length: 2")
			trickle(c, "\r\n\r\nok", time.Second)
			return true
		}},
	{name: "trickle-body", reuse: true, outcome: outWhole, body: "abcd", slow: true, read: 2,
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\n")
			trickle(c, "abcd", time.Second)
			return true
		}},
	{name: "interim", reuse: true, outcome: outWhole, body: "ok",
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 100 Continue\r\n\r\n", "HTTP/1.1 102 Processing\r\n\r\nHTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n",
				okResponse("ok"))
			return true
		}},
	{name: "interim-split", outcome: outWhole, body: "ok", reuse: true,
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nContent-Le", "ngth: 2\r\n\r\nok")
			return true
		}},
	{name: "interim-then-close", outcome: outAnswered, status: 502, cause: "prematurely closed",
		fault: func(c *rawConn) bool { write(c, "HTTP/1.1 100 Continue\r\n\r\n"); return false }},
	{name: "interim-then-nothing", outcome: outAnswered, status: 504, cause: "timed out", slow: true,
		fault: func(c *rawConn) bool { write(c, "HTTP/1.1 100 Continue\r\n\r\n"); hang(c); return false }},
	{name: "interim-flood", outcome: outAnswered, status: 502, cause: "too big header",
		fault: func(c *rawConn) bool {
			write(c, strings.Repeat("HTTP/1.1 100 Continue\r\n\r\n", 4000)+okResponse("ok"))
			hang(c)
			return false
		}},
	{name: "switching-unasked", outcome: outAnswered, status: 502, cause: "101",
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: upgrade\r\n\r\n")
			hang(c)
			return false
		}},
	{name: "cl-and-te", outcome: outAnswered, status: 502, cause: "invalid header",
		fault: func(c *rawConn) bool {
			write(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
			hang(c)
			return false
		}},
}

// faultyUpstream serves /<name>/fault with fault and anything else with
// "ok <conn>/<request>", keeping connections alive.
func faultyUpstream(t *testing.T, fault func(c *rawConn) bool) *rawUpstream {
	return newRawUpstream(t, func(c *rawConn) {
		for i := 1; ; i++ {
			req, _, err := c.ReadRequest()
			if err != nil {
				return
			}
			if strings.HasSuffix(req.URL.Path, "/fault") {
				if !fault(c) {
					return
				}
				continue
			}
			if _, err := io.WriteString(c, okResponse(fmt.Sprintf("ok %d/%d", c.N, i))); err != nil {
				return
			}
		}
	})
}

// TestFaultyUpstreams: every kind of broken origin, one after the other
// through the real binary. The client gets the gateway's 502/504 page on a
// connection that goes on serving, or, once the head went out, a short
// body and a closed connection; the failure is logged with the upstream,
// the route and the cause; the pool serves the next requests on a fresh
// connection; and the worker's fds and goroutines return to where they
// were.
func TestFaultyUpstreams(t *testing.T) {
	t.Parallel()
	good := textUpstream(t, "good")
	ups := make([]*rawUpstream, len(faultCases))
	routes := []obj{{"id": "good", "uri": "/good", "upstream": upstreamOf(nodes(good.Addr()), nil)}}
	for i, fc := range faultCases {
		ups[i] = faultyUpstream(t, fc.fault)
		read := fc.read
		if read == 0 {
			read = 1
		}
		routes = append(routes, obj{"id": fc.name, "uri": "/" + fc.name + "/*",
			"upstream": upstreamOf(nodes(ups[i].Addr()), obj{"timeout": obj{"connect": 2, "send": 2, "read": read}})})
	}
	g := startProbedGateway(t, routesYAML(routes...), "")
	// One request first, so that whatever the worker makes once is made;
	// the gateway's pool keeps one connection to the good upstream.
	if r := do(t, oneShotClient(), "GET", g.url("/good"), "", nil, nil); r.status != 200 {
		t.Fatalf("warm-up: %d", r.status)
	}
	base := g.settled(t)
	t.Logf("worker %d at rest: %d fds, %d goroutines: %s", g.pid, base.fds, base.goroutines, e2e.FDList(g.pid))
	for i, fc := range faultCases {
		if testing.Short() && fc.slow {
			continue
		}
		t.Run(fc.name, func(t *testing.T) {
			runFaultCase(t, g, ups[i], fc)
			g.backTo(t, base)
		})
	}
}

func runFaultCase(t *testing.T, g *probedGateway, up *rawUpstream, fc faultCase) {
	c := dialGateway(t, g.gateway)
	defer c.Close()
	br := newReader(c)
	req := func(path string) {
		_, _ = io.WriteString(c, "GET /"+fc.name+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
	}
	// While the faulty one is on, the worker serves everybody else.
	otherDone := make(chan error, 1)
	go func() {
		time.Sleep(300 * time.Millisecond)
		start := time.Now()
		r, err := tryDo(oneShotClient(), "GET", g.url("/good"), "", nil, nil)
		switch {
		case err != nil:
			otherDone <- err
		case r.status != 200:
			otherDone <- fmt.Errorf("status %d", r.status)
		case time.Since(start) > 2*time.Second:
			otherDone <- fmt.Errorf("took %v", time.Since(start))
		default:
			otherDone <- nil
		}
	}()
	start := time.Now()
	req("/fault")
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		t.Fatalf("no answer: %v", err)
	}
	body, berr := io.ReadAll(resp.Body)
	resp.Body.Close()
	took := time.Since(start)
	switch fc.outcome {
	case outAnswered:
		if berr != nil || resp.StatusCode != fc.status || string(body) != apisixPage(fc.status) ||
			resp.Header.Get("X-APISIX-Upstream-Status") != strconv.Itoa(fc.status) || resp.Close {
			t.Fatalf("got %d (upstream status %q, close %v, body %q, %v), want %d with APISIX's page, kept alive",
				resp.StatusCode, resp.Header.Get("X-APISIX-Upstream-Status"), resp.Close, cut(string(body)), berr, fc.status)
		}
		if fc.status == 504 && took < 900*time.Millisecond {
			t.Errorf("504 after %v, before timeout.read", took)
		}
		// The same client connection serves on.
		req("/next")
		if r := readOne(t, br, "GET"); r.status != 200 || !strings.HasPrefix(r.body, "ok ") {
			t.Fatalf("the next request on the client connection: %d %q", r.status, r.body)
		}
	case outTruncated:
		if resp.StatusCode != 200 || berr == nil {
			t.Fatalf("got %d, %d bytes, body error %v; want 200 cut short", resp.StatusCode, len(body), berr)
		}
		expectClosed(t, c, nil, 5*time.Second)
	case outWhole:
		if berr != nil || resp.StatusCode != 200 || string(body) != fc.body {
			t.Fatalf("got %d %q (%v), want 200 %q", resp.StatusCode, body, berr, fc.body)
		}
	}
	if err := <-otherDone; err != nil {
		t.Errorf("another client while the fault was on: %v", err)
	}
	if fc.cause != "" {
		line := g.LogLine(t, `level=(ERROR|WARN) .*route=`+regexp.QuoteMeta(fc.name)+`( |$)`, 5*time.Second)
		if line != "" && logField(line, "upstream") != up.Addr() || !regexp.MustCompile(fc.cause).MatchString(line) {
			t.Errorf("log line %q: want upstream=%s and cause %q", line, up.Addr(), fc.cause)
		}
	}
	if fc.name == "cl-shorter-later" {
		time.Sleep(500 * time.Millisecond) // the late bytes reach the idle connection
	}
	// The pool recovers: the next requests go to one fresh connection.
	c2 := dialGateway(t, g.gateway)
	defer c2.Close()
	br2 := newReader(c2)
	conn := ""
	for i := 1; i <= 2; i++ {
		_, _ = io.WriteString(c2, "GET /"+fc.name+"/again HTTP/1.1\r\nHost: x\r\n\r\n")
		r := readOne(t, br2, "GET")
		n, m, ok := strings.Cut(strings.TrimPrefix(r.body, "ok "), "/")
		if r.status != 200 || !ok || (n == "1" && !fc.reuse) || (conn != "" && n != conn) {
			t.Fatalf("request %d after the fault: %d %q; want an answer on one new upstream connection", i, r.status, r.body)
		}
		if conn == "" && m == "1" && n == "1" {
			t.Fatalf("request %d after the fault: %q", i, r.body)
		}
		conn = n
	}
	c.Close()
	c2.Close()
	up.DropConns()
}

// oneShotClient is an HTTP client that closes each connection after its
// request.
func oneShotClient() *http.Client {
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
}

// apisixPage is the gateway's error page for status.
func apisixPage(status int) string {
	title := strconv.Itoa(status) + " " + map[int]string{502: "Bad Gateway", 504: "Gateway Time-out"}[status]
	return "<html>\r\n<head><title>" + title + "</title></head>\r\n<body>\r\n<center><h1>" + title +
		"</h1></center>\r\n<hr><center>openresty</center>\r\n" +
		"<p><em>Powered by <a href=\"https://apisix.apache.org/\">APISIX</a>.</em></p></body>\r\n</html>\r\n"
}

// TestUpstreamContinue: an origin's own 100 Continue is not passed on: the
// client that asked for it gets the gateway's one 100 and then the answer.
func TestUpstreamContinue(t *testing.T) {
	t.Parallel()
	up := newRawUpstream(t, func(c *rawConn) {
		req, err := http.ReadRequest(c.BR)
		if err != nil {
			return
		}
		_, _ = io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
		b, _ := io.ReadAll(req.Body)
		_, _ = io.WriteString(c, okResponse("got "+string(b)))
	})
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	c := dialGateway(t, g)
	br := newReader(c)
	_, _ = io.WriteString(c, "POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n")
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("want 100 Continue first, got %q %v", line, err)
	}
	if l, _ := br.ReadString('\n'); l != "\r\n" {
		t.Fatalf("100 Continue has fields: %q", l)
	}
	_, _ = io.WriteString(c, "hello")
	if r := readOne(t, br, "POST"); r.status != 200 || r.body != "got hello" {
		t.Fatalf("got %d %q", r.status, r.body)
	}
}

// TestUpstreamErrorLogLimited: a failing upstream is logged, as nginx
// logs it, with the upstream, the route and the cause; a flood of failures
// writes a bounded number of lines and says how many it left out.
func TestUpstreamErrorLogLimited(t *testing.T) {
	t.Parallel()
	dead := deadAddr(t)
	g := startGateway(t, routesYAML(obj{"id": "dead-route", "uri": "/*", "upstream": upstreamOf(nodes(dead), nil)}), "")
	c := newClient(t)
	r := do(t, c, "GET", g.url("/x"), "", nil, nil)
	if r.status != 502 {
		t.Fatalf("status %d, want 502", r.status)
	}
	line := g.waitLog(`level=ERROR .*route=dead-route`, 1, 5*time.Second)[0]
	if logField(line, "upstream") != dead || !strings.Contains(line, "refused") || !strings.Contains(line, "while connecting to upstream") {
		t.Errorf("log line %q: want upstream=%s, connection refused, while connecting", line, dead)
	}
	start := time.Now()
	const n = 500
	for i := range n {
		if r := do(t, c, "GET", g.url("/x"), "", nil, nil); r.status != 502 {
			t.Fatalf("request %d: %d", i, r.status)
		}
	}
	elapsed := time.Since(start)
	suppressed := g.waitLog(`upstream errors not logged`, 1, 5*time.Second)
	lines := len(regexp.MustCompile(`level=ERROR [^\n]*route=dead-route`).FindAllString(g.out.String(), -1))
	// At most faultLogPerSecond (20) lines a second, in every window
	// the flood touched.
	if max := 20 * (int(elapsed/time.Second) + 2); lines > max || lines >= n {
		t.Errorf("%d lines for %d failures in %v, want at most %d", lines, n+1, elapsed, max)
	}
	left := 0
	for _, l := range suppressed {
		k, err := strconv.Atoi(logField(l, "suppressed"))
		if err != nil {
			t.Fatalf("no count in %q", l)
		}
		left += k
	}
	eventually(t, 5*time.Second, func() error {
		lines = len(regexp.MustCompile(`level=ERROR [^\n]*route=dead-route`).FindAllString(g.out.String(), -1))
		left = 0
		for _, l := range strings.Split(g.out.String(), "\n") {
			if strings.Contains(l, "upstream errors not logged") {
				k, _ := strconv.Atoi(logField(l, "suppressed"))
				left += k
			}
		}
		if lines+left != n+1 {
			return fmt.Errorf("%d lines + %d suppressed, want %d failures", lines, left, n+1)
		}
		return nil
	})
}

// TestUpstreamErrorLogRequestLine: the error line of a failed upstream
// names the client's request line, as nginx's request: "GET / HTTP/1.1",
// not the one sent upstream after proxy-rewrite changed its method and
// URI (nor its version, always HTTP/1.1 upstream).
func TestUpstreamErrorLogRequestLine(t *testing.T) {
	t.Parallel()
	dead := deadAddr(t)
	g := startGateway(t, routesYAML(obj{"id": "rewritten", "uri": "/rw", "upstream": upstreamOf(nodes(dead), nil),
		"plugins": obj{"proxy-rewrite": obj{"uri": "/up/$arg_a", "method": "POST"}}}), "")
	for i, line := range []string{"GET /rw?a=1 HTTP/1.1", "GET /rw?a=2 HTTP/1.0"} {
		c := dialGateway(t, g)
		_, _ = io.WriteString(c, line+"\r\nHost: x\r\n\r\n")
		if r := readOne(t, newReader(c), "GET"); r.status != 502 {
			t.Fatalf("%s: status %d, want 502", line, r.status)
		}
		c.Close()
		logged := g.waitLog(`level=ERROR .*route=rewritten`, i+1, 5*time.Second)[i]
		if got := logField(logged, "request"); got != line {
			t.Errorf("%s: log line %q names request %q, want the client's", line, logged, got)
		}
	}
}
