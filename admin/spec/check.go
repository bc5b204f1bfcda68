package spec

import (
	"crypto/sha256"
	"encoding/json"
	"strings"
	"sync"
)

// Check verifies what no single object can: ids are present and unique per
// kind, and every upstream_id, service_id, plugin_config_id and group_id names an
// object of the Spec. Objects are assumed to have passed Validate. The
// first problem found is returned as a *ReferenceError
// ("route 1: upstream_id 9 not found").
func (s *Spec) Check() error {
	upstreams := make(map[string]bool, len(s.Upstreams))
	for i, u := range s.Upstreams {
		if err := addID(upstreams, "upstream", i, u.ID); err != nil {
			return err
		}
	}
	services := make(map[string]bool, len(s.Services))
	for i, sv := range s.Services {
		if err := addID(services, "service", i, sv.ID); err != nil {
			return err
		}
		if err := ref(upstreams, "service", sv.ID, "upstream_id", sv.UpstreamID); err != nil {
			return err
		}
	}
	pluginConfigs := make(map[string]bool, len(s.PluginConfigs))
	for i, pc := range s.PluginConfigs {
		if err := addID(pluginConfigs, "plugin_config", i, pc.ID); err != nil {
			return err
		}
	}
	routes := routeIDs.Get().(map[string]bool)
	defer func() {
		clear(routes)
		routeIDs.Put(routes)
	}()
	for i, r := range s.Routes {
		if err := addID(routes, "route", i, r.ID); err != nil {
			return err
		}
		if err := ref(upstreams, "route", r.ID, "upstream_id", r.UpstreamID); err != nil {
			return err
		}
		if err := ref(services, "route", r.ID, "service_id", r.ServiceID); err != nil {
			return err
		}
		if err := ref(pluginConfigs, "route", r.ID, "plugin_config_id", r.Rare().PluginConfigID); err != nil {
			return err
		}
	}
	groups := make(map[string]bool, len(s.ConsumerGroups))
	for i, g := range s.ConsumerGroups {
		if err := addID(groups, "consumer_group", i, g.ID); err != nil {
			return err
		}
	}
	consumers := make(map[string]bool, len(s.Consumers))
	for i, c := range s.Consumers {
		if err := addID(consumers, "consumer", i, StringID(c.Username)); err != nil {
			return err
		}
		if err := ref(groups, "consumer", StringID(c.Username), "group_id", c.GroupID); err != nil {
			return err
		}
	}
	creds := make(map[string]bool, len(s.Credentials))
	for i, raw := range s.Credentials {
		id := RawID(raw, "id")
		if _, _, ok := CredentialOwner(id.String()); !ok && !id.IsZero() {
			return &ReferenceError{Kind: "credential", ID: id.String(), Field: "id", Msg: "not <username>/credentials/<id>"}
		}
		if err := addID(creds, "credential", i, id); err != nil {
			return err
		}
	}
	metadata := make(map[string]bool, len(s.PluginMetadata))
	for i, raw := range s.PluginMetadata {
		if err := addID(metadata, "plugin_metadata", i, RawID(raw, "id")); err != nil {
			return err
		}
	}
	rules := make(map[string]bool, len(s.GlobalRules))
	for i, gr := range s.GlobalRules {
		if err := addID(rules, "global_rule", i, gr.ID); err != nil {
			return err
		}
	}
	ssls := make(map[string]bool, len(s.SSLs))
	for i, sl := range s.SSLs {
		if err := addID(ssls, "ssl", i, sl.ID); err != nil {
			return err
		}
	}
	secrets := make(map[string]bool, len(s.Secrets))
	for i, raw := range s.Secrets {
		id := RawID(raw, "id")
		if m, rest, ok := strings.Cut(id.String(), "/"); !ok || m == "" || rest == "" || strings.Contains(rest, "/") {
			return &ReferenceError{Kind: "secret", ID: id.String(), Field: "id", Msg: "not <manager>/<id>"}
		}
		if err := addID(secrets, "secret", i, id); err != nil {
			return err
		}
	}
	return nil
}

// routeIDs are Check's sets of route ids, reused: a worker checks every
// configuration it gets, and during a bulk load through the Admin API a
// new set for 5 000 routes at every reload was a tenth of its garbage. A
// cleared map keeps its room.
var routeIDs = sync.Pool{New: func() any { return map[string]bool{} }}

func addID(seen map[string]bool, kind string, index int, id ID) error {
	if id.IsZero() {
		return &ReferenceError{Kind: kind, ID: "#" + itoa(index), Field: "id", Msg: "missing id"}
	}
	k := id.String()
	if seen[k] {
		return &ReferenceError{Kind: kind, ID: k, Field: "id", Msg: "duplicate id"}
	}
	seen[k] = true
	return nil
}

func ref(set map[string]bool, kind string, id ID, field string, to ID) error {
	if to.IsZero() || set[to.String()] {
		return nil
	}
	return &ReferenceError{Kind: kind, ID: id.String(), Field: field, Ref: to.String(), Msg: "not found"}
}

// CredentialOwner splits a credential's id in a Spec,
// "<username>/credentials/<id>", into the consumer's username and the
// credential's own id.
func CredentialOwner(id string) (username, credID string, ok bool) {
	username, credID, ok = strings.Cut(id, "/credentials/")
	if !ok || username == "" || credID == "" || strings.Contains(username, "/") || strings.Contains(credID, "/") {
		return "", "", false
	}
	return username, credID, true
}

// RawID reads the id-like member key ("id", "username") of a JSON object;
// the zero ID when it is absent or not an id.
func RawID(raw json.RawMessage, key string) ID {
	v, err := parseJSON(raw)
	if err != nil || v.kind != jObject {
		return ID{}
	}
	m := v.get(key)
	if m == nil {
		return ID{}
	}
	var id ID
	switch m.kind {
	case jString:
		id = ID{Str: m.s}
	case jNumber:
		n, ok := m.integer()
		if !ok {
			return ID{}
		}
		id = NumID(n)
	}
	return id
}

// SetHash computes Hash from the canonical JSON of the Spec's objects (its
// JSON form without the hash) and returns it.
func (s *Spec) SetHash() [32]byte {
	c := *s
	c.Hash = [32]byte{}
	b, err := json.Marshal(c)
	if err != nil {
		// Only a RawMessage that is not JSON can fail; hash what we have so
		// that two such specs still differ from every valid one.
		b = []byte(err.Error())
	}
	s.Hash = sha256.Sum256(b)
	if err == nil && len(b) >= 2 {
		_, _ = encoded.do(s.Hash, func() ([]byte, error) { return withHash(b, s.Hash), nil })
	}
	return s.Hash
}
