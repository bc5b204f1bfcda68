package plugintest

import (
	"encoding/json"
	"fmt"
	"slices"

	"coregate/plugins"
)

// Upstreams is a plugins.Upstreams for a plugin's unit tests (the
// worker's compiles real upstreams): ByID gives the id, a string, for the
// ids in IDs; Inline gives the upstream's "name", a string, or its JSON
// when it has none. Ctx.Chosen is then what the plugin chose. It is
// read-only once made.
type Upstreams struct{ IDs []string }

var _ plugins.Upstreams = (*Upstreams)(nil)

// ByID implements plugins.Upstreams.
func (u *Upstreams) ByID(id string) (plugins.Upstream, error) {
	if !slices.Contains(u.IDs, id) {
		return nil, fmt.Errorf("%w: %s", plugins.ErrNoUpstream, id)
	}
	return id, nil
}

// Inline implements plugins.Upstreams.
func (u *Upstreams) Inline(raw json.RawMessage) (plugins.Upstream, error) {
	var o struct {
		Name string `json:"name"`
	}
	if err := json.Unmarshal(raw, &o); err != nil {
		return nil, err
	}
	if o.Name != "" {
		return o.Name, nil
	}
	return string(raw), nil
}
