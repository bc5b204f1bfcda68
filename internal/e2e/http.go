package e2e

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Obj is one APISIX object (route, upstream, service) as it is written in
// apisix.yaml.
type Obj = map[string]any

// StandaloneYAML renders an apisix.yaml: each section is written as a flow
// (JSON) sequence, which YAML reads as it is, followed by the end flag.
func StandaloneYAML(sections map[string][]Obj) string {
	keys := make([]string, 0, len(sections))
	for k := range sections {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		j, err := json.Marshal(sections[k])
		if err != nil {
			panic(err)
		}
		fmt.Fprintf(&b, "%s: %s\n", k, j)
	}
	b.WriteString("#END\n")
	return b.String()
}

// RoutesYAML is StandaloneYAML with routes only.
func RoutesYAML(routes ...Obj) string {
	return StandaloneYAML(map[string][]Obj{"routes": routes})
}

// Nodes makes an upstream nodes map of weight 1 each.
func Nodes(addrs ...string) Obj {
	m := Obj{}
	for _, a := range addrs {
		m[a] = 1
	}
	return m
}

// UpstreamOf is an inline upstream with the given nodes and extra fields.
func UpstreamOf(n Obj, extra Obj) Obj {
	u := Obj{"type": "roundrobin", "nodes": n}
	for k, v := range extra {
		u[k] = v
	}
	return u
}

// NewClient returns an HTTP client that keeps connections alive (closed
// when the test ends) and fails a request after 10 s.
func NewClient(t testing.TB) *http.Client {
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4, IdleConnTimeout: 5 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// Result is a response read whole.
type Result struct {
	Status int
	Header http.Header
	Body   string
	Close  bool // Connection: close (net/http takes it out of Header)
}

// Do sends one request and reads the whole answer, failing the test when
// it cannot; host, when set, replaces the Host header.
func Do(t testing.TB, c *http.Client, method, url, host string, hdr map[string]string, body io.Reader) Result {
	t.Helper()
	r, err := TryDo(c, method, url, host, hdr, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

// TryDo is Do returning the error. It is safe for concurrent use.
func TryDo(c *http.Client, method, url, host string, hdr map[string]string, body io.Reader) (Result, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return Result{}, err
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return Result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return Result{}, err
	}
	return Result{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Close: resp.Close}, nil
}

// HTTPUpstream is an ordinary origin: an httptest server, closed when the
// test ends, that counts the connections it accepted and those that ended.
type HTTPUpstream struct {
	*httptest.Server
	Conns  atomic.Int32 // accepted
	Closed atomic.Int32 // ended
}

// NewHTTPUpstream starts an HTTPUpstream serving h.
func NewHTTPUpstream(t testing.TB, h http.HandlerFunc) *HTTPUpstream {
	u := &HTTPUpstream{Server: httptest.NewUnstartedServer(h)}
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.Conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			u.Closed.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// Addr is the upstream's host:port.
func (u *HTTPUpstream) Addr() string { return strings.TrimPrefix(u.URL, "http://") }

// TextUpstream answers every request with body.
func TextUpstream(t testing.TB, body string) *HTTPUpstream {
	return NewHTTPUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, body)
	})
}

// RawUpstream is an origin scripted byte by byte: serve runs for every
// accepted connection on its own goroutine, within 30 s (the connection's
// deadline). It records how many connections it accepted and every byte
// it read through RawConn. When the test ends it closes its listener and
// every connection, and waits for the scripts to return.
type RawUpstream struct {
	Accepted atomic.Int32
	l        net.Listener
	mu       sync.Mutex
	got      bytes.Buffer
	conns    []net.Conn
	wg       sync.WaitGroup
	quit     chan struct{} // closed when the test ends
}

// RawConn is one accepted connection of a RawUpstream; reads through BR
// are recorded.
type RawConn struct {
	net.Conn
	BR   *bufio.Reader
	N    int             // index of the connection, from 1
	Quit <-chan struct{} // closed when the test ends
}

type recordingReader struct {
	u *RawUpstream
	c net.Conn
}

func (r recordingReader) Read(p []byte) (int, error) {
	n, err := r.c.Read(p)
	if n > 0 {
		r.u.mu.Lock()
		r.u.got.Write(p[:n])
		r.u.mu.Unlock()
	}
	return n, err
}

// NewRawUpstream listens on a free loopback port and runs serve for every
// connection.
func NewRawUpstream(t testing.TB, serve func(c *RawConn)) *RawUpstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &RawUpstream{l: l, quit: make(chan struct{})}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := int(u.Accepted.Add(1))
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			rc := &RawConn{Conn: c, N: n, Quit: u.quit}
			rc.BR = bufio.NewReaderSize(recordingReader{u: u, c: c}, 64<<10)
			u.wg.Add(1)
			go func() {
				defer u.wg.Done()
				defer c.Close()
				// Every script ends within the test's life.
				_ = c.SetDeadline(time.Now().Add(30 * time.Second))
				serve(rc)
			}()
		}
	}()
	t.Cleanup(u.close)
	return u
}

// Addr is the upstream's host:port.
func (u *RawUpstream) Addr() string { return u.l.Addr().String() }

// Received returns every byte the scripts read so far.
func (u *RawUpstream) Received() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.got.String()
}

// DropConns closes every connection the upstream accepted so far, which
// empties the gateway's pool of them.
func (u *RawUpstream) DropConns() {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, c := range u.conns {
		_ = c.Close()
	}
}

func (u *RawUpstream) close() {
	close(u.quit)
	_ = u.l.Close()
	u.mu.Lock()
	for _, c := range u.conns {
		_ = c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// ReadRequest reads one request, body included, from a raw connection.
func (c *RawConn) ReadRequest() (*http.Request, []byte, error) {
	req, err := http.ReadRequest(c.BR)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, nil, err
	}
	return req, body, nil
}

// ServeKeepAlive answers requests on one connection until it fails or
// respond returns false; n counts the connection's requests from 1.
func (c *RawConn) ServeKeepAlive(respond func(req *http.Request, body []byte, n int) (string, bool)) {
	for i := 1; ; i++ {
		req, body, err := c.ReadRequest()
		if err != nil {
			return
		}
		out, more := respond(req, body, i)
		if _, err := io.WriteString(c, out); err != nil || !more {
			return
		}
	}
}

// OKResponse is a minimal keep-alive response with body.
func OKResponse(body string) string {
	return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// Dial opens a raw connection to addr within 1 s, closed when the test
// ends, with a 15 s deadline for everything done on it.
func Dial(t testing.TB, addr string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	return c
}

// NewReader buffers a raw connection for reading answers.
func NewReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, 64<<10) }

// ReadOne reads one response, body included, from br, failing the test
// when it cannot.
func ReadOne(t testing.TB, br *bufio.Reader, method string) Result {
	t.Helper()
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatalf("read response: %v", err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("read body: %v", err)
	}
	return Result{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Close: resp.Close}
}

// ReadResponses parses n responses from r (for pipelining tests), bodies
// read whole.
func ReadResponses(t testing.TB, r *bufio.Reader, n int, method string) []*http.Response {
	t.Helper()
	var rs []*http.Response
	for i := 0; i < n; i++ {
		resp, err := http.ReadResponse(r, &http.Request{Method: method})
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("response %d body: %v", i, err)
		}
		resp.Body = io.NopCloser(bytes.NewReader(body))
		rs = append(rs, resp)
	}
	return rs
}

// ExpectClosed checks that the peer closes c within d without sending
// anything more (what br buffered comes first, when br is not nil).
func ExpectClosed(t testing.TB, c net.Conn, br *bufio.Reader, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	var r io.Reader = c
	if br != nil {
		r = br
	}
	buf := make([]byte, 4096)
	n, err := r.Read(buf)
	if n > 0 {
		t.Fatalf("unexpected bytes after the answer: %q", buf[:n])
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open after %v", d)
	}
}

// RawExchange writes raw bytes to addr and reads until the connection
// closes or idle passes with nothing new.
func RawExchange(t testing.TB, addr string, raw string, idle time.Duration) string {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	buf := make([]byte, 64<<10)
	for {
		_ = c.SetReadDeadline(time.Now().Add(idle))
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			return out.String()
		}
	}
}

// IPOrigins starts an origin on each of ips, all on one port, each
// answering its own address; close makes every answer close its
// connection. The port is returned.
func IPOrigins(t testing.TB, close bool, ips ...string) int {
	t.Helper()
	for try := 0; try < 20; try++ {
		var ls []net.Listener
		port := 0
		for _, ip := range ips {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(port)))
			if err != nil {
				break
			}
			ls = append(ls, l)
			port = l.Addr().(*net.TCPAddr).Port
		}
		if len(ls) < len(ips) {
			for _, l := range ls {
				l.Close()
			}
			continue
		}
		for i, l := range ls {
			body := ips[i]
			srv := &http.Server{Handler: http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
				if close {
					rw.Header().Set("Connection", "close")
				}
				_, _ = io.WriteString(rw, body)
			})}
			go func() { _ = srv.Serve(l) }()
			t.Cleanup(func() { _ = srv.Close() })
		}
		return port
	}
	t.Fatal("no port free on every origin address")
	return 0
}
