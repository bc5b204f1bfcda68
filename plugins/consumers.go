package plugins

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"

	"coregate/admin/spec"
	"coregate/httpvar"
)

// Credential is one credential object (/apisix/consumers/<username>/credentials/<id>):
// authentication plugins' configurations that identify the consumer
// Username, beside those of the consumer's own "plugins".
type Credential struct {
	Username string
	ID       string
	Plugins  map[string]json.RawMessage
}

// ErrNotAuth: a credential object holds a plugin that does not
// authenticate (is no CredentialPlugin). The text is APISIX's.
var ErrNotAuth = errors.New("only supports auth type plugins in consumer credential")

// CheckCredential checks the plugins of a credential object: each must be
// an authentication plugin (a CredentialPlugin: a credential is how a
// consumer is found), as APISIX requires, whatever its configuration. It
// returns the first that is not, with ErrNotAuth. The configurations
// themselves are CheckAll's.
func (r *Registry) CheckCredential(confs map[string]json.RawMessage) (name string, err error) {
	for _, name := range slices.Sorted(maps.Keys(confs)) {
		if _, p, _ := r.Lookup(name); !isAuth(p) {
			return name, fmt.Errorf("%w (plugin %s)", ErrNotAuth, name)
		}
	}
	return "", nil
}

func isAuth(p Plugin) bool {
	_, ok := p.(CredentialPlugin)
	return ok
}

// ConsumerIndex is a Consumers over a fixed set of consumers and
// credentials, built once per snapshot and only read afterwards.
type ConsumerIndex struct {
	byName  map[string]*Consumer
	byCred  map[string]map[string]Found // plugin → credential → its consumer
	refused []error
}

var _ Consumers = (*ConsumerIndex)(nil)

// IndexConsumers indexes consumers by username and, for each registered
// plugin that is a CredentialPlugin, by the credential of their
// configuration of it and of their credential objects', once that
// configuration passed CheckConsumer (a refusal is returned), its
// references resolved. A credential object of an unknown consumer is
// skipped (APISIX ignores it too); two consumers with one credential of a
// plugin are refused with APISIX's message, as the Admin API refuses them
// on write.
//
// A consumer or a credential object refused because of a reference
// (ErrReference: one of its plugins' configurations holds a reference
// that does not resolve here, or whose value the plugin refuses; or its
// credential, resolved, is another's) is left out instead, whole, and the
// rest indexed: the Admin API checked it where it could resolve it, so
// its refusal depends on this process's environment, and no credential
// of it is matched, resolved or not. A consumer left out takes its
// credential objects with it. Refused lists them.
func (r *Registry) IndexConsumers(consumers []*Consumer, creds []Credential) (*ConsumerIndex, error) {
	return r.IndexConsumersChecked(consumers, creds, false)
}

// IndexConsumersChecked is IndexConsumers of consumers and credentials
// that a registry of r's fingerprint checked when checked is set (Trusts):
// their configurations without references are not checked again.
func (r *Registry) IndexConsumersChecked(consumers []*Consumer, creds []Credential, checked bool) (*ConsumerIndex, error) {
	x := &ConsumerIndex{byName: make(map[string]*Consumer, len(consumers)), byCred: map[string]map[string]Found{}}
	// fromRef marks the credentials that a reference resolved to.
	fromRef := map[[2]string]bool{}
	type credential struct {
		plugin, value string
		data          any
		ref           bool
	}
	// add indexes one object's credentials, all or none.
	add := func(c *Consumer, credID string, conf map[string]json.RawMessage, what string) error {
		var found []credential
		for _, name := range slices.Sorted(maps.Keys(conf)) {
			_, p, ok := r.Lookup(name)
			if !ok {
				continue
			}
			cp, isCred := p.(CredentialPlugin)
			if !isCred && !mayHoldRefs(conf[name]) {
				continue
			}
			resolved, refs, err := r.checkConsumer(name, p, conf[name], checked)
			switch {
			case err != nil && (isCred || errors.Is(err, ErrReference)):
				return fmt.Errorf("%s: %w", what, err)
			case !isCred:
				// Another plugin's configuration is checked when it
				// is built; one whose reference does not resolve
				// leaves the consumer out here rather than every
				// route it could be attached on.
				continue
			}
			cred, err := cp.Credential(resolved)
			if err != nil {
				return fmt.Errorf("%s: plugin %s: %w", what, name, redactRefs(err, refs))
			}
			var data any
			if dp, ok := p.(CredentialDataPlugin); ok {
				if data, err = dp.CredentialData(resolved); err != nil {
					return fmt.Errorf("%s: plugin %s: %w", what, name, redactRefs(err, refs))
				}
			}
			found = append(found, credential{name, cred, data, len(refs) > 0})
		}
		for _, f := range found {
			if prev, dup := x.byCred[f.plugin][f.value]; dup && prev.Consumer != c {
				err := fmt.Errorf("duplicate key of plugin %s found with consumer: %s", f.plugin, prev.Consumer.Username)
				if f.ref || fromRef[[2]string{f.plugin, f.value}] {
					err = fmt.Errorf("%s: %w", what, &refError{&spec.ValidationError{
						Msg: err.Error() + ", after references resolved"}})
				}
				return err
			}
		}
		for _, f := range found {
			m := x.byCred[f.plugin]
			if m == nil {
				m = map[string]Found{}
				x.byCred[f.plugin] = m
			}
			m[f.value] = Found{Consumer: c, CredentialID: credID, Data: f.data}
			if f.ref {
				fromRef[[2]string{f.plugin, f.value}] = true
			}
		}
		return nil
	}
	for _, c := range consumers {
		if err := add(c, "", c.Plugins, "consumer "+c.Username); err != nil {
			if !errors.Is(err, ErrReference) {
				return nil, err
			}
			x.refused = append(x.refused, err)
			continue
		}
		x.byName[c.Username] = c
	}
	for _, cr := range creds {
		c := x.byName[cr.Username]
		if c == nil {
			continue
		}
		if err := add(c, cr.ID, cr.Plugins, "credential "+cr.ID+" of consumer "+cr.Username); err != nil {
			if !errors.Is(err, ErrReference) {
				return nil, err
			}
			x.refused = append(x.refused, err)
		}
	}
	return x, nil
}

// Refused lists the consumers and credential objects IndexConsumers left
// out, each error naming the object, the plugin and the field, never a
// value the environment gave.
func (x *ConsumerIndex) Refused() []error { return x.refused }

// ByCredential implements Consumers.
func (x *ConsumerIndex) ByCredential(plugin string, cred []byte) *Consumer {
	return x.byCred[plugin][string(cred)].Consumer
}

// Find implements Consumers.
func (x *ConsumerIndex) Find(plugin string, cred []byte) Found {
	return x.byCred[plugin][string(cred)]
}

// ByName implements Consumers.
func (x *ConsumerIndex) ByName(username string) *Consumer { return x.byName[username] }

// Len is the number of consumers.
func (x *ConsumerIndex) Len() int { return len(x.byName) }

// The request headers attach_consumer sets for the upstream.
const (
	HeaderConsumerUsername = "X-Consumer-Username"
	HeaderCredentialID     = "X-Credential-Identifier"
	HeaderConsumerCustomID = "X-Consumer-Custom-ID"
)

// underscored are the names of AttachConsumer's headers with '_' in
// place of one '-' or more: nginx drops a client's field of such a name
// (underscores_in_headers off), and an upstream that reads headers by
// their CGI names (HTTP_X_CONSUMER_USERNAME: PHP, WSGI) cannot tell one
// from the header AttachConsumer sets. Read only.
var underscored = func() []string {
	var out []string
	for _, name := range [...]string{HeaderConsumerUsername, HeaderCredentialID, HeaderConsumerCustomID} {
		var dashes []int
		for i := range len(name) {
			if name[i] == '-' {
				dashes = append(dashes, i)
			}
		}
		for m := 1; m < 1<<len(dashes); m++ {
			b := []byte(name)
			for j, i := range dashes {
				if m&(1<<j) != 0 {
					b[i] = '_'
				}
			}
			out = append(out, string(b))
		}
	}
	return out
}()

// removeUnderscored removes the client's fields whose name is one of
// underscored, in any case.
func removeUnderscored(c Ctx) {
	for i := 0; ; i++ {
		name, _, ok := c.RequestHeaderAt(i)
		if !ok {
			return
		}
		if bytes.IndexByte(name, '_') < 0 {
			continue
		}
		for _, u := range underscored {
			if httpvar.EqualFold(name, u) {
				c.SetRequestHeader(u, nil)
			}
		}
	}
}

// AttachConsumer is APISIX's consumer.attach_consumer, what an
// authentication plugin does with the consumer k it found: the upstream
// request gets X-Consumer-Username (k's username), X-Credential-Identifier
// (credentialID, the credential object that matched: Found.CredentialID)
// and X-Consumer-Custom-ID (customID: k.CustomID, or "" for an anonymous
// consumer, which APISIX attaches without one), each replacing what the
// client sent and removed when empty, so that a client cannot claim to be
// a consumer; a field of one of their names with '_' for '-' is removed
// too, as nginx drops it; then k is attached (Ctx.SetConsumer).
//
// buf is the caller's scratch buffer, which the values pass through (the
// Ctx copies them); AttachConsumer returns it, grown, for the caller to
// keep for its next call, so that a request allocates nothing once it has
// grown. It is for the phases of one event loop, as the Ctx.
func AttachConsumer(c Ctx, k *Consumer, credentialID, customID string, buf []byte) []byte {
	removeUnderscored(c)
	buf = append(buf[:0], k.Username...)
	c.SetRequestHeader(HeaderConsumerUsername, buf)
	for _, h := range [2]struct{ name, value string }{{HeaderCredentialID, credentialID}, {HeaderConsumerCustomID, customID}} {
		if h.value == "" {
			c.SetRequestHeader(h.name, nil)
			continue
		}
		buf = append(buf[:0], h.value...)
		c.SetRequestHeader(h.name, buf)
	}
	c.SetConsumer(k)
	return buf
}
