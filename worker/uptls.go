package worker

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/panjf2000/gnet/v2"

	"coregate/admin/spec"
	"coregate/tlsrec"
)

// upstreamTLS is the TLS side of a compiled scheme: https upstream (its
// tls object): whether the node's certificate is verified, the client
// certificate offered, and ident, what a connection's identity depends on
// besides the node and the server name, which the pool key carries.
type upstreamTLS struct {
	verify bool
	certs  []tls.Certificate
	ident  string
	// certID is the ssl object of client_cert_id: an upstream that names
	// one is compiled again with each configuration, for the object may
	// have changed. fault: it names no ssl object of type client, and
	// every connection to the upstream fails with it (Worker.dial).
	certID string
	fault  error
}

// upstreamTLSConf is an upstream's tls object as APISIX writes it.
type upstreamTLSConf struct {
	Verify       bool     `json:"verify"`
	ClientCert   string   `json:"client_cert"`
	ClientKey    string   `json:"client_key"`
	ClientCertID *spec.ID `json:"client_cert_id"`
}

// compileUpstreamTLS builds the TLS side of upstream u (scheme https).
// client_cert_id names an ssl object of type client of the Spec (ue.ssl),
// whose cert and key are offered, as APISIX does; otherwise client_cert
// and client_key. A key stored encrypted (apisix.data_encryption) is
// decrypted with ue.decrypt. A certificate and key that do not make a
// pair, or an id that names no client object, are refused.
func compileUpstreamTLS(u *spec.Upstream, ue upstreamEnv) (*upstreamTLS, error) {
	decrypt := ue.decrypt
	var c upstreamTLSConf
	if len(u.Rare().TLS) > 0 {
		if err := json.Unmarshal(u.Rare().TLS, &c); err != nil {
			return nil, fmt.Errorf("upstream tls: %w", err)
		}
	}
	t := &upstreamTLS{verify: c.Verify}
	sum := sha256.New()
	if c.ClientCertID != nil {
		id := c.ClientCertID.String()
		var sl *spec.SSL
		if ue.ssl != nil {
			sl = ue.ssl(id)
		}
		t.certID = id
		sum.Write([]byte("ssl " + id + "\n"))
		switch {
		case sl == nil:
			// Deleted after the upstream was written: every connection
			// to its nodes fails (502), as APISIX's does, and the rest
			// of the configuration is served.
			t.fault = fmt.Errorf("failed to get ssl cert: ssl id [%s] not exits", id)
		case !sl.IsClient():
			t.fault = errors.New("failed to get ssl cert: ssl type should be 'client'")
		default:
			c.ClientCert, c.ClientKey = sl.Cert, sl.Key
			// References read as APISIX reads them before the handshake
			// (fetch_secrets); one that does not resolve fails every
			// connection, as a deleted object does.
			if ue.resolve != nil {
				var err error
				if c.ClientCert, _, err = ue.resolve(c.ClientCert); err == nil {
					c.ClientKey, _, err = ue.resolve(c.ClientKey)
				}
				if err != nil {
					t.fault = fmt.Errorf("failed to get ssl cert: ssl id [%s]: %w", id, err)
					c.ClientCert, c.ClientKey = "", ""
				}
			}
		}
	}
	if c.Verify {
		sum.Write([]byte("verify\n"))
	}
	if c.ClientCert != "" || c.ClientKey != "" {
		if decrypt != nil {
			k, err := decrypt("tls.client_key", c.ClientKey)
			if err != nil {
				return nil, fmt.Errorf("upstream tls.client_key: %w", err)
			}
			c.ClientKey = k
		}
		pair, err := tls.X509KeyPair([]byte(c.ClientCert), []byte(c.ClientKey))
		if err != nil {
			return nil, fmt.Errorf("upstream tls.client_cert, tls.client_key: %w", err)
		}
		t.certs = []tls.Certificate{pair}
		sum.Write([]byte(c.ClientCert))
	}
	t.ident = hex.EncodeToString(sum.Sum(nil)[:8])
	return t, nil
}

// upstreamSuites are the TLS 1.2 cipher suites offered to https
// upstreams: those the record layer continues (tlsrec.New). TLS 1.3's
// are all of them.
var upstreamSuites = []uint16{
	tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
}

// tlsConfig is the crypto/tls configuration of the connections of a pool
// to an https node, made for server name name: SNI (none for an IP
// address, which crypto/tls leaves out itself, RFC 6066) and the name the
// certificate is verified for, against the worker's trusted CAs
// (Config.UpstreamCAs), when tls.verify is on. The client certificate is
// sent whenever the node asks for one, whatever CAs it names, as nginx
// sends proxy_ssl_certificate.
func (t *upstreamTLS) tlsConfig(name string, roots *x509.CertPool) *tls.Config {
	cfg := &tls.Config{
		ServerName:         name,
		InsecureSkipVerify: !t.verify, //nolint:gosec // tls.verify: false (APISIX's default) asks for it
		MinVersion:         tls.VersionTLS12,
		CipherSuites:       upstreamSuites,
		RootCAs:            roots,
	}
	if len(t.certs) > 0 {
		cert := &t.certs[0]
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) {
			return cert, nil
		}
	}
	return cfg
}

// serverName is the name a TLS connection to the upstream is made for:
// the Host the request goes upstream with (host), without its port and
// an IPv6 address's brackets, as nginx's proxy_ssl_name $upstream_host
// makes it.
func serverName(dst, host []byte) []byte {
	h := host
	if len(h) > 0 && h[0] == '[' {
		for i, c := range h {
			if c == ']' {
				return append(dst, h[1:i]...)
			}
		}
		return append(dst, h...)
	}
	for i, c := range h {
		if c == ':' {
			h = h[:i]
			break
		}
	}
	return append(dst, h...)
}

// upTLS is the TLS layer of a connection to an https node: the handshake,
// run by crypto/tls's client on a goroutine of its own (upHandshake)
// while the loop owns the socket, then the records, protected and
// unprotected on the loop (recordStream), which are the upConn's io once
// the handshake is done, as a client connection's tlsConn is.
// Back-pressure (pause.go) goes on acting on the socket (upConn.c).
// Owned by the loop.
type upTLS struct {
	recordStream
	uc *upConn
	hs *upHandshake
}

// upHandshake is one TLS handshake with a node in progress: crypto/tls's
// client on a goroutine of its own, over a tlsrec.HandshakeConn the loop
// feeds with the node's records as they arrive. What crypto/tls writes,
// and the end of the handshake, reach the loop as tasks, in the order
// they were made; a task finds its connection through the upTLS, whose hs
// must still be this handshake.
type upHandshake struct {
	pipe
	t *upTLS
	// closed: the connection closed while the handshake ran (closeErr
	// as gnet reported it); done fails the attempt.
	closed   bool
	closeErr error
}

// errNotTLS is the cause logged for a node that answered the handshake
// with something else than TLS records.
var errNotTLS = errors.New("the upstream answered with no TLS record")

// handshakeCloseErr is the cause logged for a connection closed during
// its handshake, with err as gnet reports the close.
func handshakeCloseErr(err error) error {
	if err == nil || errors.Is(err, io.EOF) {
		return errors.New("the upstream closed the connection")
	}
	return err
}

// startTLS begins the handshake of a connection just connected to an
// https node; connect timeout bounds it (nginx's proxy_connect_timeout
// bounds the SSL handshake as it bounds the connect). handshakeDone
// follows, on the loop.
func (uc *upConn) startTLS(timeout int64) {
	t := uc.tls
	if t == nil {
		t = &upTLS{uc: uc}
		uc.tls = t
	}
	t.recordStream.reset(uc.w, uc.c)
	hs := &upHandshake{t: t}
	hs.init(uc.w.loop, uc.c, func() bool { return t.hs == hs && !uc.gone })
	cfg := uc.pool.tls.Clone()
	cfg.KeyLogWriter = &hs.sec
	hs.tc = tls.Client(hs.hc, cfg)
	t.hs = hs
	uc.w.setDeadline(uc, timeout)
	uc.w.goHandshake(func() { hs.run(nil, hs.done) })
}

// feedClient feeds the handshake with the node's records.
func (hs *upHandshake) feedClient() gnet.Action {
	if hs.feed() {
		// Not TLS: closedByPeer ends the attempt.
		hs.t.uc.setFault(faultHandshake, errNotTLS)
		return gnet.Close
	}
	return gnet.None
}

// abortClient ends the handshake: its goroutine's read returns, and its
// tasks find it gone.
func (hs *upHandshake) abortClient() {
	hs.t.hs = nil
	hs.abort()
}

// done runs on the loop when the handshake ended: the record layer takes
// over, with the node's records that came after its Finished, and the
// connection is ready (upConn.ready).
func (hs *upHandshake) done(err error) {
	t := hs.t
	if t.hs != hs {
		return // the connection closed, or the handshake timed out
	}
	uc := t.uc
	t.hs = nil
	if hs.closed {
		if err == nil || errors.Is(err, net.ErrClosed) || errors.Is(err, io.EOF) {
			err = handshakeCloseErr(hs.closeErr)
		}
		uc.handshakeFailed(err)
		return
	}
	if err == nil {
		state := hs.tc.ConnectionState()
		var rec *tlsrec.Conn
		if rec, err = tlsrec.New(&state, true, &hs.sec); err == nil {
			err = t.start(rec, hs.hc.Rest())
		}
	}
	if err != nil {
		uc.handshakeFailed(err)
		return
	}
	uc.w.clearDeadline(uc)
	uc.io = t
	uc.ready()
}

// handshakeFailed ends a connection whose handshake failed: for its
// request, a connect that failed (502, and the next node per retries).
func (uc *upConn) handshakeFailed(err error) {
	if hs := uc.tls.hs; hs != nil {
		hs.abortClient()
	}
	cc := uc.cc
	unlink(cc, uc)
	uc.w.dropDeadline(uc)
	uc.close()
	if cc != nil {
		uc.setFault(faultHandshake, err)
		cc.upstreamFailed(uc, 502)
	}
}

// handshakeExpired: the handshake took longer than the connect timeout
// (504, as nginx's "upstream timed out ... while SSL handshaking").
func (uc *upConn) handshakeExpired() {
	uc.tls.hs.abortClient()
	cc := uc.cc
	unlink(cc, uc)
	uc.close()
	if cc != nil {
		uc.setFault(faultSlowTLS, nil)
		cc.upstreamFailed(uc, 504)
	}
}
