package control

import (
	"bytes"
	"encoding/json"

	"coregate/admin/spec"
)

// maxShared is the most plugins of a route whose names and configurations
// sharePlugins shares; a route with more is left as decoded.
const maxShared = 16

// sharePlugins has route r, just decoded, use the plugin names of near
// (the route before it in the Spec) for its own, and near's
// configuration of a plugin where r's is the same bytes: routes loaded
// in bulk are mostly alike (at 50 000 routes with the same proxy-rewrite,
// its bytes and both plugins' names were 80 bytes a route of a worker's
// heap, each decoded on its own). r's plugins read the same afterwards;
// its map is filled again, in place. A configuration is never written
// once decoded (the worker reads its Spec only), so sharing its bytes is
// safe. It runs off the event loop, on the decoding goroutine, and reads
// near only.
func sharePlugins(r, near *spec.Route) {
	if r == nil || near == nil || len(r.Plugins) == 0 || len(near.Plugins) == 0 || len(r.Plugins) > maxShared {
		return
	}
	type plugin struct {
		name string
		raw  json.RawMessage
	}
	var buf [maxShared]plugin
	list, same := buf[:0], 0
	for name, raw := range r.Plugins {
		for k, v := range near.Plugins {
			if k == name {
				same++
				name = k
				if bytes.Equal(v, raw) {
					raw = v
				}
				break
			}
		}
		list = append(list, plugin{name, raw})
	}
	if same == 0 {
		return
	}
	clear(r.Plugins)
	for _, p := range list {
		r.Plugins[p.name] = p.raw
	}
}
