package spec

import (
	"encoding/json"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
)

// TestCompactPlugins: a route's plugins moved to its PluginList are the
// same plugins by name, Plugins left nil, read as the same map again
// (Map); a route compacted after one shares its plugin names, and the
// configurations of the same bytes; a configuration that is not an
// object is refused from the list as from the map.
func TestCompactPlugins(t *testing.T) {
	if n := unsafe.Sizeof(PluginConf{}); n != 40 {
		t.Errorf("PluginConf is %d bytes, want 40", n)
	}
	decode := func(js string) *Route {
		t.Helper()
		r, err := DecodeRoute([]byte(js))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	near := decode(`{"uri":"/1","plugins":{"response-rewrite":{"headers":{"X-R":"1"}},"proxy-rewrite":{"uri":"/a"},"cors":{}}}`)
	r := decode(`{"uri":"/2","plugins":{"response-rewrite":{"headers":{"X-R":"2"}},"proxy-rewrite":{"uri":"/a"},"echo":{"body":"x"}}}`)
	want := r.Plugins
	near.CompactPlugins(nil)
	r.CompactPlugins(near)
	if r.Plugins != nil || near.Plugins != nil {
		t.Fatal("Plugins kept beside the list")
	}
	var names []string
	for _, p := range r.PluginList {
		names = append(names, p.Name)
	}
	if d := cmp.Diff([]string{"echo", "proxy-rewrite", "response-rewrite"}, names); d != "" {
		t.Errorf("list's names (-want +got):\n%s", d)
	}
	if d := cmp.Diff(want, r.PluginList.Map()); d != "" {
		t.Errorf("list read as a map (-want +got):\n%s", d)
	}
	same := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	if !same(r.PluginList[1].Name, near.PluginList[1].Name) || !same(r.PluginList[2].Name, near.PluginList[2].Name) {
		t.Error("names in both routes: copies")
	}
	if unsafe.SliceData(r.PluginList[1].Raw) != unsafe.SliceData(near.PluginList[1].Raw) {
		t.Error("proxy-rewrite, the same bytes in both routes: a copy")
	}
	if unsafe.SliceData(r.PluginList[2].Raw) == unsafe.SliceData(near.PluginList[2].Raw) {
		t.Error("response-rewrites that differ: the same bytes")
	}
	empty := decode(`{"uri":"/3","plugins":{}}`)
	empty.CompactPlugins(r)
	if empty.Plugins != nil || empty.PluginList != nil || PluginList(nil).Map() != nil || MakePluginList(nil) != nil {
		t.Error("no plugins: a map or a list made")
	}

	bad := &Route{URI: "/4", PluginList: PluginList{{"proxy-rewrite", json.RawMessage(`[1]`)}}}
	err := bad.checkValues()
	if ve, ok := err.(*ValidationError); !ok || ve.Field != "plugins.proxy-rewrite" {
		t.Errorf("a list's configuration not an object: %v, want plugins.proxy-rewrite refused", err)
	}
}
