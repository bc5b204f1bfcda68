package adminapi

import (
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	"coregate/admin/spec"
)

// checkSSL checks an ssl object as APISIX's check_ssl_conf does: the
// schema, then certificates and keys that parse, in pairs
// (spec.DecodeSSLKeys). A key sent encrypted (not PEM) is decrypted with
// the keyring first, as APISIX's validate does, and refused when it does
// not decrypt. A member that is a $env:// or $secret:// reference
// (spec.IsReference) is stored as written; it is read here too, and the
// object refused, naming the member and the reference, never a value,
// when it does not resolve or its value does not parse.
func (a *api) checkSSL(_ context.Context, w *write) *apiError {
	sl, err := spec.DecodeSSLKeys(w.raw, a.keyring.DecryptPrivateKey)
	if err != nil {
		return invalid(err, "")
	}
	r, changed, e := a.resolveSSL(sl)
	if e != nil || !changed {
		return e
	}
	b, err := json.Marshal(r)
	if err != nil {
		return badRequest(err.Error())
	}
	if _, err := spec.DecodeSSLKeys(b, a.keyring.DecryptPrivateKey); err != nil {
		return invalid(err, "")
	}
	return nil
}

// resolveSSL returns a copy of sl with its references read with the
// plugin registry (plugins.Registry.Resolve), and whether it held any.
func (a *api) resolveSSL(sl *spec.SSL) (*spec.SSL, bool, *apiError) {
	c := *sl
	c.Certs = append([]string(nil), sl.Certs...)
	c.Keys = append([]string(nil), sl.Keys...)
	if sl.Client != nil {
		cl := *sl.Client
		c.Client = &cl
	}
	changed := false
	resolve := func(field string, s *string) *apiError {
		v, ref, err := a.plugins.Resolve(*s)
		if err != nil {
			return &apiError{Status: http.StatusBadRequest, Msg: "failed to resolve " + field + ": " + err.Error(), Field: field}
		}
		changed = changed || ref
		*s = v
		return nil
	}
	if e := resolve("cert", &c.Cert); e != nil {
		return nil, false, e
	}
	if e := resolve("key", &c.Key); e != nil {
		return nil, false, e
	}
	for i := range c.Certs {
		if e := resolve("certs["+strconv.Itoa(i)+"]", &c.Certs[i]); e != nil {
			return nil, false, e
		}
	}
	for i := range c.Keys {
		if e := resolve("keys["+strconv.Itoa(i)+"]", &c.Keys[i]); e != nil {
			return nil, false, e
		}
	}
	if c.Client != nil {
		if e := resolve("client.ca", &c.Client.CA); e != nil {
			return nil, false, e
		}
	}
	return &c, changed, nil
}
