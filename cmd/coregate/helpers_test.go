package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// obj is one APISIX object (route, upstream, service) as it is written in
// apisix.yaml.
type obj = map[string]any

// standaloneYAML renders an apisix.yaml: each section is written as a flow
// (JSON) sequence, which YAML reads as it is, followed by the end flag.
func standaloneYAML(sections map[string][]obj) string {
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

// routesYAML is standaloneYAML with routes only.
func routesYAML(routes ...obj) string {
	return standaloneYAML(map[string][]obj{"routes": routes})
}

// nodes makes an upstream nodes map of weight 1 each.
func nodes(addrs ...string) obj {
	m := obj{}
	for _, a := range addrs {
		m[a] = 1
	}
	return m
}

// upstreamOf is an inline upstream with the given nodes and extra fields.
func upstreamOf(n obj, extra obj) obj {
	u := obj{"type": "roundrobin", "nodes": n}
	for k, v := range extra {
		u[k] = v
	}
	return u
}

// newClient returns an HTTP client that keeps connections alive and fails
// a request after 10 s.
func newClient(t testing.TB) *http.Client {
	tr := &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4, IdleConnTimeout: 5 * time.Second}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

// result is a response read whole.
type result struct {
	status int
	header http.Header
	body   string
	close  bool // Connection: close (net/http takes it out of header)
}

// do sends one request and reads the whole answer; host, when set,
// replaces the Host header.
func do(t testing.TB, c *http.Client, method, url, host string, hdr map[string]string, body io.Reader) result {
	t.Helper()
	r, err := tryDo(c, method, url, host, hdr, body)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	return r
}

func tryDo(c *http.Client, method, url, host string, hdr map[string]string, body io.Reader) (result, error) {
	req, err := http.NewRequest(method, url, body)
	if err != nil {
		return result{}, err
	}
	if host != "" {
		req.Host = host
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return result{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return result{}, err
	}
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), close: resp.Close}, nil
}

// httpUpstream is an ordinary origin: an httptest server that counts the
// connections it accepted and those that ended.
type httpUpstream struct {
	*httptest.Server
	conns  atomic.Int32 // accepted
	closed atomic.Int32 // ended
}

func newHTTPUpstream(t testing.TB, h http.HandlerFunc) *httpUpstream {
	u := &httpUpstream{Server: httptest.NewUnstartedServer(h)}
	u.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		switch s {
		case http.StateNew:
			u.conns.Add(1)
		case http.StateClosed, http.StateHijacked:
			u.closed.Add(1)
		}
	}
	u.Start()
	t.Cleanup(u.Close)
	return u
}

// addr is the upstream's host:port.
func (u *httpUpstream) addr() string { return strings.TrimPrefix(u.URL, "http://") }

// textUpstream answers every request with body.
func textUpstream(t testing.TB, body string) *httpUpstream {
	return newHTTPUpstream(t, func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, body)
	})
}

// rawUpstream is an origin scripted byte by byte: serve runs for every
// accepted connection on its own goroutine. It records how many connections
// it accepted and every byte it read through rawConn.
type rawUpstream struct {
	t        testing.TB
	l        net.Listener
	accepted atomic.Int32
	mu       sync.Mutex
	got      bytes.Buffer
	conns    []net.Conn
	wg       sync.WaitGroup
	quit     chan struct{} // closed when the test ends
}

// rawConn is one accepted connection of a rawUpstream; reads through br
// are recorded.
type rawConn struct {
	net.Conn
	br   *bufio.Reader
	n    int             // index of the connection, from 1
	quit <-chan struct{} // closed when the test ends
}

type recordingReader struct {
	u *rawUpstream
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

func newRawUpstream(t testing.TB, serve func(c *rawConn)) *rawUpstream {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := &rawUpstream{t: t, l: l, quit: make(chan struct{})}
	u.wg.Add(1)
	go func() {
		defer u.wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := int(u.accepted.Add(1))
			u.mu.Lock()
			u.conns = append(u.conns, c)
			u.mu.Unlock()
			rc := &rawConn{Conn: c, n: n, quit: u.quit}
			rc.br = bufio.NewReaderSize(recordingReader{u: u, c: c}, 64<<10)
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

func (u *rawUpstream) addr() string { return u.l.Addr().String() }

// received returns every byte the scripts read so far.
func (u *rawUpstream) received() string {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.got.String()
}

func (u *rawUpstream) close() {
	close(u.quit)
	_ = u.l.Close()
	u.mu.Lock()
	for _, c := range u.conns {
		_ = c.Close()
	}
	u.mu.Unlock()
	u.wg.Wait()
}

// readRequest reads one request, body included, from a raw connection.
func (c *rawConn) readRequest() (*http.Request, []byte, error) {
	req, err := http.ReadRequest(c.br)
	if err != nil {
		return nil, nil, err
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, nil, err
	}
	return req, body, nil
}

// serveKeepAlive answers requests on one connection until it fails or
// respond returns false.
func (c *rawConn) serveKeepAlive(respond func(req *http.Request, body []byte, n int) (string, bool)) {
	for i := 1; ; i++ {
		req, body, err := c.readRequest()
		if err != nil {
			return
		}
		out, more := respond(req, body, i)
		if _, err := io.WriteString(c, out); err != nil || !more {
			return
		}
	}
}

// okResponse is a minimal keep-alive response with body.
func okResponse(body string) string {
	return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// deadAddr returns a loopback address where nothing listens.
func deadAddr(t testing.TB) string {
	return "127.0.0.1:" + strconv.Itoa(freePort(t))
}

// dialGateway opens a raw connection to the gateway.
func dialGateway(t testing.TB, g *gateway) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", g.addr(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(15 * time.Second))
	return c
}

// readOne reads one response, body included, from br.
func readOne(t testing.TB, br *bufio.Reader, method string) result {
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
	return result{status: resp.StatusCode, header: resp.Header, body: string(b), close: resp.Close}
}

// expectClosed checks that the peer closes c within d without sending
// anything more.
func expectClosed(t testing.TB, c net.Conn, br *bufio.Reader, d time.Duration) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(d))
	var r io.Reader = c
	if br != nil {
		r = br // what it buffered comes first
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

// rss returns the resident set size of process pid in bytes.
func rss(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(v)
			if len(f) >= 1 {
				kb, err := strconv.ParseInt(f[0], 10, 64)
				return kb << 10, err
			}
		}
	}
	return 0, fmt.Errorf("no VmRSS for pid %d", pid)
}

// treeRSS returns the resident set size of process pid and all its
// descendants (the gateway's worker processes), in bytes.
func treeRSS(pid int) (int64, error) {
	total, err := rss(pid)
	if err != nil {
		return 0, err
	}
	tasks, _ := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/task")
	for _, task := range tasks {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/task/" + task.Name() + "/children")
		if err != nil {
			continue
		}
		for _, f := range strings.Fields(string(b)) {
			child, err := strconv.Atoi(f)
			if err != nil {
				continue
			}
			if r, err := treeRSS(child); err == nil {
				total += r
			}
		}
	}
	return total, nil
}

// newReader buffers a raw connection for reading answers.
func newReader(c net.Conn) *bufio.Reader { return bufio.NewReaderSize(c, 64<<10) }
