package adminapi

import (
	"context"

	"coregate/admin/spec"
)

// checkSSL checks an ssl object as APISIX's check_ssl_conf does: the
// schema, then certificates and keys that parse, in pairs (spec.DecodeSSLKeys).
// Keys are stored as sent.
func (a *api) checkSSL(_ context.Context, w *write) *apiError {
	if _, err := spec.DecodeSSLKeys(w.raw, nil); err != nil {
		return invalid(err, "")
	}
	return nil
}
