package worker

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509/pkix"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/internal/testcert"
	"coregate/tlsconf"
)

// tlsSpec adds to s an ssl object serving a certificate for names, and
// returns a client configuration that trusts it.
func tlsSpec(t testing.TB, s *spec.Spec, names ...string) *tls.Config {
	t.Helper()
	ca := testcert.New(t, testcert.Options{CA: true, Subject: pkix.Name{CommonName: "test CA"}}, nil)
	leaf := testcert.New(t, testcert.Options{DNSNames: names}, ca)
	snis, _ := json.Marshal(names)
	obj := fmt.Sprintf(`{"id":"s%d","cert":%q,"key":%q,"snis":%s}`, len(s.SSLs)+1, leaf.ChainPEM, leaf.KeyPEM, snis)
	x, err := spec.DecodeSSL([]byte(obj))
	if err != nil {
		t.Fatal(err)
	}
	s.SSLs = append(s.SSLs, x)
	return &tls.Config{RootCAs: ca.Pool(), ServerName: names[0], NextProtos: []string{"http/1.1"}}
}

// runTLSWorker runs a worker with a TLS listener beside its plain one,
// serving a certificate for test.local; it returns the worker and a
// client configuration that trusts it.
func runTLSWorker(t *testing.T, cfg Config, upstreams []string, routes ...string) (*Worker, *tls.Config) {
	t.Helper()
	s := testSpec(t, upstreams, routes...)
	ccfg := tlsSpec(t, s, "test.local")
	cfg.TLSListen = []string{unusedAddr(t)}
	w, _ := runWorker(t, cfg, s)
	if w.TLSAddr() == nil {
		t.Fatal("no TLS address")
	}
	return w, ccfg
}

func TestTLSProxy(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "path=%s proto=%s body=%d", r.URL.Path, r.Header.Get("X-Forwarded-Proto"), r.ContentLength)
	}))
	defer up.Close()
	w, ccfg := runTLSWorker(t, Config{}, nil,
		fmt.Sprintf(`{"id":"1","uri":"/hello*","upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL)))
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		ccfg := ccfg.Clone()
		ccfg.MinVersion, ccfg.MaxVersion = v, v
		cl := &http.Client{Transport: &http.Transport{TLSClientConfig: ccfg, MaxIdleConnsPerHost: 1}}
		base := "https://" + w.TLSAddr().String()
		for i := 0; i < 20; i++ {
			body := strings.Repeat("b", i*3000)
			resp, err := cl.Post(base+"/hello/x", "text/plain", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			want := fmt.Sprintf("path=/hello/x proto=https body=%d", len(body))
			if resp.StatusCode != 200 || string(b) != want {
				t.Fatalf("got %d %q, want 200 %q", resp.StatusCode, b, want)
			}
			if resp.TLS == nil || resp.TLS.NegotiatedProtocol != "http/1.1" {
				t.Fatalf("TLS state %+v", resp.TLS)
			}
		}
	}
	// The plain listener still speaks HTTP.
	c, br := dialWorker(t, w)
	if resp := getOn(t, c, br, "/none"); resp.StatusCode != 404 {
		t.Fatalf("plain listener: %d", resp.StatusCode)
	}
}

// TestTLSPipelinedWithFinished: requests written right behind the
// client's Finished, in the same segment, are served (the handshake must
// not swallow them).
func TestTLSPipelinedWithFinished(t *testing.T) {
	w, ccfg := runTLSWorker(t, Config{}, nil)
	raw, err := net.Dial("tcp", w.TLSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	// The client's second flight (its Finished) waits for the first
	// application write and goes out with it.
	bc := &batchConn{Conn: raw, held: 2}
	c := tls.Client(bc, ccfg)
	if err := c.Handshake(); err != nil {
		t.Fatal(err)
	}
	if _, err := fmt.Fprintf(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\nGET /b HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	if bc.coalesced == 0 {
		t.Fatal("the Finished did not go out with the requests")
	}
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		if resp := readAnswer(t, c, br); resp.StatusCode != 404 {
			t.Fatalf("answer %d: %d", i, resp.StatusCode)
		}
	}
}

// batchConn holds its held-th write and sends it with the next one.
type batchConn struct {
	net.Conn
	held      int
	n         int
	buf       []byte
	coalesced int
}

func (b *batchConn) Write(p []byte) (int, error) {
	b.n++
	if b.n == b.held {
		b.buf = append(b.buf, p...)
		return len(p), nil
	}
	q := p
	if len(b.buf) > 0 {
		q = append(b.buf, p...)
		b.buf = nil
		b.coalesced++
	}
	_, err := b.Conn.Write(q)
	return len(p), err
}

func TestTLSGarbage(t *testing.T) {
	w, _ := runTLSWorker(t, Config{}, nil)
	c, err := net.Dial("tcp", w.TLSAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, err := bufio.NewReader(c).Read(make([]byte, 100))
	if n != 0 || err == nil {
		t.Fatalf("plain HTTP on the TLS port: read %d, %v; want the connection closed", n, err)
	}
}

// TestTLSHandshakeTimeout: a client that stops mid-handshake is closed at
// client_header_timeout, counted from the accept, as one that never sends
// its head; the handshake's goroutine stops reading with it.
func TestTLSHandshakeTimeout(t *testing.T) {
	w, ccfg := runTLSWorker(t, Config{HeaderTimeout: 300 * time.Millisecond}, nil)
	for _, stop := range []string{"hello", "partial"} {
		raw, err := net.Dial("tcp", w.TLSAddr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		// The ClientHello, whole or cut, and nothing after it.
		hello := &captureConn{Conn: raw, max: 1, stop: make(chan struct{})}
		if stop == "partial" {
			hello.cut = 20
		}
		ended := make(chan struct{})
		go func() { _ = tls.Client(hello, ccfg).Handshake(); close(ended) }()
		start := time.Now()
		_ = raw.SetReadDeadline(time.Now().Add(5 * time.Second))
		_, err = io.Copy(io.Discard, raw)
		if err != nil {
			t.Fatalf("%s: %v; want the gateway's close", stop, err)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Fatalf("%s: closed after %v, want about 300ms", stop, d)
		}
		close(hello.stop)
		<-ended
	}
	// No handshake goroutine is left blocked in its read (they wait for
	// the next handshake, goHandshake, and end later).
	deadline := time.Now().Add(5 * time.Second)
	for {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "tlsrec.(*HandshakeConn).Read") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a handshake goroutine is left reading:\n%s", stacks)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// captureConn passes the first max writes to the connection (the first
// cut bytes of them when cut is set) and swallows the rest; reads get
// nothing, and an EOF once stop is closed.
type captureConn struct {
	net.Conn
	max, n, cut int
	stop        chan struct{}
}

func (c *captureConn) Write(p []byte) (int, error) {
	c.n++
	if c.n > c.max {
		return len(p), nil
	}
	q := p
	if c.cut > 0 && c.cut < len(q) {
		q = q[:c.cut]
	}
	_, err := c.Conn.Write(q)
	return len(p), err
}

func (c *captureConn) Read(p []byte) (int, error) {
	<-c.stop // the client stalls until the test is done with it
	return 0, io.EOF
}

// TestTLSCloseNotify: an answer that ends the connection (Connection:
// close) is followed by close_notify, so the client sees a clean end.
func TestTLSCloseNotify(t *testing.T) {
	w, ccfg := runTLSWorker(t, Config{}, nil)
	c, err := tls.Dial("tcp", w.TLSAddr().String(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /none HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := io.ReadAll(c) // io.EOF only at a close_notify
	if err != nil {
		t.Fatalf("read %q then %v, want a close_notify", b, err)
	}
	if !bytes.HasPrefix(b, []byte("HTTP/1.1 404 ")) {
		t.Fatalf("answer %q", b)
	}
}

// TestTLSVars: routes match on $scheme and the TLS variables, which are
// unset on the plain listener.
func TestTLSVars(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, "ok")
	}))
	defer up.Close()
	w, ccfg := runTLSWorker(t, Config{}, nil,
		fmt.Sprintf(`{"id":"1","uri":"/s","vars":[["scheme","==","https"],["ssl_server_name","==","test.local"],`+
			`["ssl_protocol","==","TLSv1.3"],["https","==","on"]],"upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL)))
	cl := &http.Client{Transport: &http.Transport{TLSClientConfig: ccfg}}
	resp, err := cl.Get("https://" + w.TLSAddr().String() + "/s")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("https: %d, want 200", resp.StatusCode)
	}
	c, br := dialWorker(t, w)
	if resp := getOn(t, c, br, "/s"); resp.StatusCode != 404 {
		t.Fatalf("http: %d, want 404", resp.StatusCode)
	}
}

// TestTLSNoCertificate: a handshake for a name no ssl object serves
// fails, as APISIX's; the connection serves nothing.
func TestTLSNoCertificate(t *testing.T) {
	w, ccfg := runTLSWorker(t, Config{}, nil)
	ccfg = ccfg.Clone()
	ccfg.ServerName = "other.local"
	ccfg.InsecureSkipVerify = true
	c, err := tls.Dial("tcp", w.TLSAddr().String(), ccfg)
	if err == nil {
		c.Close()
		t.Fatal("handshake for other.local succeeded")
	}
	// The worker goes on serving handshakes for its name.
	ccfg.ServerName = "test.local"
	ccfg.InsecureSkipVerify = false
	c, err = tls.Dial("tcp", w.TLSAddr().String(), ccfg)
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
}

// TestTLSResumption: with ssl_session_tickets a client resumes its
// session, in TLS 1.2 and 1.3, and the resumed connection serves.
func TestTLSResumption(t *testing.T) {
	w, ccfg := runTLSWorker(t, Config{TLS: tlsconf.Settings{SessionTickets: true}}, nil)
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		ccfg := ccfg.Clone()
		ccfg.MinVersion, ccfg.MaxVersion = v, v
		ccfg.ClientSessionCache = tls.NewLRUClientSessionCache(4)
		for i := 0; i < 3; i++ {
			c, err := tls.Dial("tcp", w.TLSAddr().String(), ccfg)
			if err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if resp := getOn(t, c, br, "/none"); resp.StatusCode != 404 {
				t.Fatalf("%x #%d: %d", v, i, resp.StatusCode)
			}
			if got := c.ConnectionState().DidResume; got != (i > 0) {
				t.Fatalf("%x #%d: resumed %v", v, i, got)
			}
			c.Close()
		}
	}
}
