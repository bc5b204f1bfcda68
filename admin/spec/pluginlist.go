package spec

import (
	"encoding/json"
	"slices"
	"strings"
)

// PluginConf is one plugin's configuration in a PluginList.
type PluginConf struct {
	Name string
	Raw  json.RawMessage
}

// PluginList is an object's plugins as a list sorted by name: the form
// a worker keeps of each route's (Route.PluginList), 40 bytes a plugin
// where a map of up to eight takes about 400 bytes whatever its length.
// A list is not written once made: it is safe for concurrent reads.
type PluginList []PluginConf

// MakePluginList returns m's plugins by name (nil for an empty m).
func MakePluginList(m map[string]json.RawMessage) PluginList {
	if len(m) == 0 {
		return nil
	}
	l := make(PluginList, 0, len(m))
	for name, raw := range m {
		l = append(l, PluginConf{name, raw})
	}
	slices.SortFunc(l, func(a, b PluginConf) int { return strings.Compare(a.Name, b.Name) })
	return l
}

// Map returns l as a new map (nil for an empty l); the configurations'
// bytes are l's.
func (l PluginList) Map() map[string]json.RawMessage {
	if len(l) == 0 {
		return nil
	}
	m := make(map[string]json.RawMessage, len(l))
	for _, p := range l {
		m[p.Name] = p.Raw
	}
	return m
}

// CompactPlugins moves r's plugins from Plugins to PluginList, sorted by
// name, Plugins left nil; near, if not nil, is a route compacted before
// (the one before r in its Spec): r takes near's plugin names, and
// near's configuration where r's is the same bytes, for its own (routes
// loaded in bulk are mostly alike). r's plugins read the same afterwards
// through PluginList. It writes r only, and reads near.
func (r *Route) CompactPlugins(near *Route) {
	if len(r.Plugins) == 0 {
		r.Plugins = nil
		return
	}
	l := MakePluginList(r.Plugins)
	if near != nil {
		// Both are sorted: one pass over each.
		j := 0
		for i := range l {
			for j < len(near.PluginList) && near.PluginList[j].Name < l[i].Name {
				j++
			}
			if j == len(near.PluginList) {
				break
			}
			if n := &near.PluginList[j]; n.Name == l[i].Name {
				l[i].Name = n.Name
				if string(n.Raw) == string(l[i].Raw) {
					l[i].Raw = n.Raw
				}
			}
		}
	}
	r.Plugins, r.PluginList = nil, l
}
