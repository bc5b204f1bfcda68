package tlsrec

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"io"
	"math"
	"math/big"
	"net"
	"sync"
	"testing"
	"time"
)

var (
	certsOnce          sync.Once
	ecCert, rsaCert    tls.Certificate
	clientCert         tls.Certificate
	clientCAs, rootCAs *x509.CertPool
)

func makeCert(t testing.TB, key crypto.Signer, cn string) (tls.Certificate, *x509.Certificate) {
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		DNSNames: []string{cn}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour),
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage:    x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key, Leaf: c}, c
}

// certs makes the test certificates once: an ECDSA and an RSA server
// certificate for "localhost", and a client certificate.
func certs(t testing.TB) {
	certsOnce.Do(func() {
		ek, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		rk, err := rsa.GenerateKey(rand.Reader, 2048)
		if err != nil {
			t.Fatal(err)
		}
		ck, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
		var ec, rc, cc *x509.Certificate
		ecCert, ec = makeCert(t, ek, "localhost")
		rsaCert, rc = makeCert(t, rk, "localhost")
		clientCert, cc = makeCert(t, ck, "client")
		rootCAs = x509.NewCertPool()
		rootCAs.AddCert(ec)
		rootCAs.AddCert(rc)
		clientCAs = x509.NewCertPool()
		clientCAs.AddCert(cc)
	})
}

// kase is one configuration of the tests: a version, a suite, and the
// certificate the suite needs.
type kase struct {
	name    string
	version uint16
	suite   uint16 // TLS 1.2 only: crypto/tls chooses TLS 1.3's
	rsa     bool
}

var cases = []kase{
	{"TLS13", tls.VersionTLS13, 0, false},
	{"TLS12-ECDSA-AES128", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256, false},
	{"TLS12-ECDSA-AES256", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384, false},
	{"TLS12-ECDSA-CHACHA", tls.VersionTLS12, tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256, false},
	{"TLS12-RSA-AES128", tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256, true},
	{"TLS12-RSA-AES256", tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384, true},
	{"TLS12-RSA-CHACHA", tls.VersionTLS12, tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256, true},
}

func (k kase) server(t testing.TB) *tls.Config {
	certs(t)
	c := &tls.Config{MinVersion: k.version, MaxVersion: k.version, Certificates: []tls.Certificate{ecCert}}
	if k.rsa {
		c.Certificates = []tls.Certificate{rsaCert}
	}
	if k.suite != 0 {
		c.CipherSuites = []uint16{k.suite}
	}
	return c
}

func (k kase) client(t testing.TB) *tls.Config {
	certs(t)
	// A session cache makes a TLS 1.3 server send tickets.
	c := &tls.Config{MinVersion: k.version, MaxVersion: k.version, RootCAs: rootCAs, ServerName: "localhost",
		ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	if k.suite != 0 {
		c.CipherSuites = []uint16{k.suite}
	}
	return c
}

// tcpPair returns the two ends of a loopback TCP connection on a free port.
func tcpPair(t testing.TB) (net.Conn, net.Conn) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	acc := make(chan net.Conn, 1)
	go func() {
		c, _ := ln.Accept()
		acc <- c
	}()
	a, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b := <-acc
	if b == nil {
		t.Fatal("accept failed")
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// side is our end of a connection, driven the way an event loop drives
// it: one goroutine reads the socket into chunks, the test goroutine feeds
// the handshake whole records and then opens and seals with a Conn.
type side struct {
	t      testing.TB
	sock   net.Conn
	chunks chan []byte
	conn   *Conn
	state  tls.ConnectionState
	in     []byte
	rest   int // bytes of application records fed with the handshake's last
}

const waitLimit = 10 * time.Second

func reader(sock net.Conn) chan []byte {
	ch := make(chan []byte, 64)
	go func() {
		defer close(ch)
		buf := make([]byte, 64<<10)
		for {
			n, err := sock.Read(buf)
			if n > 0 {
				ch <- bytes.Clone(buf[:n])
			}
			if err != nil {
				return
			}
		}
	}()
	return ch
}

// handshake runs a crypto/tls handshake over a HandshakeConn on sock and
// makes the Conn that continues it. cfg gets the Secrets as its key log
// (and prep, when not nil, may hook it further).
func handshake(t testing.TB, sock net.Conn, cfg *tls.Config, isClient bool, prep func(*Secrets, *tls.Config)) (*side, error) {
	s := &Secrets{}
	cfg = cfg.Clone()
	cfg.KeyLogWriter = s
	if prep != nil {
		prep(s, cfg)
	}
	hc := NewHandshakeConn(s, func(b []byte) { sock.Write(b) })
	hc.SetAddrs(sock.LocalAddr(), sock.RemoteAddr())
	var tc *tls.Conn
	if isClient {
		tc = tls.Client(hc, cfg)
	} else {
		tc = tls.Server(hc, cfg)
	}
	done := make(chan error, 1)
	go func() { done <- tc.Handshake() }()
	chunks := reader(sock)
	live := chunks
	var buf []byte
	timeout := time.After(waitLimit)
	for {
		select {
		case c, ok := <-live:
			if !ok {
				hc.Close()
				live = nil
				continue
			}
			buf = append(buf, c...)
			n := 0
			for {
				k := RecordLen(buf[n:])
				if k < 0 {
					t.Fatalf("peer sent a malformed record: % x", buf[n:min(len(buf), n+8)])
				}
				if k == 0 {
					break
				}
				n += k
			}
			hc.Feed(buf[:n])
			buf = bytes.Clone(buf[n:])
		case err := <-done:
			if err != nil {
				return nil, err
			}
			st := tc.ConnectionState()
			conn, err := New(&st, isClient, s)
			if err != nil {
				return nil, err
			}
			rest := hc.Rest()
			return &side{t: t, sock: sock, chunks: chunks, conn: conn, state: st, rest: len(rest),
				in: append(bytes.Clone(rest), buf...)}, nil
		case <-timeout:
			hc.Close()
			t.Fatal("handshake did not end")
		}
	}
}

// read opens records until it has at least want bytes of application
// data, an error, or the time limit.
func (s *side) read(want int) ([]byte, error) {
	var out []byte
	timeout := time.After(waitLimit)
	for {
		o, used, err := s.conn.Open(out, s.in, math.MaxInt)
		out = o
		s.in = s.in[used:]
		if err != nil || len(out) >= want {
			return out, err
		}
		select {
		case c, ok := <-s.chunks:
			if !ok {
				return out, io.ErrUnexpectedEOF
			}
			s.in = append(s.in, c...)
		case <-timeout:
			return out, errors.New("timed out")
		}
	}
}

func (s *side) write(b []byte) {
	if _, err := s.sock.Write(b); err != nil {
		s.t.Fatal(err)
	}
}

// pair makes our end (role isClient) and a crypto/tls peer on loopback and
// runs their handshake.
func pair(t testing.TB, k kase, isClient bool, ours, peers *tls.Config, prep func(*Secrets, *tls.Config)) (*side, *tls.Conn) {
	a, b := tcpPair(t)
	var peer *tls.Conn
	if isClient {
		peer = tls.Server(b, peers)
	} else {
		peer = tls.Client(b, peers)
	}
	perr := make(chan error, 1)
	go func() { perr <- peer.Handshake() }()
	s, err := handshake(t, a, ours, isClient, prep)
	if err != nil {
		t.Fatalf("%s: our handshake: %v", k.name, err)
	}
	if err := <-perr; err != nil {
		t.Fatalf("%s: peer handshake: %v", k.name, err)
	}
	if s.state.Version != k.version || (k.suite != 0 && s.state.CipherSuite != k.suite) {
		t.Fatalf("%s: negotiated %s %s", k.name, tls.VersionName(s.state.Version), tls.CipherSuiteName(s.state.CipherSuite))
	}
	return s, peer
}

// configs returns our and the peer's configuration for a role.
func configs(t testing.TB, k kase, isClient bool) (ours, peers *tls.Config) {
	if isClient {
		return k.client(t), k.server(t)
	}
	return k.server(t), k.client(t)
}

func roleName(isClient bool) string {
	if isClient {
		return "client"
	}
	return "server"
}

// peerRead reads n bytes from a crypto/tls conn on a goroutine.
func peerRead(c *tls.Conn, n int) chan []byte {
	ch := make(chan []byte, 1)
	go func() {
		b := make([]byte, n)
		c.SetReadDeadline(time.Now().Add(waitLimit))
		m, err := io.ReadFull(c, b)
		if err != nil {
			ch <- append(b[:m:m], []byte("ERROR: "+err.Error())...)
			return
		}
		ch <- b
	}()
	return ch
}

// records splits b into records with RecordLen.
func records(t testing.TB, b []byte) [][]byte {
	var rs [][]byte
	for len(b) > 0 {
		n := RecordLen(b)
		if n <= 0 {
			t.Fatalf("not whole records: RecordLen %d", n)
		}
		rs = append(rs, b[:n])
		b = b[n:]
	}
	return rs
}

func pattern(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = seed + byte(i*7) + byte(i>>8)
	}
	return b
}
