package tlsconf

import (
	"crypto/tls"
	"errors"
	"strings"
)

// Settings are config.yaml's apisix.ssl, as every HTTPS listener of a
// node serves them.
type Settings struct {
	// Protocols are ssl_protocols' names: "TLSv1.2", "TLSv1.3" (APISIX's
	// default, DefaultProtocols). "TLSv1" and "TLSv1.1" are accepted and
	// never offered: they have no AEAD cipher suite, the only kind the
	// record layer implements. nil means the default.
	Protocols []string
	// Ciphers is ssl_ciphers, OpenSSL's names separated by ':' (or ',' or
	// ' '), for TLS 1.2; "" means DefaultCiphers. See ParseCiphers.
	Ciphers string
	// SessionTickets is ssl_session_tickets (APISIX's default: false).
	SessionTickets bool
	// FallbackSNI is fallback_sni: the name a handshake without SNI is
	// served as.
	FallbackSNI string
}

// DefaultProtocols is APISIX's ssl_protocols.
var DefaultProtocols = []string{"TLSv1.2", "TLSv1.3"}

// DefaultCiphers is APISIX's ssl_ciphers.
const DefaultCiphers = "ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:" +
	"ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305:" +
	"DHE-RSA-AES128-GCM-SHA256:DHE-RSA-AES256-GCM-SHA384"

// Check reports what Build would refuse in s: a protocol name that is not
// one, no protocol that can be offered, or a cipher list of which nothing
// can be offered. The node refuses to start on it.
func (s Settings) Check() error {
	if _, _, err := versions(s.Protocols); err != nil {
		return err
	}
	_, err := ParseCiphers(s.Ciphers)
	return err
}

// versions turns ssl_protocols into crypto/tls's range.
func versions(names []string) (minV, maxV uint16, err error) {
	if names == nil {
		names = DefaultProtocols
	}
	for _, n := range names {
		var v uint16
		switch n {
		case "TLSv1", "TLSv1.1":
			continue
		case "TLSv1.2":
			v = tls.VersionTLS12
		case "TLSv1.3":
			v = tls.VersionTLS13
		default:
			return 0, 0, errors.New("tlsconf: ssl_protocols: unknown protocol " + n)
		}
		if minV == 0 || v < minV {
			minV = v
		}
		maxV = max(maxV, v)
	}
	if minV == 0 {
		return 0, 0, errors.New("tlsconf: ssl_protocols: none of " + strings.Join(names, " ") + " can be offered (TLSv1.2 or TLSv1.3 needed)")
	}
	return minV, maxV, nil
}

// openSSLSuites are the TLS 1.2 AEAD suites crypto/tls implements, by
// OpenSSL's name.
var openSSLSuites = map[string]uint16{
	"ECDHE-ECDSA-AES128-GCM-SHA256": tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-RSA-AES128-GCM-SHA256":   tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
	"ECDHE-ECDSA-AES256-GCM-SHA384": tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-RSA-AES256-GCM-SHA384":   tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
	"ECDHE-ECDSA-CHACHA20-POLY1305": tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
	"ECDHE-RSA-CHACHA20-POLY1305":   tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	"AES128-GCM-SHA256":             tls.TLS_RSA_WITH_AES_128_GCM_SHA256,
	"AES256-GCM-SHA384":             tls.TLS_RSA_WITH_AES_256_GCM_SHA384,
}

// openSSLName is the OpenSSL name of every suite a handshake can end with
// (TLS 1.3's included), for $ssl_cipher.
var openSSLName = map[uint16]string{
	tls.TLS_AES_128_GCM_SHA256:       "TLS_AES_128_GCM_SHA256",
	tls.TLS_AES_256_GCM_SHA384:       "TLS_AES_256_GCM_SHA384",
	tls.TLS_CHACHA20_POLY1305_SHA256: "TLS_CHACHA20_POLY1305_SHA256",
}

func init() {
	for n, id := range openSSLSuites {
		openSSLName[id] = n
	}
}

// ParseCiphers turns ssl_ciphers ("" is DefaultCiphers) into the TLS 1.2
// suites offered, in the list's order, as OpenSSL reads a list: a name it
// does not know is ignored, and the list is refused only when nothing in
// it can be offered. Only AEAD suites with ECDHE or RSA key exchange are
// offered (AES-GCM, ChaCha20-Poly1305: what the record layer
// implements); the others — CBC, DHE, aliases such as HIGH or
// ECDHE+AESGCM — are ignored alike. A name prefixed with '!' or '-'
// removes that suite; '+' (move to the end) is ignored, for crypto/tls
// orders the suites itself. TLS 1.3's suites are not configurable in
// crypto/tls: all three are always offered, as OpenSSL's default
// ssl_conf_command Ciphersuites does.
func ParseCiphers(list string) ([]uint16, error) {
	if list == "" {
		list = DefaultCiphers
	}
	var out []uint16
	removed := map[uint16]bool{}
	for _, n := range strings.FieldsFunc(list, func(r rune) bool { return r == ':' || r == ',' || r == ' ' }) {
		switch n[0] {
		case '!', '-':
			if id, ok := openSSLSuites[n[1:]]; ok {
				removed[id] = true
			}
			continue
		case '+':
			n = n[1:]
		}
		if id, ok := openSSLSuites[n]; ok && !contains(out, id) {
			out = append(out, id)
		}
	}
	kept := out[:0]
	for _, id := range out {
		if !removed[id] {
			kept = append(kept, id)
		}
	}
	if len(kept) == 0 {
		return nil, errors.New("tlsconf: ssl_ciphers: no cipher suite usable in " + strings.TrimSpace(list) +
			" (AEAD suites only: ECDHE-ECDSA-AES128-GCM-SHA256, ECDHE-RSA-CHACHA20-POLY1305, …)")
	}
	return kept, nil
}

func contains(ids []uint16, id uint16) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
