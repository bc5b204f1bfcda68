package tlsconf

import (
	"crypto/sha1"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/base64"
	"encoding/hex"
)

// Var appends to dst the value of nginx's TLS variable name on a
// connection in state st, in nginx's format, and reports whether name is
// one (an empty value otherwise, as nginx's for a connection without a
// client certificate):
//
//	ssl_server_name         the SNI the client sent
//	ssl_protocol            TLSv1.2, TLSv1.3
//	ssl_cipher              OpenSSL's name: ECDHE-RSA-AES128-GCM-SHA256, TLS_AES_128_GCM_SHA256
//	ssl_session_reused      r when resumed, else .
//	ssl_client_verify       NONE or SUCCESS as the handshake left it (see Entry.Verify, which the
//	                        connection should keep where the handshake did not verify)
//	ssl_client_s_dn         the client certificate's subject, RFC 2253 (CN=c,O=Org,C=US)
//	ssl_client_i_dn         its issuer, alike
//	ssl_client_serial       its serial number, hex, upper case, two digits a byte
//	ssl_client_fingerprint  the SHA-1 of its DER, hex, lower case
//	ssl_client_raw_cert     it in PEM
//	ssl_client_cert         it in PEM, every line after the first led by a tab
//	ssl_client_escaped_cert it in PEM, URL-encoded
//
// Only the DNs allocate (the name is parsed): a connection that logs them
// on every request should keep them. Safe for concurrent use.
func Var(name string, st *tls.ConnectionState, dst []byte) ([]byte, bool) {
	var leaf *x509.Certificate
	if st != nil && len(st.PeerCertificates) > 0 {
		leaf = st.PeerCertificates[0]
	}
	switch name {
	case "ssl_server_name":
		if st != nil {
			dst = append(dst, st.ServerName...)
		}
	case "ssl_protocol":
		if st != nil {
			switch st.Version {
			case tls.VersionTLS12:
				dst = append(dst, "TLSv1.2"...)
			case tls.VersionTLS13:
				dst = append(dst, "TLSv1.3"...)
			}
		}
	case "ssl_cipher":
		if st != nil {
			dst = append(dst, openSSLName[st.CipherSuite]...)
		}
	case "ssl_session_reused":
		if st != nil && st.DidResume {
			dst = append(dst, 'r')
		} else {
			dst = append(dst, '.')
		}
	case "ssl_client_verify":
		switch {
		case leaf == nil:
			dst = append(dst, "NONE"...)
		case len(st.VerifiedChains) > 0:
			dst = append(dst, "SUCCESS"...)
		default:
			dst = append(dst, "FAILED:unverified"...)
		}
	case "ssl_client_s_dn":
		if leaf != nil {
			dst = AppendDN(dst, leaf.RawSubject)
		}
	case "ssl_client_i_dn":
		if leaf != nil {
			dst = AppendDN(dst, leaf.RawIssuer)
		}
	case "ssl_client_serial":
		if leaf != nil {
			if leaf.SerialNumber.Sign() < 0 {
				dst = append(dst, '-')
			}
			var buf [32]byte // RFC 5280: at most 20 octets
			n := max(1, (leaf.SerialNumber.BitLen()+7)/8)
			if n > len(buf) {
				break
			}
			b := buf[len(buf)-n:]
			leaf.SerialNumber.FillBytes(b)
			for _, c := range b {
				dst = append(dst, upperHex[c>>4], upperHex[c&15])
			}
		}
	case "ssl_client_fingerprint":
		if leaf != nil {
			sum := sha1.Sum(leaf.Raw)
			dst = hex.AppendEncode(dst, sum[:])
		}
	case "ssl_client_raw_cert", "ssl_client_cert", "ssl_client_escaped_cert":
		if leaf != nil {
			dst = appendPEM(dst, leaf.Raw, name)
		}
	default:
		return dst, false
	}
	return dst, true
}

const upperHex = "0123456789ABCDEF"

// appendPEM appends der as PEM_write_bio_X509 writes it (64 columns),
// in the form of the variable name.
func appendPEM(dst, der []byte, name string) []byte {
	line := func(s []byte, last bool) {
		for _, c := range s {
			if name == "ssl_client_escaped_cert" && !unreserved(c) {
				dst = append(dst, '%', upperHex[c>>4], upperHex[c&15])
			} else {
				dst = append(dst, c)
			}
		}
		if name == "ssl_client_escaped_cert" {
			dst = append(dst, "%0A"...)
		} else if !last {
			dst = append(dst, '\n')
			if name == "ssl_client_cert" {
				dst = append(dst, '\t')
			}
		} else if name == "ssl_client_raw_cert" {
			dst = append(dst, '\n')
		}
	}
	line([]byte("-----BEGIN CERTIFICATE-----"), false)
	var buf [64]byte
	enc := base64.StdEncoding
	for len(der) > 0 {
		n := min(len(der), 48)
		enc.Encode(buf[:], der[:n])
		line(buf[:enc.EncodedLen(n)], false)
		der = der[n:]
	}
	line([]byte("-----END CERTIFICATE-----"), true)
	return dst
}

// unreserved: what nginx's ngx_escape_uri leaves as it is in a URI
// component (NGX_ESCAPE_URI_COMPONENT).
func unreserved(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}

// dnNames are OpenSSL's short names of the attribute types it knows.
var dnNames = map[string]string{
	"2.5.4.3": "CN", "2.5.4.4": "SN", "2.5.4.5": "serialNumber", "2.5.4.6": "C", "2.5.4.7": "L",
	"2.5.4.8": "ST", "2.5.4.9": "street", "2.5.4.10": "O", "2.5.4.11": "OU", "2.5.4.12": "title",
	"2.5.4.17": "postalCode", "2.5.4.42": "GN", "2.5.4.43": "initials", "2.5.4.44": "generationQualifier",
	"2.5.4.46": "dnQualifier", "2.5.4.65": "pseudonym", "2.5.4.97": "organizationIdentifier",
	"0.9.2342.19200300.100.1.25": "DC", "0.9.2342.19200300.100.1.1": "UID",
	"1.2.840.113549.1.9.1": "emailAddress",
}

// AppendDN appends the distinguished name raw (DER) as OpenSSL prints it
// with XN_FLAG_RFC2253, as nginx's $ssl_client_s_dn: the last RDN first,
// separated by ',', multi-valued ones joined by '+', short names, values
// escaped per RFC 2253 with bytes outside ASCII as \XX; an attribute type
// OpenSSL has no name for as its OID and its value's DER in hex (#…).
func AppendDN(dst, raw []byte) []byte {
	var seq pkix.RDNSequence
	if rest, err := asn1.Unmarshal(raw, &seq); err != nil || len(rest) > 0 {
		return dst
	}
	for i := len(seq) - 1; i >= 0; i-- {
		if i < len(seq)-1 {
			dst = append(dst, ',')
		}
		for j, atv := range seq[i] {
			if j > 0 {
				dst = append(dst, '+')
			}
			oid := atv.Type.String()
			n, known := dnNames[oid]
			if !known {
				dst = append(dst, oid...)
				dst = append(dst, "=#"...)
				der, _ := asn1.Marshal(atv.Value)
				dst = hex.AppendEncode(dst, der)
				continue
			}
			dst = append(dst, n...)
			dst = append(dst, '=')
			s, ok := atv.Value.(string)
			if !ok {
				der, _ := asn1.Marshal(atv.Value)
				dst = append(dst, '#')
				dst = hex.AppendEncode(dst, der)
				continue
			}
			dst = escapeDN(dst, s)
		}
	}
	return dst
}

// escapeDN appends s escaped as OpenSSL's ASN1_STRFLGS_RFC2253.
func escapeDN(dst []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 0x80 || c < 0x20 || c == 0x7f:
			dst = append(dst, '\\', upperHex[c>>4], upperHex[c&15])
		case c == ',' || c == '+' || c == '"' || c == '\\' || c == '<' || c == '>' || c == ';',
			(c == '#' || c == ' ') && i == 0, c == ' ' && i == len(s)-1:
			dst = append(dst, '\\', c)
		default:
			dst = append(dst, c)
		}
	}
	return dst
}
