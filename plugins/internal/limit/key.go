package limit

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/cjson"
	"coregate/plugins/internal/vartpl"
)

// The kinds of Key.
const (
	kindVar = iota
	kindCombination
	kindConstant
	kindRule
)

// Key is the key a request is counted under: key_type "var" (the value of
// one variable), "var_combination" (a template of variables), "constant",
// or the key of one of rules (a template that must resolve a variable,
// else the rule does not apply to the request). Without a value, a
// request is counted under the client's address (remote_addr), as
// APISIX's limit plugins count it.
type Key struct {
	kind     int
	name     httpvar.Var // key_type "var": resolved once, when built
	tpl      vartpl.Template
	constant []byte
	// emptyIsNone: an empty value is no value, counted under the client's
	// address too (limit-count's keys); else only a variable that is not
	// set, or a template that resolves no variable, is.
	emptyIsNone bool
}

// NewKey is the key of key_type and key: "var_combination", "constant",
// or else "var" (the schemas admit nothing else).
func NewKey(keyType, key string) Key {
	switch keyType {
	case "constant":
		return Key{kind: kindConstant, constant: []byte(key)}
	case "var_combination":
		return Key{kind: kindCombination, tpl: vartpl.Parse(key)}
	default:
		return Key{kind: kindVar, name: httpvar.Parse(key)}
	}
}

// RuleKey is the key of one of rules: a template; a request for which it
// resolves no variable has no key (Append's false).
func RuleKey(key string) Key { return Key{kind: kindRule, tpl: vartpl.Parse(key)} }

// EmptyIsNone makes an empty value count as none, under the client's
// address, as limit-count's key does (a rule's key excepted: an empty
// value of a variable it resolved is its value).
func (k Key) EmptyIsNone() Key {
	k.emptyIsNone = true
	return k
}

// InRules reports whether k is the key of one of rules.
func (k *Key) InRules() bool { return k.kind == kindRule }

// Append appends the key's value for the request to dst; false (dst
// holding what the template rendered) when k is a rule's key that
// resolves no variable. It allocates only when dst must grow.
func (k *Key) Append(dst []byte, c plugins.Ctx) ([]byte, bool) {
	mark := len(dst)
	switch k.kind {
	case kindRule:
		var n int
		dst, n = k.tpl.Render(dst, c)
		return dst, n > 0
	case kindConstant:
		dst = append(dst, k.constant...)
	case kindCombination:
		var n int
		if dst, n = k.tpl.Render(dst, c); n == 0 {
			return append(dst[:mark], c.Var(remoteAddr)...), true
		}
	default:
		v := c.Var(k.name)
		if v == nil {
			return append(dst, c.Var(remoteAddr)...), true
		}
		dst = append(dst, v...)
	}
	if k.emptyIsNone && len(dst) == mark {
		dst = append(dst, c.Var(remoteAddr)...)
	}
	return dst, true
}

// remoteAddr is the key of last resort, as APISIX's.
var remoteAddr = httpvar.Var{Kind: httpvar.RemoteAddr}

// Space is what comes before the key's value in a counter's key, so that
// the counters of distinct configurations, and of distinct plugins, are
// apart: a prefix, then, unless the prefix says it all (a group's), the
// route's id and a hash of the configuration. So counters survive a
// reload that leaves the configuration alone, and start again when it
// changes; and in Redis, the hash is the same on every gateway.
type Space struct {
	prefix, confHash []byte
}

// NewSpace is the space of prefix, the route's id and the configuration
// raw (its canonical form hashed).
func NewSpace(prefix string, raw json.RawMessage) (Space, error) {
	canon, err := cjson.Canonical(raw)
	if err != nil {
		return Space{}, err
	}
	sum := sha256.Sum256([]byte(canon))
	return Space{prefix: []byte(prefix), confHash: []byte(":" + hex.EncodeToString(sum[:8]) + ":")}, nil
}

// FixedSpace is a space that is prefix alone (a group's counters, shared
// by its routes).
func FixedSpace(prefix string) Space { return Space{prefix: []byte(prefix)} }

// Append appends the space of the request's route to dst.
func (s *Space) Append(dst []byte, c plugins.Ctx) []byte {
	dst = append(dst, s.prefix...)
	if s.confHash != nil {
		dst = append(append(dst, c.RouteID()...), s.confHash...)
	}
	return dst
}
