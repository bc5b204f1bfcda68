package control

import (
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
)

// sameBytes reports whether a and b are the same bytes in memory, not
// only equal ones.
func sameBytes(a, b []byte) bool {
	return len(a) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b)
}

// nameOf is the name string of plugin name in r's plugin list.
func nameOf(t *testing.T, r *spec.Route, name string) string {
	t.Helper()
	for _, p := range r.PluginList {
		if p.Name == name {
			return p.Name
		}
	}
	t.Fatalf("route %s has no %s", r.ID, name)
	return ""
}

// confOf is the configuration of plugin name in r's plugin list.
func confOf(r *spec.Route, name string) []byte {
	for _, p := range r.PluginList {
		if p.Name == name {
			return p.Raw
		}
	}
	return nil
}

// compacted is r as a worker decodes it: its plugins a list
// (spec.Route.CompactPlugins).
func compacted(r *spec.Route) *spec.Route {
	c := *r
	c.CompactPlugins(nil)
	return &c
}

// asSent is s with its routes' plugins as maps again, as sent, where
// the worker keeps lists.
func asSent(s *spec.Spec) *spec.Spec {
	c := *s
	c.Routes = make([]*spec.Route, len(s.Routes))
	for i, r := range s.Routes {
		sent := *r
		if sent.PluginList != nil {
			sent.Plugins, sent.PluginList = sent.PluginList.Map(), nil
		}
		c.Routes[i] = &sent
	}
	return &c
}

// TestSharedPluginConfigs: a route decoded after one with the same
// plugin configuration (a Config's, or a Delta's, whether the route
// before is new or kept from the base) shares its bytes and the plugins'
// names, one whose configuration differs has its own bytes, and what the
// worker decodes is the Spec sent all the same, its routes' plugins as
// lists (spec.Route.PluginList), Plugins nil.
func TestSharedPluginConfigs(t *testing.T) {
	const same = `"proxy-rewrite":{"headers":{"set":{"X-Bench":"1"}}}`
	base := &spec.Spec{Routes: []*spec.Route{
		mustRoute(t, `{"id":"r1","uri":"/1","plugins":{`+same+`,"response-rewrite":{"headers":{"set":{"X-Route":"1"}}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`),
		mustRoute(t, `{"id":"r2","uri":"/2","plugins":{`+same+`,"response-rewrite":{"headers":{"set":{"X-Route":"2"}}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`),
		mustRoute(t, `{"id":"r3","uri":"/3","plugins":{"proxy-rewrite":{"uri":"/other"}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`),
	}}
	base.SetHash()
	full, err := EncodeSpec(base)
	if err != nil {
		t.Fatal(err)
	}
	held, err := DecodeSpec(full, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range held.Routes {
		if d := cmp.Diff(compacted(base.Routes[i]), r); d != "" {
			t.Errorf("route %s decoded (-sent +decoded):\n%s", r.ID, d)
		}
	}
	r1, r2, r3 := held.Routes[0], held.Routes[1], held.Routes[2]
	if !sameBytes(confOf(r1, "proxy-rewrite"), confOf(r2, "proxy-rewrite")) {
		t.Error("routes r1 and r2, the same proxy-rewrite: two copies of its bytes")
	}
	if sameBytes(confOf(r1, "response-rewrite"), confOf(r2, "response-rewrite")) {
		t.Error("routes r1 and r2, response-rewrites that differ: the same bytes")
	}
	for _, name := range []string{"proxy-rewrite", "response-rewrite"} {
		if a, b := nameOf(t, r1, name), nameOf(t, r2, name); unsafe.StringData(a) != unsafe.StringData(b) {
			t.Errorf("routes r1 and r2: two copies of the name %s", name)
		}
	}
	if sameBytes(confOf(r2, "proxy-rewrite"), confOf(r3, "proxy-rewrite")) {
		t.Error("routes r2 and r3, proxy-rewrites that differ: the same bytes")
	}

	// A Delta: r4 new after r2, kept from the base; r5 new after r4.
	next := &spec.Spec{Routes: []*spec.Route{base.Routes[0], base.Routes[1],
		mustRoute(t, `{"id":"r4","uri":"/4","plugins":{`+same+`,"response-rewrite":{"headers":{"set":{"X-Route":"4"}}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`),
		mustRoute(t, `{"id":"r5","uri":"/5","plugins":{`+same+`},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`),
		base.Routes[2],
	}}
	next.SetHash()
	payload, ok, err := EncodeDelta(base, next)
	if err != nil || !ok {
		t.Fatalf("EncodeDelta: ok %v, %v", ok, err)
	}
	got, err := DecodeDelta(payload, held, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range got.Routes {
		if d := cmp.Diff(compacted(next.Routes[i]), r); d != "" {
			t.Errorf("route %s decoded from a Delta (-sent +decoded):\n%s", r.ID, d)
		}
	}
	r4, r5 := got.Routes[2], got.Routes[3]
	if got.Routes[1] != r2 {
		t.Fatal("route r2 not kept from the base")
	}
	if !sameBytes(confOf(r4, "proxy-rewrite"), confOf(r1, "proxy-rewrite")) || !sameBytes(confOf(r5, "proxy-rewrite"), confOf(r1, "proxy-rewrite")) {
		t.Error("routes r4 and r5 of a Delta, the base's proxy-rewrite: copies of its bytes")
	}
	if a, b := nameOf(t, r4, "response-rewrite"), nameOf(t, r2, "response-rewrite"); unsafe.StringData(a) != unsafe.StringData(b) {
		t.Error("route r4 of a Delta: a copy of the name response-rewrite")
	}
}
