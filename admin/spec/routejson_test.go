package spec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

// TestRouteJSONForm: a route with every field decodes and encodes back to
// the same bytes, keys in schema_def.lua's order, through json.Marshal,
// an encoder that leaves HTML characters as they are, and a Route value;
// its rare fields are in Extra, and a route without them has none.
func TestRouteJSONForm(t *testing.T) {
	full := `{"id":"r1","name":"n<&>","desc":"d","labels":{"k":"v"},"uri":"/a?x=1&y=<2>","uris":["/b","/c"],` +
		`"priority":3,"methods":["GET","POST"],"host":"h.example","hosts":["a.example"],"remote_addr":"10.0.0.1",` +
		`"remote_addrs":["10.0.0.0/8"],"vars":[["arg_a","==","b"]],"plugins":{"proxy-rewrite":{"uri":"/x"}},` +
		`"plugin_config_id":7,"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:80":1}},"upstream_id":"u1",` +
		`"service_id":"s1","script_id":"sc","timeout":{"connect":1,"send":2,"read":3},"enable_websocket":true,` +
		`"status":1,"create_time":1700000000,"update_time":1700000001}`
	// script_id is refused (refuseLua); decoded without the schema, it is
	// kept as any other field
	var r Route
	if err := json.Unmarshal([]byte(full), &r); err != nil {
		t.Fatal(err)
	}
	if r.Extra == nil || r.Extra.Desc != "d" || r.Extra.PluginConfigID != NumID(7) || len(r.Extra.Vars) != 1 ||
		r.Extra.Timeout == nil || r.Extra.Timeout.Read != 3 || r.Extra.EnableWebsocket == nil || !*r.Extra.EnableWebsocket {
		t.Fatalf("rare fields not decoded into Extra: %+v", r.Extra)
	}
	var plain bytes.Buffer
	enc := json.NewEncoder(&plain)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(&r); err != nil {
		t.Fatal(err)
	}
	if got := bytes.TrimSuffix(plain.Bytes(), []byte("\n")); string(got) != full {
		t.Errorf("encoded, HTML left as is:\n got %s\nwant %s", got, full)
	}
	escaped, _ := json.Marshal(json.RawMessage(full)) // what json.Marshal makes of the same text
	for name, v := range map[string]any{"pointer": &r, "value": r, "in a slice": []Route{r}} {
		got, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		if name == "in a slice" {
			got = got[1 : len(got)-1]
		}
		if !bytes.Equal(got, escaped) {
			t.Errorf("json.Marshal, %s:\n got %s\nwant %s", name, got, escaped)
		}
	}

	common, err := DecodeRoute([]byte(`{"id":"r2","name":"n","uri":"/bulk/2","plugins":{"proxy-rewrite":{"uri":"/a/2"}},` +
		`"upstream_id":"u2","create_time":1,"update_time":2}`))
	if err != nil {
		t.Fatal(err)
	}
	if common.Extra != nil {
		t.Errorf("a route without rare fields has Extra %+v", common.Extra)
	}
	// an empty list written is kept, as it was before
	var empty Route
	if err := json.Unmarshal([]byte(`{"id":"r3","uris":[]}`), &empty); err != nil {
		t.Fatal(err)
	}
	if empty.Extra == nil || empty.Extra.URIs == nil || len(empty.Extra.URIs) != 0 {
		t.Errorf(`"uris":[] decoded as %+v`, empty.Extra)
	}
	// decoding over a route keeps the fields data does not have
	if err := json.Unmarshal([]byte(`{"desc":"e"}`), &r); err != nil {
		t.Fatal(err)
	}
	if r.Name != "n<&>" || r.Rare().Desc != "e" || r.Rare().Script != "" || r.Rare().ScriptID != StringID("sc") {
		t.Errorf("decoded over: name %q, extra %+v", r.Name, r.Rare())
	}
	if n := unsafe.Sizeof(Route{}); n > 256 {
		t.Errorf("Route is %d bytes, over the allocator's 256-byte class", n)
	}
}

// TestRouteJSONFields: routeJSON has every JSON field of Route and
// RouteExtra, with the same tag and type, and nothing else, so that a
// field added to either is written and read.
func TestRouteJSONFields(t *testing.T) {
	tags := func(ty reflect.Type) map[string]string {
		m := map[string]string{}
		for f := range ty.Fields() {
			if tag := f.Tag.Get("json"); tag != "-" && f.Name != "Extra" {
				m[f.Name] = tag + " " + f.Type.String()
			}
		}
		return m
	}
	want := tags(reflect.TypeFor[Route]())
	for k, v := range tags(reflect.TypeFor[RouteExtra]()) {
		want[k] = v
	}
	if got := tags(reflect.TypeFor[routeJSON]()); !reflect.DeepEqual(got, want) {
		t.Errorf("routeJSON's fields %v,\nRoute's and RouteExtra's %v", got, want)
	}
}
