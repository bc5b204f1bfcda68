package certs

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"io"
	"os"
	"testing"
)

// TestWrite: the server certificates are issued for ServerName by the CA,
// with the key type they are named for; the client certificate is for
// client authentication; the ticket key file has nginx's 80 bytes.
func TestWrite(t *testing.T) {
	s, err := Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM([]byte(s.CAPEM)) {
		t.Fatal("CA PEM not parsed")
	}
	for kind, p := range s.Server {
		pair, err := tls.LoadX509KeyPair(p.CertFile, p.KeyFile)
		if err != nil {
			t.Fatalf("%s: %v", kind, err)
		}
		leaf := pair.Leaf
		if _, err := leaf.Verify(x509.VerifyOptions{DNSName: ServerName, Roots: roots}); err != nil {
			t.Errorf("%s: %v", kind, err)
		}
		switch k := leaf.PublicKey.(type) {
		case *ecdsa.PublicKey:
			if kind != ECDSA || k.Curve.Params().BitSize != 256 {
				t.Errorf("%s: ECDSA key of %d bits", kind, k.Curve.Params().BitSize)
			}
		case *rsa.PublicKey:
			if kind != RSA || k.N.BitLen() != 2048 {
				t.Errorf("%s: RSA key of %d bits", kind, k.N.BitLen())
			}
		}
	}
	if len(s.Server) != 2 {
		t.Errorf("server certificates: %d, want ecdsa and rsa", len(s.Server))
	}
	cl, err := tls.X509KeyPair([]byte(s.Client.CertPEM), []byte(s.Client.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cl.Leaf.Verify(x509.VerifyOptions{Roots: roots, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
		t.Errorf("client certificate: %v", err)
	}
	if b, err := os.ReadFile(s.TicketKeyFile); err != nil || len(b) != 80 {
		t.Errorf("ticket key: %d bytes, %v", len(b), err)
	}
	if again, err := Write(t.TempDir()); err != nil || again.CAPEM == s.CAPEM {
		t.Errorf("a second Set has the same CA (%v)", err)
	}
}

// TestClientConfig: against a server that requires a client certificate
// from the CA, the mTLS configuration gets through and the other does
// not; the session cache resumes; the key exchange is X25519.
func TestClientConfig(t *testing.T) {
	s, err := Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.LoadX509KeyPair(s.Server[ECDSA].CertFile, s.Server[ECDSA].KeyFile)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM([]byte(s.CAPEM))
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				_, _ = io.Copy(c, c)
			}()
		}
	}()
	dial := func(mtls, resume bool, cfg *tls.Config) (tls.ConnectionState, error) {
		if cfg == nil {
			if cfg, err = s.ClientConfig(mtls, resume); err != nil {
				t.Fatal(err)
			}
		}
		c, err := tls.Dial("tcp", ln.Addr().String(), cfg)
		if err != nil {
			return tls.ConnectionState{}, err
		}
		defer c.Close()
		// The server's verdict on the client certificate comes with its
		// first answer in TLS 1.3.
		if _, err := c.Write([]byte("ping")); err != nil {
			return tls.ConnectionState{}, err
		}
		b := make([]byte, 4)
		if _, err := io.ReadFull(c, b); err != nil || !bytes.Equal(b, []byte("ping")) {
			return tls.ConnectionState{}, err
		}
		return c.ConnectionState(), nil
	}
	if _, err := dial(false, false, nil); err == nil {
		t.Error("a client without a certificate got through")
	}
	cfg, err := s.ClientConfig(true, true)
	if err != nil {
		t.Fatal(err)
	}
	first, err := dial(true, true, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if first.Version != tls.VersionTLS13 || first.CurveID != tls.X25519 || first.ServerName != ServerName || first.DidResume {
		t.Errorf("first connection: version %x curve %v SNI %q resumed %v", first.Version, first.CurveID, first.ServerName, first.DidResume)
	}
	second, err := dial(true, true, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if !second.DidResume {
		t.Error("second connection did not resume from the session cache")
	}
}
