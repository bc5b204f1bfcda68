package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"

	"coregate/admin/spec"
)

// References a plugin configuration may hold in place of a string value,
// as APISIX's (apisix/core/env.lua, apisix/secret.lua):
//
//	$env://NAME          the environment variable NAME
//	$env://NAME/member   the string member of NAME's value, a JSON object
//	$secret://…          a secret manager's secret (SecretSource)
//
// "$env://" is matched whatever its case ("$ENV://NAME" too), the name and
// the member as written; "$secret://" in lower case only, as APISIX
// matches them. A string value anywhere in the configuration, at any
// depth, is a reference when it begins so; member names never are.
const (
	envPrefix    = "$env://"
	secretPrefix = "$secret://"
)

// ErrReference is matched (errors.Is) by the refusal of a plugin
// configuration because of a reference: one that cannot be resolved (a
// variable that is not set, a member its value lacks, a $secret://
// reference without a SecretSource, or one it cannot read), or whose
// value the plugin refuses. Such a refusal depends on
// the environment of the process that resolves it, not on the
// configuration alone.
var ErrReference = errors.New("plugins: unresolved reference")

// SecretSource reads the secrets $secret:// references name (package
// admin/secret's Resolver): Secret returns the value of ref, written
// "$secret://<manager>/<id>/<key>", or an error saying why there is none,
// which names neither the value nor any other secret. It may do network
// I/O, bounded in time: it is called where configurations are checked and
// built (the Admin API, the syncer, a worker's build of a snapshot),
// never on an event loop. It must be safe for concurrent use.
type SecretSource interface {
	Secret(ref string) (string, error)
}

// secretSource boxes a SecretSource for an atomic.Pointer.
type secretSource struct{ s SecretSource }

// SetSecrets sets the source of the $secret:// references' values; nil
// (the default) refuses every such reference, "secret managers
// ($secret://) are not supported yet". Safe for concurrent use; a
// configuration checked before keeps what it resolved to.
func (r *Registry) SetSecrets(s SecretSource) {
	if s == nil {
		r.secrets.Store(nil)
		return
	}
	r.secrets.Store(&secretSource{s})
}

// UpdateSecrets hands objs, the secret objects of the configuration
// about to be checked or built (a Spec's Secrets), to the SecretSource
// when it reads them (an Update method: admin/secret's Resolver); it does
// nothing otherwise. Called off the event loops, before the build.
func (r *Registry) UpdateSecrets(objs []json.RawMessage) {
	if u, ok := r.secretSource().(interface{ Update([]json.RawMessage) }); ok {
		u.Update(objs)
	}
}

func (r *Registry) secretSource() SecretSource {
	if b := r.secrets.Load(); b != nil {
		return b.s
	}
	return nil
}

// Resolve returns the value of s when it is a reference ($env:// or
// $secret://, as in a plugin configuration) and true, or s itself and
// false when it is not one; an error, naming the reference and never a
// value, when it cannot be resolved. For references held outside plugin
// configurations (an ssl object's certificates and keys). It may do
// network I/O (SecretSource): never call it on an event loop. Safe for
// concurrent use.
func (r *Registry) Resolve(s string) (string, bool, error) {
	rf, ok := refOf(s, "", "")
	if !ok {
		return s, false, nil
	}
	v, why := rf.resolve(r.secretSource())
	if why != "" {
		return "", true, errors.New(why)
	}
	return v, true, nil
}

// ref is one reference found in a configuration: where (its field, as
// spec.ValidationError names fields, and the message prefix naming it, as
// the schema's messages nest) and what was written.
type ref struct {
	field, prefix, text string
}

// refError is a refusal because of a reference: a *spec.ValidationError
// (whose Field the Admin API reports) that matches ErrReference.
type refError struct{ ve *spec.ValidationError }

func (e *refError) Error() string        { return e.ve.Msg }
func (e *refError) Unwrap() error        { return e.ve }
func (e *refError) Is(target error) bool { return target == ErrReference }

// mayHoldRefs reports whether raw may hold a reference: a JSON string
// that begins with '$', written or escaped. Most configurations have
// none and are used as they are.
func mayHoldRefs(raw []byte) bool {
	return bytes.Contains(raw, []byte(`"$`)) || bytes.Contains(raw, []byte(`\u0024`))
}

// resolveRefs returns raw with each $env:// reference replaced by its
// value from the process environment (os.LookupEnv), and each $secret://
// one by its value from secrets, and the references found; raw itself
// when it holds none (or is not JSON, which the schema then refuses). A
// reference that cannot be resolved is an error naming its field and the
// reference, never a value.
func resolveRefs(raw json.RawMessage, secrets SecretSource) (json.RawMessage, []ref, error) {
	if !mayHoldRefs(raw) || !json.Valid(raw) {
		return raw, nil, nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		return raw, nil, nil
	}
	var refs []ref
	v, err := resolveValue(v, "", "", secrets, &refs)
	if err != nil {
		return nil, refs, err
	}
	if len(refs) == 0 {
		return raw, nil, nil
	}
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, refs, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), refs, nil
}

// resolveValue resolves the references of v, found at field (prefix is
// the message prefix that names it), in place; refs collects them.
func resolveValue(v any, field, prefix string, secrets SecretSource, refs *[]ref) (any, error) {
	switch x := v.(type) {
	case string:
		r, ok := refOf(x, field, prefix)
		if !ok {
			return v, nil
		}
		*refs = append(*refs, r)
		val, why := r.resolve(secrets)
		if why != "" {
			return nil, &refError{&spec.ValidationError{Field: field, Msg: prefix + why}}
		}
		return val, nil
	case map[string]any:
		// In name order: the same error first for the same configuration.
		for _, k := range slices.Sorted(maps.Keys(x)) {
			m := x[k]
			f := memberField(field, k)
			p := prefix + `property "` + k + `" validation failed: `
			var err error
			if x[k], err = resolveValue(m, f, p, secrets, refs); err != nil {
				return nil, err
			}
		}
	case []any:
		for i, m := range x {
			f := field + "[" + strconv.Itoa(i) + "]"
			p := prefix + "failed to validate item " + strconv.Itoa(i+1) + ": "
			var err error
			if x[i], err = resolveValue(m, f, p, secrets, refs); err != nil {
				return nil, err
			}
		}
	}
	return v, nil
}

// memberField names the member k of the object at field, as spec names
// fields: a.b, or a["b.c"] for a name that is not a plain word.
func memberField(field, k string) string {
	plain := k != ""
	for _, c := range k {
		if c != '_' && c != '-' && (c < '0' || c > '9') && (c < 'a' || c > 'z') && (c < 'A' || c > 'Z') {
			plain = false
			break
		}
	}
	switch {
	case !plain:
		return field + "[" + strconv.Quote(k) + "]"
	case field == "":
		return k
	}
	return field + "." + k
}

// refOf reports whether s is a reference.
func refOf(s, field, prefix string) (ref, bool) {
	if len(s) < len(envPrefix) || s[0] != '$' {
		return ref{}, false
	}
	if !strings.EqualFold(s[:len(envPrefix)], envPrefix) && !strings.HasPrefix(s, secretPrefix) {
		return ref{}, false
	}
	return ref{field: field, prefix: prefix, text: s}, true
}

// resolve returns the value of r, or why it has none. why names the
// reference and the variable, never a value.
func (r ref) resolve(secrets SecretSource) (val, why string) {
	if strings.HasPrefix(r.text, secretPrefix) {
		if secrets == nil {
			return "", r.text + ": secret managers ($secret://) are not supported yet"
		}
		v, err := secrets.Secret(r.text)
		if err != nil {
			return "", "cannot resolve " + r.text + ": " + err.Error()
		}
		return v, ""
	}
	name, member, sub := strings.Cut(r.text[len(envPrefix):], "/")
	fail := "cannot resolve " + r.text + ": "
	if name == "" {
		return "", fail + "no environment variable named"
	}
	v, ok := os.LookupEnv(name)
	if !ok {
		return "", fail + "environment variable " + name + " is not set"
	}
	if !sub || member == "" {
		// APISIX's "$env://NAME/" is NAME's whole value too.
		return v, ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal([]byte(v), &obj) != nil || obj == nil {
		return "", fail + "the value of environment variable " + name + " is not a JSON object"
	}
	m, ok := obj[member]
	if ok && len(m) > 0 && m[0] == '"' && json.Unmarshal(m, &val) == nil {
		return val, ""
	}
	return "", fail + "the value of environment variable " + name + " has no string member " + strconv.Quote(member)
}

// redactRefs is the error a configuration whose references were resolved
// is refused with, when its check or build refuses it: the plugin's
// message may quote the values (a pattern's, an enum's), so it gives way
// to one naming the references alone. A schema's refusal of a field that
// holds no reference, at any depth, quotes none and is kept; so is err
// when no reference was resolved.
func redactRefs(err error, refs []ref) error {
	if err == nil || len(refs) == 0 {
		return err
	}
	var ve *spec.ValidationError
	if errors.As(err, &ve) {
		holds := false
		for _, r := range refs {
			if r.field == ve.Field {
				return &refError{&spec.ValidationError{Field: r.field,
					Msg: r.prefix + "the value of " + r.text + " is refused by the plugin's schema"}}
			}
			holds = holds || within(r.field, ve.Field)
		}
		if !holds {
			return err
		}
	}
	texts := make([]string, len(refs))
	for i, r := range refs {
		texts[i] = r.text
	}
	e := &spec.ValidationError{Msg: "with " + strings.Join(texts, ", ") + " resolved, the configuration is refused (the values are not shown)"}
	if ve != nil {
		e.Field = ve.Field
	}
	return &refError{e}
}

// within reports whether field is outer or inside it ("" is the whole
// configuration).
func within(field, outer string) bool {
	if outer == "" || field == outer {
		return true
	}
	rest, ok := strings.CutPrefix(field, outer)
	return ok && (rest[0] == '.' || rest[0] == '[')
}
