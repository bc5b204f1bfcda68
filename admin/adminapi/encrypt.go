package adminapi

import (
	"encoding/json"

	"coregate/admin/secret"
)

// apisix.data_encryption, as APISIX's Admin API applies it
// (admin/resource.lua, admin/init.lua). What is stored:
//
//   - an SSL object's key and keys, and an upstream's tls.client_key
//     (upstreams, and the upstream of routes and services), encrypted with
//     the keyring when written in PEM (keyring.EncryptPrivateKey);
//   - the encrypt_fields of each plugin's configuration (routes, services,
//     plugin configs, global rules, consumer groups, consumers and
//     credentials) encrypted with the fields' keyring
//     (plugins.Registry.EncryptConf);
//   - a secret's credentials (secret.Fields) encrypted with the fields'
//     keyring too (secret.Seal).
//
// The object is checked before, with the values as sent; the bytes
// answered by PUT, POST and PATCH are those stored, as in APISIX. GET
// shows the plugins' fields decrypted, as APISIX does, and never an SSL
// object's keys; PATCH merges into the stored object with its plugins'
// fields (and a secret's credentials) decrypted, so that they are not
// encrypted twice.

// pluginsOf tells whether a resource's objects hold "plugins", and
// whether they are a consumer's (checked against consumer schemas).
func pluginsOf(rs *resource) (has, consumer bool) {
	switch rs.name {
	case "routes", "services", "plugin_configs", "global_rules", "consumer_groups":
		return true, false
	case "consumers", "credentials":
		return true, true
	}
	return false, false
}

// seal returns raw, an object checked, as it is to be stored: its
// private keys and plugins' secret fields encrypted; raw itself when there
// is nothing to encrypt.
func (a *api) seal(rs *resource, raw []byte) []byte {
	if a.keyring == nil && a.fieldsKeyring == nil {
		return raw
	}
	obj, ok := decodeStored(raw)
	if !ok {
		return raw
	}
	changed := false
	if a.keyring != nil {
		switch rs.name {
		case "ssls":
			if k, ok := obj["key"].(string); ok {
				if s := a.keyring.EncryptPrivateKey(k); s != k {
					obj["key"], changed = s, true
				}
			}
			if keys, ok := obj["keys"].([]any); ok {
				for i, v := range keys {
					if k, ok := v.(string); ok {
						if s := a.keyring.EncryptPrivateKey(k); s != k {
							keys[i], changed = s, true
						}
					}
				}
			}
		case "upstreams":
			changed = a.sealUpstream(obj)
		case "routes", "services":
			if u, ok := obj["upstream"].(map[string]any); ok {
				changed = a.sealUpstream(u)
			}
		}
	}
	if a.fieldsKeyring != nil && rs.name == "secrets" {
		changed = secret.Seal(secretManagerOf(obj), obj, a.fieldsKeyring)
	}
	if a.fieldsKeyring != nil {
		if has, consumer := pluginsOf(rs); has {
			if a.mapPlugins(obj, consumer, func(name string, raw json.RawMessage) json.RawMessage {
				return a.plugins.EncryptConf(name, consumer, raw, a.fieldsKeyring)
			}) {
				changed = true
			}
		}
	}
	if !changed {
		return raw
	}
	return encodeJSON(obj)
}

// sealUpstream encrypts an upstream's tls.client_key in PEM.
func (a *api) sealUpstream(u map[string]any) bool {
	tls, ok := u["tls"].(map[string]any)
	if !ok {
		return false
	}
	k, ok := tls["client_key"].(string)
	if !ok {
		return false
	}
	s := a.keyring.EncryptPrivateKey(k)
	tls["client_key"] = s
	return s != k
}

// openPlugins decrypts, in place, the secret fields of a stored object's
// plugins, those that decrypt, or a secret's credentials: what GET shows
// and PATCH merges into.
func (a *api) openPlugins(rs *resource, obj map[string]any) {
	if rs.name == "secrets" {
		secret.Open(secretManagerOf(obj), obj, a.fieldsKeyring)
		return
	}
	if has, consumer := pluginsOf(rs); has {
		a.openPluginsOf(obj, consumer)
	}
}

// openPluginsOf is openPlugins of an object whose plugins are a
// consumer's when consumer is set.
func (a *api) openPluginsOf(obj map[string]any, consumer bool) {
	if a.fieldsKeyring == nil {
		return
	}
	a.mapPlugins(obj, consumer, func(name string, raw json.RawMessage) json.RawMessage {
		return a.plugins.DecryptConf(name, consumer, raw, a.fieldsKeyring)
	})
}

// mapPlugins replaces each configuration of obj's "plugins" by what f
// makes of it (the same bytes for none): whether one changed.
func (a *api) mapPlugins(obj map[string]any, consumer bool, f func(name string, raw json.RawMessage) json.RawMessage) bool {
	ps, ok := obj["plugins"].(map[string]any)
	if !ok {
		return false
	}
	changed := false
	for name, conf := range ps {
		if _, isObj := conf.(map[string]any); !isObj || len(a.plugins.EncryptFields(name, consumer)) == 0 {
			continue
		}
		raw := encodeJSON(conf)
		out := f(name, raw)
		if string(out) == string(raw) {
			continue
		}
		if v, err := decodeJSON(out); err == nil {
			ps[name], changed = v, true
		}
	}
	return changed
}
