package adminapi

import (
	"context"

	"coregate/admin/spec"
)

// checkSSL checks an ssl object as APISIX's check_ssl_conf does: the
// schema, then certificates and keys that parse, in pairs
// (spec.DecodeSSLKeys). A key sent encrypted (not PEM) is decrypted with
// the keyring first, as APISIX's validate does, and refused when it does
// not decrypt.
func (a *api) checkSSL(_ context.Context, w *write) *apiError {
	if _, err := spec.DecodeSSLKeys(w.raw, a.keyring.DecryptPrivateKey); err != nil {
		return invalid(err, "")
	}
	return nil
}
