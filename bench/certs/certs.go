// Package certs writes the benchmark's TLS material, made afresh for each
// run into its temporary directory: a CA, a server certificate for each key
// type the TLS scenarios compare (ECDSA P-256 and RSA-2048) signed by it, a
// client certificate for mutual TLS, and an nginx session ticket key file.
// Both gateways are given the same files. Nothing is committed: the keys
// live only as long as the run's directory.
//
// The functions are safe for concurrent use; Set is plain data.
package certs

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
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"time"
)

// ServerName is the name the server certificates are issued for, the SNI
// the load generator sends and the gateways' certificate table is keyed by.
const ServerName = "bench.test"

// Key types of the server certificates.
const (
	ECDSA = "ecdsa" // P-256
	RSA   = "rsa"   // 2048 bits
)

// Pair is a certificate and its private key, as PEM and as files.
type Pair struct {
	CertFile, KeyFile string
	CertPEM, KeyPEM   string
}

// Set is the run's TLS material.
type Set struct {
	CAFile, CAPEM string
	Server        map[string]Pair // by key type: ECDSA, RSA
	Client        Pair            // issued by the CA for client authentication
	// TicketKeyFile holds 80 random bytes, nginx's
	// ssl_session_ticket_key format (AES-256 and HMAC-SHA256 keys).
	TicketKeyFile string
}

// Write makes a new Set and writes its files into dir.
func Write(dir string) (*Set, error) {
	now := time.Now()
	caKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	caTmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: "coregate bench CA"},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(7 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	caDER, err := x509.CreateCertificate(rand.Reader, caTmpl, caTmpl, caKey.Public(), caKey)
	if err != nil {
		return nil, fmt.Errorf("certs: CA: %w", err)
	}
	ca, err := x509.ParseCertificate(caDER)
	if err != nil {
		return nil, err
	}
	s := &Set{Server: map[string]Pair{}}
	s.CAPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER}))
	s.CAFile = filepath.Join(dir, "ca.pem")
	if err := os.WriteFile(s.CAFile, []byte(s.CAPEM), 0o644); err != nil {
		return nil, err
	}
	issue := func(name string, serial int64, key crypto.Signer, usage x509.ExtKeyUsage) (Pair, error) {
		tmpl := &x509.Certificate{
			SerialNumber: big.NewInt(serial),
			Subject:      pkix.Name{CommonName: ServerName},
			DNSNames:     []string{ServerName},
			NotBefore:    now.Add(-time.Hour),
			NotAfter:     now.Add(7 * 24 * time.Hour),
			KeyUsage:     x509.KeyUsageDigitalSignature,
			ExtKeyUsage:  []x509.ExtKeyUsage{usage},
		}
		if _, ok := key.(*rsa.PrivateKey); ok {
			tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
		}
		der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, key.Public(), caKey)
		if err != nil {
			return Pair{}, fmt.Errorf("certs: %s: %w", name, err)
		}
		kder, err := x509.MarshalPKCS8PrivateKey(key)
		if err != nil {
			return Pair{}, fmt.Errorf("certs: %s key: %w", name, err)
		}
		p := Pair{
			CertFile: filepath.Join(dir, name+".pem"),
			KeyFile:  filepath.Join(dir, name+".key"),
			CertPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
			KeyPEM:   string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder})),
		}
		if err := os.WriteFile(p.CertFile, []byte(p.CertPEM), 0o644); err != nil {
			return Pair{}, err
		}
		return p, os.WriteFile(p.KeyFile, []byte(p.KeyPEM), 0o600)
	}
	ecKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if s.Server[ECDSA], err = issue("server-ecdsa", 2, ecKey, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		return nil, err
	}
	if s.Server[RSA], err = issue("server-rsa", 3, rsaKey, x509.ExtKeyUsageServerAuth); err != nil {
		return nil, err
	}
	clKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	if s.Client, err = issue("client", 4, clKey, x509.ExtKeyUsageClientAuth); err != nil {
		return nil, err
	}
	ticket := make([]byte, 80)
	if _, err := rand.Read(ticket); err != nil {
		return nil, err
	}
	s.TicketKeyFile = filepath.Join(dir, "ticket.key")
	if err := os.WriteFile(s.TicketKeyFile, ticket, 0o600); err != nil {
		return nil, err
	}
	return s, nil
}

// ClientConfig returns the load generator's configuration: TLS 1.3 only,
// SNI ServerName, X25519 as the only key exchange (so that a server that
// prefers a post-quantum hybrid does not do more work than one that cannot:
// both do what nginx with OpenSSL 3.0 does), the client certificate
// offered when mtls is set, and a session cache when resume is set, so
// that each new connection offers the ticket of an earlier one. The
// server's certificate is not verified, as wrk does not: the handshake's
// signature still is, the cost every client pays. Each call returns a new
// configuration with a cache of its own.
func (s *Set) ClientConfig(mtls, resume bool) (*tls.Config, error) {
	c := &tls.Config{
		ServerName:         ServerName,
		MinVersion:         tls.VersionTLS13,
		MaxVersion:         tls.VersionTLS13,
		CurvePreferences:   []tls.CurveID{tls.X25519},
		InsecureSkipVerify: true,
	}
	if mtls {
		cert, err := tls.X509KeyPair([]byte(s.Client.CertPEM), []byte(s.Client.KeyPEM))
		if err != nil {
			return nil, fmt.Errorf("certs: client certificate: %w", err)
		}
		c.Certificates = []tls.Certificate{cert}
	}
	if resume {
		c.ClientSessionCache = tls.NewLRUClientSessionCache(256)
	}
	return c, nil
}
