package adminapi

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"

	"coregate/admin/secret"
	"coregate/admin/spec"
)

// Secrets, as APISIX's admin/secrets.lua and admin/resource.lua keep
// them: /apisix/admin/secrets/{manager}/{id}, stored at
// <prefix>/secrets/<manager>/<id> with the id "<manager>/<id>", checked
// against the manager's schema (package secret) and never POSTed. Their
// credentials (a vault token, an aws secret_access_key and session_token,
// a gcp auth_config.private_key) are stored encrypted with the fields'
// keyring, as plugins' encrypt_fields are, and shown decrypted, as GET
// shows those.

// checkSecretPath refuses a secret's path before anything else: a
// manager APISIX does not have (which also keeps a decoded "/" or dot
// segment out of the key), a write without an id.
func checkSecretPath(method, manager, id string) *apiError {
	switch {
	case manager != "" && !secret.Known(manager):
		return badRequest("invalid secret manager: " + manager)
	case id == "" && (method == http.MethodPut || method == http.MethodPatch):
		return badRequest("no secret id")
	}
	return nil
}

// checkSecret is APISIX's check of a secret (admin/secrets.lua): the
// manager's schema, refused with "invalid configuration: " and the
// validator's message.
func (a *api) checkSecret(_ context.Context, w *write) *apiError {
	if err := secret.Validate(w.manager, w.raw); err != nil {
		e := invalid(err, "")
		var ve *spec.ValidationError
		if errors.As(err, &ve) {
			e.Msg = "invalid configuration: " + e.Msg
		}
		return e
	}
	w.id = w.urlID // the key's id; the object's is "<manager>/<id>"
	return nil
}

// noSecretSchema is POST /schema/validate/secrets: the schema is the
// manager's, which that path does not name.
func noSecretSchema([]byte) error {
	return &spec.ValidationError{Msg: "missing secret type"}
}

// secretManagerOf is the manager of a stored secret, from its id
// "<manager>/<id>"; "" when it has none.
func secretManagerOf(obj map[string]any) string {
	id, _ := obj["id"].(string)
	m, _, ok := strings.Cut(id, "/")
	if !ok || !secret.Known(m) {
		return ""
	}
	return m
}

// listsSecret reports whether the list of all secrets (dir, with no
// manager) shows key: <dir><manager>/<id>.
func listsSecret(key, dir string) bool {
	rest, ok := strings.CutPrefix(key, dir)
	if !ok {
		return false
	}
	m, id, ok := strings.Cut(rest, "/")
	return ok && secret.Known(m) && id != "" && !strings.Contains(id, "/")
}

// readSecrets hands the secret objects stored to the plugin registry
// (plugins.Registry.UpdateSecrets) before an object holding a $secret://
// reference is checked: one written just before is found, whether or not
// the store's sync has read it yet.
func (a *api) readSecrets(ctx context.Context) *apiError {
	dir := a.dir("secrets")
	kvs, _, err := a.st.List(ctx, dir)
	if err != nil {
		return storeError(err)
	}
	objs := make([]json.RawMessage, 0, len(kvs))
	for _, kv := range kvs {
		if listsSecret(kv.Key, dir) {
			objs = append(objs, kv.Value)
		}
	}
	a.plugins.UpdateSecrets(objs)
	return nil
}
