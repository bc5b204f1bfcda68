package worker

import (
	"bufio"
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
)

// testCA is a certificate authority of a test: it signs server and client
// certificates.
type testCA struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func newTestCA(t testing.TB) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "coregate test CA"},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue makes a certificate for cn (a server's for names, a client's when
// there are none), and its key, in PEM.
func (ca *testCA) issue(t testing.TB, cn string, names ...string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		DNSNames:     names,
	}
	if len(names) > 0 {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder})
}

func (ca *testCA) pair(t testing.TB, cn string, names ...string) tls.Certificate {
	t.Helper()
	c, k := ca.issue(t, cn, names...)
	p, err := tls.X509KeyPair(c, k)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// tlsOrigin is an HTTPS origin (httptest's, over TLS) that records the
// server names its handshakes asked for and counts its connections.
type tlsOrigin struct {
	*httptest.Server
	mu    sync.Mutex
	names []string
	conns atomic.Int32
}

func newTLSOrigin(t *testing.T, h http.Handler, base *tls.Config) *tlsOrigin {
	t.Helper()
	o := &tlsOrigin{Server: httptest.NewUnstartedServer(h)}
	if base == nil {
		base = &tls.Config{}
	}
	o.TLS = &tls.Config{
		GetConfigForClient: func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
			o.mu.Lock()
			o.names = append(o.names, hello.ServerName)
			o.mu.Unlock()
			return nil, nil
		},
		Certificates: base.Certificates,
		ClientAuth:   base.ClientAuth,
		ClientCAs:    base.ClientCAs,
	}
	o.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.conns.Add(1)
		}
	}
	o.StartTLS()
	t.Cleanup(o.Close)
	return o
}

func (o *tlsOrigin) serverNames() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return append([]string(nil), o.names...)
}

// httpsRoute is a route to an upstream of scheme https on addr, with extra
// upstream fields (JSON, may be empty).
func httpsRoute(addr, extra string) string {
	if extra != "" {
		extra = "," + extra
	}
	return fmt.Sprintf(`{"id":"1","uri":"/*","upstream":{"scheme":"https","nodes":{"%s":1}%s}}`, addr, extra)
}

// getHost sends GET path with Host host to the worker on cl; it gives the
// status and the body.
func getHost(t *testing.T, cl *http.Client, w *Worker, host, path string) (int, string) {
	t.Helper()
	req, err := http.NewRequest("GET", "http://"+w.Addr().String()+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

func keepAliveClient(t *testing.T) *http.Client {
	cl := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 1}, Timeout: 10 * time.Second}
	t.Cleanup(cl.CloseIdleConnections)
	return cl
}

// TestHTTPSUpstreamKeepAlive: 20 requests to an https node go over one
// TLS connection, kept alive in the pool; the node sees no SNI for the IP
// address it is given by (pass_host=node), and the request arrives whole.
func TestHTTPSUpstreamKeepAlive(t *testing.T) {
	o := newTLSOrigin(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(rw, "%s %s %s", r.Method, r.Host, r.URL.Path)
	}), nil)
	addr := hostPort(strings.Replace(o.URL, "https://", "http://", 1))
	w := startWorker(t, nil, httpsRoute(addr, `"pass_host":"node"`))
	cl := keepAliveClient(t)
	for i := range 20 {
		st, body := getHost(t, cl, w, "client.test", fmt.Sprintf("/k%d", i))
		if want := fmt.Sprintf("GET %s /k%d", addr, i); st != 200 || body != want {
			t.Fatalf("request %d: %d %q, want 200 %q", i, st, body, want)
		}
	}
	if n := o.conns.Load(); n != 1 {
		t.Errorf("origin saw %d connections for 20 requests, want 1", n)
	}
	if names := o.serverNames(); len(names) != 1 || names[0] != "" {
		t.Errorf("server names %q, want one empty (no SNI for an IP address)", names)
	}
}

// TestHTTPSUpstreamSNI: the server name is the Host the request goes
// upstream with, as pass_host says, without its port; a connection made
// for one name is not reused for another.
func TestHTTPSUpstreamSNI(t *testing.T) {
	o := newTLSOrigin(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprint(rw, r.Host)
	}), nil)
	addr := hostPort(strings.Replace(o.URL, "https://", "http://", 1))
	cases := []struct {
		name, extra string
		hosts       []string
		want        []string // server names of the handshakes, in order
	}{
		{"pass", "", []string{"a.test:9080", "b.test", "a.test:9080", "b.test"}, []string{"a.test", "b.test"}},
		{"rewrite", `"pass_host":"rewrite","upstream_host":"r.test:8443"`, []string{"a.test", "b.test"}, []string{"r.test"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			o.mu.Lock()
			o.names = nil
			o.mu.Unlock()
			o.conns.Store(0)
			w := startWorker(t, nil, httpsRoute(addr, c.extra))
			cl := keepAliveClient(t)
			for _, h := range c.hosts {
				if st, _ := getHost(t, cl, w, h, "/"); st != 200 {
					t.Fatalf("Host %s: %d", h, st)
				}
			}
			if got := o.serverNames(); strings.Join(got, ",") != strings.Join(c.want, ",") {
				t.Errorf("server names %q, want %q", got, c.want)
			}
			if n := int(o.conns.Load()); n != len(c.want) {
				t.Errorf("origin saw %d connections, want %d", n, len(c.want))
			}
		})
	}
}

// verifyWorker runs a worker trusting ca (through a PEM file, as
// apisix.ssl.ssl_trusted_certificate names it) with one route to an
// https upstream; its error log is in the returned buffer.
func verifyWorker(t *testing.T, ca *testCA, route string) (*Worker, *syncBuffer) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "ca.pem")
	if err := os.WriteFile(file, ca.pem, 0o600); err != nil {
		t.Fatal(err)
	}
	pool, err := nodeconf.TrustedCAs(file)
	if err != nil {
		t.Fatal(err)
	}
	var log syncBuffer
	w, _ := runWorker(t, Config{UpstreamCAs: pool, Logger: slog.New(slog.NewTextHandler(&log, nil))}, testSpec(t, nil, route))
	return w, &log
}

// syncBuffer is a bytes.Buffer safe for a logger's and a test's
// goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// waitLog waits for the log to hold all of want.
func waitLog(t *testing.T, log *syncBuffer, want ...string) {
	t.Helper()
	deadline := time.Now().Add(3 * time.Second)
	for {
		s := log.String()
		ok := true
		for _, w := range want {
			ok = ok && strings.Contains(s, w)
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("log %q lacks %q", s, want)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestHTTPSUpstreamVerify: with tls.verify, a node whose certificate a
// trusted CA signed for the server name is used; one whose certificate no
// trusted CA signed, or signed for another name, is a failed connect
// (502), logged. Without tls.verify (APISIX's default) the same untrusted
// node is used.
func TestHTTPSUpstreamVerify(t *testing.T) {
	ca := newTestCA(t)
	hello := http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) { fmt.Fprint(rw, "hello") })
	good := newTLSOrigin(t, hello, &tls.Config{Certificates: []tls.Certificate{ca.pair(t, "origin", "origin.test")}})
	untrusted := newTLSOrigin(t, hello, nil) // httptest's own certificate
	hp := func(o *tlsOrigin) string { return strings.TrimPrefix(o.URL, "https://") }
	const rewrite = `"pass_host":"rewrite","upstream_host":"origin.test"`

	cases := []struct {
		name, route string
		status      int
	}{
		{"trusted", httpsRoute(hp(good), rewrite+`,"tls":{"verify":true}`), 200},
		{"untrusted", httpsRoute(hp(untrusted), rewrite+`,"tls":{"verify":true}`), 502},
		{"other name", httpsRoute(hp(good), `"pass_host":"rewrite","upstream_host":"other.test","tls":{"verify":true}`), 502},
		{"no verify", httpsRoute(hp(untrusted), rewrite+`,"tls":{"verify":false}`), 200},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			w, log := verifyWorker(t, ca, c.route)
			st, _ := getHost(t, keepAliveClient(t), w, "client.test", "/")
			if st != c.status {
				t.Fatalf("status %d, want %d (log: %s)", st, c.status, log)
			}
			if c.status == 502 {
				waitLog(t, log, "SSL_do_handshake() failed while SSL handshaking to upstream", "certificate", "status=502")
			}
		})
	}
}

// TestHTTPSUpstreamClientCert: a node that requires a client certificate
// gets the upstream's tls.client_cert; without one the handshake fails
// (502).
func TestHTTPSUpstreamClientCert(t *testing.T) {
	ca := newTestCA(t)
	clients := x509.NewCertPool()
	clients.AddCert(ca.cert)
	o := newTLSOrigin(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		fmt.Fprint(rw, r.TLS.PeerCertificates[0].Subject.CommonName)
	}), &tls.Config{ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: clients})
	addr := strings.TrimPrefix(o.URL, "https://")
	certPEM, keyPEM := ca.issue(t, "the gateway")
	conf, _ := json.Marshal(map[string]string{"client_cert": string(certPEM), "client_key": string(keyPEM)})

	w := startWorker(t, nil, httpsRoute(addr, `"tls":`+string(conf)))
	if st, body := getHost(t, keepAliveClient(t), w, "a.test", "/"); st != 200 || body != "the gateway" {
		t.Errorf("with a client certificate: %d %q, want 200 %q", st, body, "the gateway")
	}
	w = startWorker(t, nil, httpsRoute(addr, ""))
	if st, _ := getHost(t, keepAliveClient(t), w, "a.test", "/"); st != 502 {
		t.Errorf("without a client certificate: %d, want 502", st)
	}
	// tls.client_cert_id: an ssl object of type client.
	certPEM2, keyPEM2 := ca.issue(t, "the client object")
	s := testSpec(t, nil, httpsRoute(addr, `"tls":{"client_cert_id":"c1"}`))
	obj, _ := json.Marshal(map[string]string{"id": "c1", "type": "client", "cert": string(certPEM2), "key": string(keyPEM2)})
	sl, err := spec.DecodeSSL(obj)
	if err != nil {
		t.Fatal(err)
	}
	s.SSLs = append(s.SSLs, sl)
	w, _ = runWorker(t, Config{}, s)
	if st, body := getHost(t, keepAliveClient(t), w, "a.test", "/"); st != 200 || body != "the client object" {
		t.Errorf("with client_cert_id: %d %q, want 200 %q", st, body, "the client object")
	}
	// The object gone, the rest of the configuration is served and the
	// upstream's requests fail (502), as APISIX's.
	s.SSLs = nil
	s.Routes = append(s.Routes, testSpec(t, nil, `{"id":"2","uri":"/none","upstream":{"nodes":{"127.0.0.1:1":1}}}`).Routes...)
	if err := w.SetSpec(s, nil); err != nil {
		t.Fatal(err)
	}
	if st, _ := getHost(t, keepAliveClient(t), w, "a.test", "/"); st != 502 {
		t.Errorf("client_cert_id of no object: %d, want 502", st)
	}
}

// TestHTTPSUpstreamLargeBodies: bodies over 64 KiB go both ways, in many
// records, over one kept-alive connection.
func TestHTTPSUpstreamLargeBodies(t *testing.T) {
	o := newTLSOrigin(t, http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		rw.Header().Set("Content-Length", fmt.Sprint(2*len(b)))
		_, _ = rw.Write(b)
		_, _ = rw.Write(b)
	}), nil)
	w := startWorker(t, nil, httpsRoute(strings.TrimPrefix(o.URL, "https://"), ""))
	cl := keepAliveClient(t)
	for i, n := range []int{100 << 10, 300<<10 + 7, 1 << 20} {
		body := bytes.Repeat([]byte(fmt.Sprintf("%07d.", i)), n/8)
		resp, err := cl.Post("http://"+w.Addr().String()+"/echo", "application/octet-stream", bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if resp.StatusCode != 200 || !bytes.Equal(got, append(body, body...)) {
			t.Fatalf("POST of %d bytes: %d, %d bytes back, want 200, %d", len(body), resp.StatusCode, len(got), 2*len(body))
		}
	}
	if n := o.conns.Load(); n != 1 {
		t.Errorf("origin saw %d connections, want 1", n)
	}
}

// TestHTTPSUpstreamStaleKeepAliveRetried: the origin takes the second
// request of a kept-alive TLS connection and closes it without an answer
// (close_notify, FIN): a GET is replayed on a new connection, as over
// plain HTTP (TestProxyStaleKeepAliveRetried).
func TestHTTPSUpstreamStaleKeepAliveRetried(t *testing.T) {
	ca := newTestCA(t)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l = tls.NewListener(l, &tls.Config{Certificates: []tls.Certificate{ca.pair(t, "origin", "origin.test")}})
	var accepted atomic.Int32
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			n := accepted.Add(1)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				br := bufio.NewReader(c)
				for i := 1; ; i++ {
					req, err := http.ReadRequest(br)
					if err != nil || (n == 1 && i == 2) {
						return
					}
					if _, err := fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(req.URL.Path), req.URL.Path); err != nil {
						return
					}
				}
			}()
		}
	}()
	w := startWorker(t, nil, httpsRoute(l.Addr().String(), `"retries":0`))
	cl := keepAliveClient(t)
	for i := range 3 {
		if st, body := getHost(t, cl, w, "a.test", fmt.Sprintf("/g%d", i)); st != 200 || body != fmt.Sprintf("/g%d", i) {
			t.Fatalf("GET %d: %d %q", i, st, body)
		}
	}
	if n := accepted.Load(); n != 2 {
		t.Errorf("origin accepted %d connections, want 2", n)
	}
}

// TestHTTPSUpstreamHandshakeFailures: a node that does not answer the
// handshake within timeout.connect is a timeout (504); one that answers
// in plain HTTP a failed connect (502); both logged as nginx words them.
func TestHTTPSUpstreamHandshakeFailures(t *testing.T) {
	silent, _ := scriptedOrigin(t, func(_ int, c net.Conn, br *bufio.Reader) {
		_, _ = io.Copy(io.Discard, br)
	})
	plain, _ := scriptedOrigin(t, func(_ int, c net.Conn, br *bufio.Reader) {
		_, _ = c.Write([]byte("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n"))
	})
	cases := []struct {
		name, addr string
		status     int
		log        string
	}{
		{"silent", silent, 504, "upstream timed out while SSL handshaking to upstream"},
		{"plain", plain, 502, "SSL_do_handshake() failed while SSL handshaking to upstream"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var log syncBuffer
			route := httpsRoute(c.addr, `"retries":0,"timeout":{"connect":0.3,"send":5,"read":5}`)
			w, _ := runWorker(t, Config{Logger: slog.New(slog.NewTextHandler(&log, nil))}, testSpec(t, nil, route))
			start := time.Now()
			st, _ := getHost(t, keepAliveClient(t), w, "a.test", "/")
			if st != c.status {
				t.Fatalf("status %d, want %d (log: %s)", st, c.status, log.String())
			}
			if d := time.Since(start); d > 3*time.Second {
				t.Errorf("answered after %v", d)
			}
			waitLog(t, &log, c.log)
		})
	}
}

// TestCompileUpstreamSchemes: https compiles; the schemes the worker does
// not proxy are refused by name, as are a tls.client_cert_id naming no
// ssl object and
// a client certificate and key that are no pair.
func TestCompileUpstreamSchemes(t *testing.T) {
	ca := newTestCA(t)
	c1, k1 := ca.issue(t, "one")
	_, k2 := ca.issue(t, "two")
	pair := func(c, k []byte) string {
		b, _ := json.Marshal(map[string]string{"client_cert": string(c), "client_key": string(k)})
		return string(b)
	}
	cases := []struct {
		scheme, tls string
		err         string
	}{
		{"https", "", ""},
		{"https", `{"verify":true}`, ""},
		{"https", pair(c1, k1), ""},
		{"https", pair(c1, k2), "tls.client_cert, tls.client_key"},
		{"grpc", "", `scheme "grpc" is not supported`},
		{"grpcs", "", `scheme "grpcs" is not supported`},
		{"kafka", "", `scheme "kafka" is not supported`},
		{"tcp", "", `scheme "tcp" is not supported`},
		{"udp", "", `scheme "udp" is not supported`},
		{"tls", "", `scheme "tls" is not supported`},
	}
	for _, c := range cases {
		u := &spec.Upstream{Extra: &spec.UpstreamExtra{Scheme: c.scheme}, Nodes: spec.Nodes{List: []spec.Node{{Host: "127.0.0.1", Weight: 1}}}}
		if c.tls != "" {
			u.Extra.TLS = json.RawMessage(c.tls)
		}
		cu, err := compileUpstream(u, upstreamEnv{})
		switch {
		case c.err == "" && err != nil:
			t.Errorf("%s %s: %v", c.scheme, c.tls, err)
		case c.err != "" && (err == nil || !strings.Contains(err.Error(), c.err)):
			t.Errorf("%s %.40s: error %v, want one with %q", c.scheme, c.tls, err, c.err)
		case c.err == "" && (cu.tls == nil || cu.nodes[0].addr != "127.0.0.1:443" || string(cu.nodes[0].hostHeader) != "127.0.0.1"):
			t.Errorf("%s: tls %v, node %s, Host %s; want TLS to 127.0.0.1:443, Host 127.0.0.1", c.scheme, cu.tls, cu.nodes[0].addr, cu.nodes[0].hostHeader)
		}
	}
}
