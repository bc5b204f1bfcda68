// Package testcert makes certificates and keys for tests: a CA, server and
// client certificates it signs, RSA or ECDSA, in PEM as ssl objects hold
// them. Only tests import it.
//
// Its functions are safe for concurrent use.
package testcert

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"sync/atomic"
	"testing"
	"time"
)

// Cert is a certificate and its private key.
type Cert struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM string // the certificate alone
	KeyPEM  string // PKCS#8
	// ChainPEM is the certificate followed by its issuers' up to, not
	// including, the self-signed root: what a server or client sends.
	ChainPEM string
	chain    [][]byte
}

// Options says what to make. The zero value is an ECDSA P-256 server
// certificate for no name, valid for a day.
type Options struct {
	Subject  pkix.Name
	DNSNames []string
	RSA      bool // an RSA 2048 key rather than ECDSA P-256
	CA       bool // a CA certificate
	Client   bool // for client authentication rather than server
	Serial   int64
}

var serial atomic.Int64

// New makes a certificate signed by parent, or self-signed when parent is
// nil. It fails t on any error.
func New(t testing.TB, o Options, parent *Cert) *Cert {
	t.Helper()
	var key crypto.Signer
	var err error
	if o.RSA {
		key, err = rsa.GenerateKey(rand.Reader, 2048)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	n := o.Serial
	if n == 0 {
		n = 0x1000 + serial.Add(1)
	}
	tpl := &x509.Certificate{
		SerialNumber: big.NewInt(n),
		Subject:      o.Subject,
		DNSNames:     o.DNSNames,
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
	}
	if o.RSA {
		tpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	switch {
	case o.CA:
		tpl.IsCA, tpl.BasicConstraintsValid = true, true
		tpl.KeyUsage |= x509.KeyUsageCertSign
	case o.Client:
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		tpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	signer, issuer := key, tpl
	if parent != nil {
		signer, issuer = parent.Key, parent.Cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tpl, issuer, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cert{Key: key}
	if c.Cert, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c.CertPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	c.KeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))
	c.chain = [][]byte{der}
	c.ChainPEM = c.CertPEM
	if parent != nil && parent.Cert.Issuer.String() != parent.Cert.Subject.String() {
		c.chain = append(c.chain, parent.chain...)
		c.ChainPEM += parent.ChainPEM
	}
	return c
}

// TLS returns the certificate as crypto/tls takes it: the chain (without
// the root) and the key.
func (c *Cert) TLS() tls.Certificate {
	return tls.Certificate{Certificate: c.chain, PrivateKey: c.Key, Leaf: c.Cert}
}

// Pool returns a pool holding the certificate alone, a CA's for clients
// to trust.
func (c *Cert) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(c.Cert)
	return p
}
