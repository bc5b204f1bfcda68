package spec

import (
	"crypto/x509"
	"encoding/pem"
	"strconv"
	"strings"
)

// SSL is an APISIX v3 ssl object (schema_def.lua `_M.ssl`): a server
// certificate and its private key (cert/key, and more pairs in
// certs/keys, an RSA and an ECDSA one for the same names for example) for
// the names in sni or snis, or, of type "client", the certificate an
// upstream connection presents. Keys are kept as stored: with
// apisix.data_encryption they are encrypted strings, read by whoever holds
// the keyring (package tlsconf takes a decrypt function).
type SSL struct {
	ID           ID                `json:"id,omitzero"`
	Desc         string            `json:"desc,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Type         string            `json:"type,omitempty"` // server (default) or client
	Cert         string            `json:"cert,omitempty"`
	Key          string            `json:"key,omitempty"`
	Certs        []string          `json:"certs,omitempty"`
	Keys         []string          `json:"keys,omitempty"`
	SNI          string            `json:"sni,omitempty"`
	SNIs         []string          `json:"snis,omitempty"`
	Client       *SSLClient        `json:"client,omitempty"`
	Status       *int              `json:"status,omitempty"` // 1 (default): served; 0: not
	SSLProtocols []string          `json:"ssl_protocols,omitempty"`
	CreateTime   int64             `json:"create_time,omitempty"`
	UpdateTime   int64             `json:"update_time,omitempty"`
}

// SSLClient is an ssl object's client verification (mTLS): the CA
// certificates a client's certificate must chain to, the verification
// depth (nginx's ssl_verify_depth, default 1), and the request paths that
// need no client certificate.
type SSLClient struct {
	CA               string   `json:"ca"`
	Depth            *int     `json:"depth,omitempty"`
	SkipMTLSURIRegex []string `json:"skip_mtls_uri_regex,omitempty"`
}

// IsClient reports whether the object is of type client: a certificate
// for upstream connections, never served.
func (s *SSL) IsClient() bool { return s.Type == "client" }

// Served reports whether a listener serves the object: of type server and
// status 1 (the default), as APISIX's SNI router takes it.
func (s *SSL) Served() bool { return !s.IsClient() && (s.Status == nil || *s.Status == 1) }

// ServerNames returns the names the object is served for, sni or snis, as
// written.
func (s *SSL) ServerNames() []string {
	if len(s.SNIs) > 0 {
		return s.SNIs
	}
	if s.SNI != "" {
		return []string{s.SNI}
	}
	return nil
}

// EffectiveDepth is client.depth, 1 when absent.
func (c *SSLClient) EffectiveDepth() int {
	if c.Depth == nil {
		return 1
	}
	return *c.Depth
}

// DecodeSSL decodes an ssl object and validates it as APISIX's data plane
// does (check_ssl_conf): its schema (schema/ssl.json), then certificates
// that parse (cert, certs, client.ca) and as many keys as certs. Private
// keys are not read: they may be encrypted (DecodeSSLKeys reads them).
// A pair whose certificate or key is a reference (IsReference), and a
// client.ca that is one, are not parsed. Errors are *ValidationError with APISIX's messages.
func DecodeSSL(data []byte) (*SSL, error) {
	return decode(data, KindSSL, objectTree(KindSSL), func(s *SSL) error { return s.checkPEM(nil, false) })
}

// DecodeSSLKeys is DecodeSSL that also reads every private key, as the
// Admin API checks an ssl object before storing it: decrypt, when not
// nil, turns a stored key that is not PEM (one that does not begin with
// "---", APISIX's rule) into PEM; its field argument names the key
// ("key", "keys[0]"). The order of the checks, and so the error reported
// first, is APISIX's.
func DecodeSSLKeys(data []byte, decrypt func(field, s string) (string, error)) (*SSL, error) {
	return decode(data, KindSSL, objectTree(KindSSL), func(s *SSL) error {
		if decrypt == nil {
			decrypt = func(_, k string) (string, error) { return k, nil }
		}
		return s.checkPEM(decrypt, true)
	})
}

// Validate checks an ssl object as DecodeSSL does.
func (s *SSL) Validate() error {
	return validate(s, objectTree(KindSSL), func() error { return s.checkPEM(nil, false) })
}

// checkPEM is APISIX's check_ssl_conf after the schema: cert (and key),
// then for a server object as many certs as keys and each pair, then
// client.ca.
func (s *SSL) checkPEM(decrypt func(field, s string) (string, error), keys bool) error {
	key := func(k string) string {
		if keys {
			return k
		}
		return ""
	}
	// A pair with a reference is read where the object is built.
	if !IsReference(s.Cert) && !IsReference(s.Key) {
		if err := checkPair(s.Cert, key(s.Key), "cert", "key", decrypt); err != nil {
			return err
		}
	}
	if s.IsClient() {
		return nil
	}
	if len(s.Certs) != len(s.Keys) {
		return &ValidationError{Field: "keys", Msg: "mismatched number of certs and keys"}
	}
	for i := range s.Certs {
		n := strconv.Itoa(i)
		if IsReference(s.Certs[i]) || IsReference(s.Keys[i]) {
			continue
		}
		if err := checkPair(s.Certs[i], key(s.Keys[i]), "certs["+n+"]", "keys["+n+"]", decrypt); err != nil {
			err.Msg = "failed to handle cert-key pair[" + strconv.Itoa(i+1) + "]: " + err.Msg
			return err
		}
	}
	if s.Client != nil && !IsReference(s.Client.CA) {
		if err := checkPair(s.Client.CA, "", "client.ca", "", nil); err != nil {
			err.Msg = "failed to validate client_cert: " + err.Msg
			return err
		}
	}
	return nil
}

// IsReference reports whether an ssl object's cert, key, certs or keys
// member s is a reference to its value, resolved where the object is
// built, as APISIX's check_secret_uri: "$secret://…" or "$env://…" (the
// latter in any case). Such a member is not parsed when the object is
// checked.
func IsReference(s string) bool {
	const env = "$env://"
	return strings.HasPrefix(s, "$secret://") || len(s) >= len(env) && strings.EqualFold(s[:len(env)], env)
}

// CheckCertKey is APISIX's validate of a certificate and its key
// anywhere one is written (an ssl object's, an upstream's
// tls.client_cert and client_key): certFields and keyField name them in
// the error, whose message is APISIX's. See checkPair.
func CheckCertKey(cert, key, certField, keyField string, decrypt func(field, s string) (string, error)) error {
	if err := checkPair(cert, key, certField, keyField, decrypt); err != nil {
		return err
	}
	return nil
}

// checkPair checks that cert holds PEM certificates that parse and key,
// when not empty, a private key that parses, after decrypt; the message is
// APISIX's.
func checkPair(cert, key, certField, keyField string, decrypt func(field, s string) (string, error)) *ValidationError {
	if cert == "" {
		return nil
	}
	if _, err := ParseCertificates(cert); err != nil {
		return &ValidationError{Field: certField, Msg: "failed to parse cert: " + err.Error()}
	}
	if key == "" {
		return nil
	}
	if !strings.HasPrefix(key, "---") && decrypt != nil {
		k, err := decrypt(keyField, key)
		if err != nil {
			return &ValidationError{Field: keyField, Msg: "failed to decrypt previous encrypted key"}
		}
		key = k
	}
	if err := checkPrivateKey(key); err != nil {
		return &ValidationError{Field: keyField, Msg: "failed to parse key: " + err.Error()}
	}
	return nil
}

// ParseCertificates parses the PEM certificates in s, in order (other PEM
// blocks are skipped); an error when one does not parse or there is none.
func ParseCertificates(s string) ([]*x509.Certificate, error) {
	var certs []*x509.Certificate
	rest := []byte(s)
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, err
		}
		certs = append(certs, c)
	}
	if len(certs) == 0 {
		return nil, errNoCertificate
	}
	return certs, nil
}

type pemError string

func (e pemError) Error() string { return string(e) }

const (
	errNoCertificate = pemError("no PEM certificate found")
	errNoKey         = pemError("no PEM private key found")
	errKeyFormat     = pemError("not a PKCS#1, PKCS#8 or EC private key")
)

// checkPrivateKey checks that key is a PEM private key that parses.
func checkPrivateKey(key string) error {
	b, _ := pem.Decode([]byte(key))
	if b == nil {
		return errNoKey
	}
	if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
		return nil
	}
	if _, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return nil
	}
	if _, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return nil
	}
	return errKeyFormat
}
