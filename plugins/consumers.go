package plugins

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
)

// Credential is one credential object (/apisix/consumers/<username>/credentials/<id>):
// authentication plugins' configurations that identify the consumer
// Username, beside those of the consumer's own "plugins".
type Credential struct {
	Username string
	ID       string
	Plugins  map[string]json.RawMessage
}

// ConsumerIndex is a Consumers over a fixed set of consumers and
// credentials, built once per snapshot and only read afterwards.
type ConsumerIndex struct {
	byName map[string]*Consumer
	byCred map[string]map[string]*Consumer // plugin → credential → consumer
}

var _ Consumers = (*ConsumerIndex)(nil)

// IndexConsumers indexes consumers by username and, for each registered
// plugin that is a CredentialPlugin, by the credential of their
// configuration of it and of their credential objects', once that
// configuration passed CheckConsumer (a refusal is returned). A credential
// object of an unknown consumer is skipped (APISIX ignores it too); two
// consumers with one credential of a plugin are refused with APISIX's
// message, as the Admin API refuses them on write.
func (r *Registry) IndexConsumers(consumers []*Consumer, creds []Credential) (*ConsumerIndex, error) {
	x := &ConsumerIndex{byName: make(map[string]*Consumer, len(consumers)), byCred: map[string]map[string]*Consumer{}}
	for _, c := range consumers {
		x.byName[c.Username] = c
	}
	add := func(c *Consumer, conf map[string]json.RawMessage, what string) error {
		for _, name := range slices.Sorted(maps.Keys(conf)) {
			_, p, ok := r.Lookup(name)
			if !ok {
				continue
			}
			cp, ok := p.(CredentialPlugin)
			if !ok {
				continue
			}
			if err := r.CheckConsumer(name, conf[name]); err != nil {
				return fmt.Errorf("%s: %w", what, err)
			}
			cred, err := cp.Credential(conf[name])
			if err != nil {
				return fmt.Errorf("%s: plugin %s: %w", what, name, err)
			}
			m := x.byCred[name]
			if m == nil {
				m = map[string]*Consumer{}
				x.byCred[name] = m
			}
			if prev, dup := m[cred]; dup && prev != c {
				return fmt.Errorf("duplicate key of plugin %s found with consumer: %s", name, prev.Username)
			}
			m[cred] = c
		}
		return nil
	}
	for _, c := range consumers {
		if err := add(c, c.Plugins, "consumer "+c.Username); err != nil {
			return nil, err
		}
	}
	for _, cr := range creds {
		c := x.byName[cr.Username]
		if c == nil {
			continue
		}
		if err := add(c, cr.Plugins, "credential "+cr.ID+" of consumer "+cr.Username); err != nil {
			return nil, err
		}
	}
	return x, nil
}

// ByCredential implements Consumers.
func (x *ConsumerIndex) ByCredential(plugin string, cred []byte) *Consumer {
	return x.byCred[plugin][string(cred)]
}

// ByName implements Consumers.
func (x *ConsumerIndex) ByName(username string) *Consumer { return x.byName[username] }

// Len is the number of consumers.
func (x *ConsumerIndex) Len() int { return len(x.byName) }
