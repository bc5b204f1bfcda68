package adminapi

import (
	"context"
	"encoding/json"
	"maps"
	"net/http"
	"slices"

	"coregate/plugins"
)

// groupDirs are the resources whose objects carry plugins.
var groupDirs = []string{"routes", "services", "plugin_configs", "global_rules", "consumers", "consumer_groups"}

// checkGroups refuses w when one of its plugins that is a
// plugins.GroupPlugin names a group that a stored object (other than w's
// own key) configures otherwise: configurations are compared as APISIX
// compares them, with their defaults (GroupConf). As checkUniqueKeys, two
// writes racing can both pass.
func (a *api) checkGroups(ctx context.Context, w *write) *apiError {
	confs, _ := w.obj["plugins"].(map[string]any)
	self := a.key(w.rs.name, w.id)
	if w.rs.name == "credentials" {
		self = a.dir("consumers/"+w.consumer+"/credentials") + w.id
	}
	for _, name := range slices.Sorted(maps.Keys(confs)) {
		_, impl, _ := a.plugins.Lookup(name)
		gp, ok := impl.(plugins.GroupPlugin)
		if !ok {
			continue
		}
		group, mine := groupConf(gp, confs[name])
		if group == "" {
			continue
		}
		for _, dir := range groupDirs {
			kvs, _, err := a.st.List(ctx, a.dir(dir))
			if err != nil {
				return storeError(err)
			}
			for _, kv := range kvs {
				if kv.Key == self {
					continue
				}
				other, ok := decodeStored(kv.Value)
				if !ok {
					continue
				}
				a.openPluginsOf(other, dir == "consumers") // compared in clear, as sent
				theirs, _ := other["plugins"].(map[string]any)
				oc, ok := theirs[name]
				if !ok {
					continue
				}
				if g, canon := groupConf(gp, oc); g != group || canon == mine {
					continue
				}
				return &apiError{Status: http.StatusBadRequest, Field: "plugins." + name + ".group",
					Msg: "failed to check the configuration of plugin " + name + " err: group conf mismatched"}
			}
		}
	}
	return nil
}

// groupConf is GroupConf of a configuration as decoded from JSON; no
// group for one that does not encode or decode.
func groupConf(gp plugins.GroupPlugin, conf any) (group, canon string) {
	raw, err := json.Marshal(conf)
	if err != nil {
		return "", ""
	}
	g, c, err := gp.GroupConf(raw)
	if err != nil {
		return "", ""
	}
	return g, string(c)
}
