package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net/http"
	"time"
)

// Verify returns $ssl_client_verify of a connection the Entry's
// configuration served: "NONE" without a client certificate, "SUCCESS"
// when it verifies against client.ca within client.depth, else "FAILED:"
// and OpenSSL's reason ("FAILED:unable to get local issuer certificate").
// An Entry without client verification gives "NONE" whatever the client
// sent, as nginx without ssl_verify_client. Where the handshake verified
// the certificate (no skip_mtls_uri_regex) it costs nothing; otherwise it
// verifies the chain: call it once per connection, after the handshake
// and off the event loop, and keep the answer. Safe for concurrent use.
func (e *Entry) Verify(st *tls.ConnectionState) string {
	if e == nil || e.client == nil || len(st.PeerCertificates) == 0 {
		return "NONE"
	}
	if len(st.VerifiedChains) > 0 {
		if e.client.deepEnough(st.VerifiedChains) {
			return "SUCCESS"
		}
		return "FAILED:certificate chain too long"
	}
	inter := x509.NewCertPool()
	for _, c := range st.PeerCertificates[1:] {
		inter.AddCert(c)
	}
	chains, err := st.PeerCertificates[0].Verify(x509.VerifyOptions{
		Roots:         e.client.pool,
		Intermediates: inter,
		KeyUsages:     []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		CurrentTime:   time.Now(),
	})
	if err != nil {
		return "FAILED:" + reason(err, st.PeerCertificates[0])
	}
	if !e.client.deepEnough(chains) {
		return "FAILED:certificate chain too long"
	}
	return "SUCCESS"
}

// reason is OpenSSL's X509_verify_cert_error_string of a verification
// error, as nginx puts it in $ssl_client_verify.
func reason(err error, leaf *x509.Certificate) string {
	var inv x509.CertificateInvalidError
	var ua x509.UnknownAuthorityError
	switch {
	case errors.As(err, &inv):
		switch inv.Reason {
		case x509.Expired:
			if time.Now().Before(leaf.NotBefore) {
				return "certificate is not yet valid"
			}
			return "certificate has expired"
		case x509.IncompatibleUsage:
			return "unsupported certificate purpose"
		case x509.NotAuthorizedToSign:
			return "invalid CA certificate"
		case x509.TooManyIntermediates:
			return "certificate chain too long"
		}
	case errors.As(err, &ua):
		if bytes.Equal(leaf.RawIssuer, leaf.RawSubject) && leaf.CheckSignature(leaf.SignatureAlgorithm, leaf.RawTBSCertificate, leaf.Signature) == nil {
			return "self-signed certificate"
		}
		return "unable to get local issuer certificate"
	}
	return "certificate signature failure"
}

// HasClient reports whether the Entry verifies clients (client.ca).
func (e *Entry) HasClient() bool { return e != nil && e.client != nil }

// CheckClient is APISIX's mTLS check of a request on an HTTPS connection
// (init.lua verify_https_client): hs is the Entry the handshake served
// (nil: none), verify the connection's $ssl_client_verify (Entry.Verify),
// sni the handshake's server name (fallback_sni when the client sent
// none, lowercased), host the request's $host and uri its $uri. It
// returns 0 when the request goes on, else the status APISIX answers
// with its empty body (nginx's page): 400 when
//
//   - hs verifies clients with skip_mtls_uri_regex, no pattern matches
//     uri, and verify is not SUCCESS;
//   - the object host matches verifies clients and host is not the SNI
//     the certificate was verified with.
//
// (A resumed session was checked in the handshake: a ticket resumes only
// with the object and the name it was made for.) It neither allocates nor
// blocks: safe on the event loop, and for concurrent use.
func (t *Table) CheckClient(hs *Entry, verify string, sni string, host, uri []byte) int {
	if hs != nil && hs.client != nil && len(hs.client.skip) > 0 && verify != "SUCCESS" && !hs.client.skipped(uri) {
		return http.StatusBadRequest
	}
	e := t.matchBytes(host)
	if e == nil || e.client == nil {
		return 0
	}
	if sni != string(host) {
		return http.StatusBadRequest
	}
	return 0
}

// skipped reports whether uri matches one of skip_mtls_uri_regex.
func (c *client) skipped(uri []byte) bool {
	for _, re := range c.skip {
		if re.Match(uri) {
			return true
		}
	}
	return false
}
