package plugins

import (
	"bytes"
	"encoding/json"
	"strings"

	"coregate/admin/keyring"
)

// Secret fields (APISIX's encrypt_fields). A plugin's schema may name,
// under "encrypt_fields", the fields of its configuration that are kept
// encrypted at rest with apisix.data_encryption's keyring (key-auth's
// consumer "key", the limits' "redis_password"): a dotted path from the
// configuration's root, each step through an object, or through each
// object of an array; the field is a string, an array of strings or an
// object of strings. A consumer's or credential's configuration of a
// ConsumerSchemaPlugin takes its consumer schema's encrypt_fields, any
// other its schema's, as APISIX's get_plugin_schema_for_gde.
//
// The Admin API encrypts them before it stores a configuration
// (EncryptConf); a registry given the keyring (SetKeyring) decrypts them
// before a configuration is checked or built, so the schema, Check, Build
// and the consumers' index see the value in clear while the Spec keeps
// what was stored. A value that does not decrypt (written in clear, before
// the keyring or the field was) is used as it is, as APISIX uses it.

// encryptFields reads a schema's "encrypt_fields".
func encryptFields(schema []byte) []string {
	var s struct {
		EncryptFields []string `json:"encrypt_fields"`
	}
	if json.Unmarshal(schema, &s) != nil {
		return nil
	}
	return s.EncryptFields
}

// SetKeyring sets the keyring with which the configurations' encrypt_fields
// are decrypted before they are checked and built: apisix.data_encryption's
// when enable_encrypt_fields is set and the configuration comes from etcd
// (nodeconf.DataEncryption.FieldsKeyring), nil (the default) for none. It
// is meant for a process's start, before the registry checks anything;
// safe for concurrent use.
func (r *Registry) SetKeyring(k *keyring.Keyring) { r.keyring.Store(k) }

// EncryptFields returns the encrypt_fields of the registered plugin name,
// for its configuration on a consumer or a credential when consumer is
// set; nil for a plugin that has none or is not registered.
func (r *Registry) EncryptFields(name string, consumer bool) []string {
	r.mu.RLock()
	p, ok := r.impl[name]
	sc := r.schemas[name]
	r.mu.RUnlock()
	if !ok {
		return nil
	}
	return sc.encryptFields(p, consumer)
}

// encryptFields is EncryptFields of the registered plugin p, read from
// its schemas once.
func (sc *schemas) encryptFields(p Plugin, consumer bool) []string {
	sc.secretsOnce.Do(func() {
		sc.secrets = encryptFields(p.Schema())
		if cp, ok := p.(ConsumerSchemaPlugin); ok {
			sc.hasConsumer = true
			sc.consumerSecrets = encryptFields(cp.ConsumerSchema())
		}
	})
	if consumer && sc.hasConsumer {
		return sc.consumerSecrets
	}
	return sc.secrets
}

// decrypt is DecryptConf of the registered plugin p: what check and
// checkConsumer check and build.
func (r *Registry) decrypt(name string, p Plugin, raw json.RawMessage, consumer bool) json.RawMessage {
	k := r.keyring.Load()
	if k == nil {
		return raw
	}
	r.mu.RLock()
	sc := r.schemas[name]
	r.mu.RUnlock()
	return decryptFields(raw, sc.encryptFields(p, consumer), k)
}

// EncryptConf returns raw, the configuration of plugin name (on a consumer
// or credential when consumer is set), with its encrypt_fields encrypted
// with k, for storing it; raw itself when k is nil or there is nothing to
// encrypt.
func (r *Registry) EncryptConf(name string, consumer bool, raw json.RawMessage, k *keyring.Keyring) json.RawMessage {
	if k == nil {
		return raw
	}
	return transformFields(raw, r.EncryptFields(name, consumer), func(s string) (string, bool) {
		return k.Encrypt(s), true
	})
}

// DecryptConf returns raw with its encrypt_fields decrypted with k, those
// that decrypt; raw itself when k is nil or nothing decrypts.
func (r *Registry) DecryptConf(name string, consumer bool, raw json.RawMessage, k *keyring.Keyring) json.RawMessage {
	if k == nil {
		return raw
	}
	return decryptFields(raw, r.EncryptFields(name, consumer), k)
}

// decryptFields is DecryptConf with the fields and the keyring given.
func decryptFields(raw json.RawMessage, fields []string, k *keyring.Keyring) json.RawMessage {
	if k == nil || len(fields) == 0 {
		return raw
	}
	return transformFields(raw, fields, func(s string) (string, bool) {
		p, err := k.Decrypt(s)
		return p, err == nil
	})
}

// transformFields applies f to the strings of raw's fields (paths as the
// encrypt_fields), keeping those it refuses; raw itself when it changes
// none, or when raw is not a JSON object. Members are written back
// sorted, numbers as written.
func transformFields(raw json.RawMessage, fields []string, f func(string) (string, bool)) json.RawMessage {
	if len(fields) == 0 {
		return raw
	}
	// Most configurations do not write the fields at all.
	named := false
	for _, p := range fields {
		leaf := p[strings.LastIndexByte(p, '.')+1:]
		if bytes.Contains(raw, []byte(`"`+leaf+`"`)) {
			named = true
			break
		}
	}
	if !named {
		return raw
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v map[string]any
	if d.Decode(&v) != nil || v == nil {
		return raw
	}
	changed := false
	for _, p := range fields {
		if transformPath(v, p, f) {
			changed = true
		}
	}
	if !changed {
		return raw
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if e.Encode(v) != nil {
		return raw
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'})
}

// transformPath applies f at path in m (APISIX's process_encrypt_field):
// whether it changed anything.
func transformPath(m map[string]any, path string, f func(string) (string, bool)) bool {
	seg, rest, deeper := strings.Cut(path, ".")
	val, ok := m[seg]
	if !ok {
		return false
	}
	apply := func(s string) (string, bool) {
		out, ok := f(s)
		return out, ok && out != s
	}
	changed := false
	if !deeper {
		switch v := val.(type) {
		case string:
			if out, ok := apply(v); ok {
				m[seg], changed = out, true
			}
		case []any:
			for i, e := range v {
				if s, isStr := e.(string); isStr {
					if out, ok := apply(s); ok {
						v[i], changed = out, true
					}
				}
			}
		case map[string]any:
			for k, e := range v {
				if s, isStr := e.(string); isStr {
					if out, ok := apply(s); ok {
						v[k], changed = out, true
					}
				}
			}
		}
		return changed
	}
	switch v := val.(type) {
	case map[string]any:
		return transformPath(v, rest, f)
	case []any:
		for _, e := range v {
			if o, isObj := e.(map[string]any); isObj && transformPath(o, rest, f) {
				changed = true
			}
		}
	}
	return changed
}
