package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"

	"coregate/admin/spec"
)

// MetadataSchemaPlugin is implemented by a plugin that reads plugin
// metadata (APISIX's metadata_schema: one object per plugin, node-wide,
// PUT at /apisix/admin/plugin_metadata/<name> or listed under
// plugin_metadata in apisix.yaml). The metadata is checked against
// MetadataSchema alone; a plugin without one takes any object, as APISIX
// injects {"type": "object"} for it. An instance reads the metadata of
// its snapshot from Env.Metadata when it is built.
type MetadataSchemaPlugin interface {
	// MetadataSchema is the JSON Schema of the plugin's metadata,
	// compiled once, when first used.
	MetadataSchema() []byte
}

// ErrInvalidName is APISIX's refusal of plugin metadata for a plugin it
// does not have.
var ErrInvalidName = errors.New("invalid plugin name")

// anyObject is the metadata schema of a plugin without one (APISIX's
// injected metadata_schema).
var anyObject = []byte(`{"type": "object", "properties": {}}`)

// Settings are JSON objects by plugin name: plugin_attr of config.yaml
// (Env.Attr) or the plugin metadata of a configuration (Env.Metadata). A
// nil *Settings has none. It is read only, safe for concurrent use.
type Settings struct {
	m map[string]json.RawMessage
}

// NewSettings makes Settings of m, which it copies (the values are
// shared).
func NewSettings(m map[string]json.RawMessage) *Settings {
	return &Settings{m: maps.Clone(m)}
}

// Of returns the settings of the plugin name; nil when it has none.
func (s *Settings) Of(name string) json.RawMessage {
	if s == nil {
		return nil
	}
	return s.m[name]
}

// CheckMetadata checks the metadata of the plugin name (an object, its
// "id" member left out) against its metadata schema: ErrInvalidName for a
// plugin that is not registered, a *spec.ValidationError (APISIX's text)
// for metadata the schema refuses.
func (r *Registry) CheckMetadata(name string, raw json.RawMessage) error {
	sc, ok := r.compiled(name)
	if !ok {
		return ErrInvalidName
	}
	if sc.err != nil {
		return sc.err
	}
	return sc.metadata.Validate(raw)
}

// MetadataSchema returns the metadata schema of a registered plugin as one
// self-contained document (the injected {"type": "object"} for a plugin
// without one).
func (r *Registry) MetadataSchema(name string) ([]byte, bool) {
	sc, ok := r.compiled(name)
	if !ok || sc.err != nil {
		return nil, false
	}
	return sc.metadata.JSON(), true
}

// IndexMetadata checks the plugin metadata objects of a configuration
// (each with its plugin's name as "id") and returns them by name, without
// their "id", as Env.Metadata gives them: nil when there are none.
// Metadata of a plugin that is not registered is left out (nothing would
// read it); metadata its schema refuses is an error naming the plugin.
func (r *Registry) IndexMetadata(objs []json.RawMessage) (*Settings, error) {
	return r.IndexMetadataChecked(objs, false)
}

// IndexMetadataChecked is IndexMetadata of metadata that a registry of r's
// fingerprint checked when checked is set (Trusts): it is not checked
// again.
func (r *Registry) IndexMetadataChecked(objs []json.RawMessage, checked bool) (*Settings, error) {
	if len(objs) == 0 {
		return nil, nil
	}
	s := &Settings{m: make(map[string]json.RawMessage, len(objs))}
	for _, raw := range objs {
		name, conf, err := SplitMetadata(raw)
		if err != nil {
			return nil, err
		}
		if _, _, ok := r.Lookup(name); !ok {
			continue
		}
		if checked {
			s.m[name] = conf
			continue
		}
		if err := r.CheckMetadata(name, conf); err != nil {
			return nil, fmt.Errorf("plugin_metadata %s: invalid configuration: %w", name, err)
		}
		s.m[name] = conf
	}
	return s, nil
}

// SplitMetadata splits a plugin metadata object as stored into its
// plugin's name (its "id") and the metadata without the id.
func SplitMetadata(raw json.RawMessage) (name string, conf json.RawMessage, err error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(raw, &m); err != nil {
		return "", nil, fmt.Errorf("plugin_metadata: %w", err)
	}
	name = spec.RawID(raw, "id").String()
	if name == "" {
		return "", nil, errors.New("plugin_metadata: missing plugin name (id)")
	}
	delete(m, "id")
	conf, err = json.Marshal(m)
	return name, conf, err
}
