// Package secret is APISIX's secret managers (apisix/secret.lua and
// apisix/secret/*.lua): the schemas of the objects stored at
// /apisix/admin/secrets/{manager}/{id}, the fields of theirs kept
// encrypted at rest, and the clients that read a secret for a $secret://
// reference (Resolver): HashiCorp Vault's key/value engine and Google
// Cloud Secret Manager over HTTP with net/http (one GET each, and the
// OAuth 2.0 JWT bearer grant for Google), AWS Secrets Manager with AWS's
// official SDK (its requests are signed with SigV4).
//
// Everything here is safe for concurrent use. Reading a secret is network
// I/O: it is never done on an event loop (see plugins' References).
package secret

import (
	"embed"
	"errors"
	"maps"
	"slices"
	"strings"
	"sync"

	"coregate/admin/keyring"
	"coregate/admin/spec"
)

// The managers APISIX has, by the name of their URL segment and of a
// reference's first part.
const (
	ManagerAWS   = "aws"
	ManagerGCP   = "gcp"
	ManagerVault = "vault"
)

// fields are, by manager, the members of an object kept encrypted at
// rest with apisix.data_encryption's keyring, as a plugin's encrypt_fields
// are: the credentials the object holds ("a.b" is b of the object a).
var fields = map[string][]string{
	ManagerVault: {"token"},
	ManagerAWS:   {"secret_access_key", "session_token"},
	ManagerGCP:   {"auth_config.private_key"},
}

// Known reports whether manager is one of APISIX's secret managers.
func Known(manager string) bool {
	_, ok := fields[manager]
	return ok
}

// Managers returns the managers' names, sorted.
func Managers() []string { return slices.Sorted(maps.Keys(fields)) }

// Fields returns the members of manager's objects kept encrypted at rest,
// "a.b" naming b of the object a. The slice is shared: callers must not
// modify it.
func Fields(manager string) []string { return fields[manager] }

//go:embed schema/*.json
var schemaFiles embed.FS

var schemas = sync.OnceValues(func() (map[string]*spec.Schema, error) {
	m := make(map[string]*spec.Schema, len(fields))
	for name := range fields {
		b, err := schemaFiles.ReadFile("schema/" + name + ".json")
		if err != nil {
			return nil, err
		}
		if m[name], err = spec.CompileSchema("secret."+name, b); err != nil {
			return nil, err
		}
	}
	return m, nil
})

// ErrUnknownManager is the error of Validate for a manager APISIX does
// not have.
var ErrUnknownManager = errors.New("secret: unknown secret manager")

// Validate checks raw, an object of manager, against its schema: nil, a
// *spec.ValidationError with the message APISIX's validator gives
// (without the Admin API's "invalid configuration: "), a *spec.SyntaxError
// for malformed JSON, or ErrUnknownManager. Members the schema does not
// name (id, create_time, …) are allowed, as in APISIX.
func Validate(manager string, raw []byte) error {
	if !Known(manager) {
		return ErrUnknownManager
	}
	m, err := schemas()
	if err != nil {
		return err
	}
	return m[manager].Validate(raw)
}

// Schema returns manager's schema as one document, nil for a manager
// that is not known. The slice is shared: callers must not modify it.
func Schema(manager string) []byte {
	m, err := schemas()
	if err != nil || m[manager] == nil {
		return nil
	}
	return m[manager].JSON()
}

// Seal encrypts, in place, the secret fields (Fields) of obj, an object
// of manager decoded as encoding/json decodes one, that hold a string:
// whether one changed. A nil keyring changes nothing.
func Seal(manager string, obj map[string]any, k *keyring.Keyring) bool {
	if k == nil {
		return false
	}
	return transform(manager, obj, func(s string) (string, bool) { return k.Encrypt(s), true })
}

// Open decrypts, in place, the secret fields of obj that decrypt with k:
// whether one changed. A value that does not decrypt (stored in clear) is
// left as it is, as in APISIX. A nil keyring changes nothing.
func Open(manager string, obj map[string]any, k *keyring.Keyring) bool {
	if k == nil {
		return false
	}
	return transform(manager, obj, func(s string) (string, bool) {
		p, err := k.Decrypt(s)
		return p, err == nil
	})
}

func transform(manager string, obj map[string]any, f func(string) (string, bool)) bool {
	changed := false
	for _, path := range fields[manager] {
		m := obj
		name, rest, nested := strings.Cut(path, ".")
		for nested {
			inner, ok := m[name].(map[string]any)
			if !ok {
				break
			}
			m = inner
			name, rest, nested = strings.Cut(rest, ".")
		}
		if nested {
			continue
		}
		if s, ok := m[name].(string); ok {
			if t, ok := f(s); ok && t != s {
				m[name], changed = t, true
			}
		}
	}
	return changed
}
