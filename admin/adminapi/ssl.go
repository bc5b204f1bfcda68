package adminapi

import (
	"context"
	"crypto/x509"
	"encoding/pem"
	"net/http"
	"strconv"
)

// checkSSL checks the schema, then that certificates and keys are PEM
// that parses, in pairs (what APISIX's check_ssl_conf does): a key sent
// encrypted (not PEM) is decrypted with the keyring first, as APISIX's
// validate does, and refused when it does not decrypt.
func (a *api) checkSSL(_ context.Context, w *write) *apiError {
	if err := localSchema(sslSchema)(w.raw); err != nil {
		return invalid(err, "")
	}
	cert, _ := w.obj["cert"].(string)
	key, _ := w.obj["key"].(string)
	key, e := a.clearKey(key, "key")
	if e != nil {
		return e
	}
	if msg, field := validatePEM(cert, key, "cert", "key"); msg != "" {
		return &apiError{Status: http.StatusBadRequest, Msg: msg, Field: field}
	}
	if typ, _ := w.obj["type"].(string); typ == "client" {
		return nil
	}
	certs, _ := w.obj["certs"].([]any)
	keys, _ := w.obj["keys"].([]any)
	if len(certs) != len(keys) {
		return &apiError{Status: http.StatusBadRequest, Msg: "mismatched number of certs and keys", Field: "keys"}
	}
	for i := range certs {
		c, _ := certs[i].(string)
		k, _ := keys[i].(string)
		n := strconv.Itoa(i)
		k, e := a.clearKey(k, "keys["+n+"]")
		if e != nil {
			return e
		}
		if msg, field := validatePEM(c, k, "certs["+n+"]", "keys["+n+"]"); msg != "" {
			return &apiError{Status: http.StatusBadRequest, Msg: "failed to handle cert-key pair[" + strconv.Itoa(i+1) + "]: " + msg, Field: field}
		}
	}
	if client, ok := w.obj["client"].(map[string]any); ok {
		ca, _ := client["ca"].(string)
		if msg, field := validatePEM(ca, "", "client.ca", ""); msg != "" {
			return &apiError{Status: http.StatusBadRequest, Msg: "failed to validate client_cert: " + msg, Field: field}
		}
	}
	return nil
}

// clearKey is a private key as sent, decrypted when it is not PEM and
// there is a keyring; APISIX's message when it does not decrypt.
func (a *api) clearKey(key, field string) (string, *apiError) {
	if key == "" || a.keyring == nil {
		return key, nil
	}
	clear, err := a.keyring.DecryptPrivateKey(field, key)
	if err != nil {
		return "", &apiError{Status: http.StatusBadRequest, Msg: "failed to decrypt previous encrypted key", Field: field}
	}
	return clear, nil
}

// validatePEM checks that cert holds PEM certificates that parse and key,
// when not empty, a PEM private key that parses; the message is APISIX's.
func validatePEM(cert, key, certField, keyField string) (msg, field string) {
	if cert == "" {
		return "", ""
	}
	rest, n := []byte(cert), 0
	for {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			break
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if _, err := x509.ParseCertificate(b.Bytes); err != nil {
			return "failed to parse cert: " + err.Error(), certField
		}
		n++
	}
	if n == 0 {
		return "failed to parse cert: no PEM certificate found", certField
	}
	if key == "" {
		return "", ""
	}
	b, _ := pem.Decode([]byte(key))
	if b == nil {
		return "failed to parse key: no PEM private key found", keyField
	}
	if _, err := x509.ParsePKCS8PrivateKey(b.Bytes); err == nil {
		return "", ""
	}
	if _, err := x509.ParsePKCS1PrivateKey(b.Bytes); err == nil {
		return "", ""
	}
	if _, err := x509.ParseECPrivateKey(b.Bytes); err == nil {
		return "", ""
	}
	return "failed to parse key: not a PKCS#1, PKCS#8 or EC private key", keyField
}
