package adminapi

import (
	"context"
	"encoding/json"
	"net/http"
)

// groupPlugins are the plugins whose configurations with the same "group"
// share one state across the objects that carry them (limit-count's
// counter): APISIX refuses a member configured unlike the others, "group
// conf mismatched".
var groupPlugins = []string{"limit-count"}

// groupDirs are the resources whose objects carry plugins.
var groupDirs = []string{"routes", "services", "plugin_configs", "global_rules", "consumers"}

// checkGroups refuses w when one of its groupPlugins names a group that
// a stored object (other than w's own key) configures otherwise. Two
// configurations are alike when their JSON is the same, members in any
// order. As checkUniqueKeys, two writes racing can both pass.
func (a *api) checkGroups(ctx context.Context, w *write) *apiError {
	confs, _ := w.obj["plugins"].(map[string]any)
	self := a.key(w.rs.name, w.id)
	if w.rs.name == "credentials" {
		self = a.dir("consumers/"+w.consumer+"/credentials") + w.id
	}
	for _, name := range groupPlugins {
		conf, _ := confs[name].(map[string]any)
		group, _ := conf["group"].(string)
		if group == "" {
			continue
		}
		mine := canonicalJSON(conf)
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
				theirs, _ := other["plugins"].(map[string]any)
				oc, _ := theirs[name].(map[string]any)
				if g, _ := oc["group"].(string); g != group || canonicalJSON(oc) == mine {
					continue
				}
				return &apiError{Status: http.StatusBadRequest, Field: "plugins." + name + ".group",
					Msg: "failed to check the configuration of plugin " + name + " err: group conf mismatched"}
			}
		}
	}
	return nil
}

// canonicalJSON is v's JSON with object members sorted (encoding/json's
// order for maps).
func canonicalJSON(v map[string]any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
