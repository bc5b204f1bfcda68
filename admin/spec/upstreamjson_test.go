package spec

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"
)

// TestUpstreamJSONForm: an upstream with every field decodes and encodes
// back to the same bytes, keys in schema_def.lua's order, alone and inside
// a route, through json.Marshal and an encoder that leaves HTML characters
// as they are; its rare fields are in Extra, and one of type and nodes
// alone has none.
func TestUpstreamJSONForm(t *testing.T) {
	full := `{"id":"u1","name":"n<&>","desc":"d","labels":{"k":"v"},"type":"chash","nodes":{"127.0.0.1:80":1},` +
		`"service_name":"svc","discovery_type":"dns","discovery_args":{"a":1},"hash_on":"header","key":"x-k",` +
		`"retries":2,"retry_timeout":1.5,"timeout":{"connect":1,"send":2,"read":3},"scheme":"https",` +
		`"pass_host":"rewrite","upstream_host":"h.example","keepalive_pool":{"size":10,"idle_timeout":5,"requests":3},` +
		`"checks":{"active":{"http_path":"/"}},"tls":{"verify":true},"create_time":1700000000,"update_time":1700000001}`
	var u Upstream
	if err := json.Unmarshal([]byte(full), &u); err != nil {
		t.Fatal(err)
	}
	if u.Extra == nil || u.Extra.Name != "n<&>" || u.Extra.Key != "x-k" || *u.Extra.Retries != 2 ||
		u.Extra.Timeout == nil || u.Extra.Timeout.Read != 3 || u.Extra.KeepalivePool == nil || string(u.Extra.TLS) != `{"verify":true}` {
		t.Fatalf("rare fields not decoded into Extra: %+v", u.Extra)
	}
	if u.Type != "chash" || len(u.Nodes.List) != 1 || u.CreateTime != 1700000000 {
		t.Fatalf("common fields: %+v", u)
	}
	plain := func(v any) string {
		var w bytes.Buffer
		enc := json.NewEncoder(&w)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			t.Fatal(err)
		}
		return string(bytes.TrimSuffix(w.Bytes(), []byte("\n")))
	}
	if got := plain(&u); got != full {
		t.Errorf("encoded, HTML left as is:\n got %s\nwant %s", got, full)
	}
	escaped, _ := json.Marshal(json.RawMessage(full))
	for name, v := range map[string]any{"pointer": &u, "value": u} {
		if got, err := json.Marshal(v); err != nil || !bytes.Equal(got, escaped) {
			t.Errorf("json.Marshal, %s:\n got %s, %v\nwant %s", name, got, err, escaped)
		}
	}
	route := `{"id":"r1","uri":"/a","upstream":` + full + `}`
	var r Route
	if err := json.Unmarshal([]byte(route), &r); err != nil {
		t.Fatal(err)
	}
	if got := plain(&r); got != route {
		t.Errorf("in a route, HTML left as is:\n got %s\nwant %s", got, route)
	}

	common, err := DecodeRoute([]byte(`{"id":"r2","uri":"/b","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:80":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	if common.Upstream == nil || common.Upstream.Extra != nil {
		t.Errorf("an upstream of type and nodes alone has Extra %+v", common.Upstream)
	}
	// an empty map written is kept, as it was before
	var empty Upstream
	if err := json.Unmarshal([]byte(`{"labels":{}}`), &empty); err != nil {
		t.Fatal(err)
	}
	if empty.Extra == nil || empty.Extra.Labels == nil || len(empty.Extra.Labels) != 0 {
		t.Errorf(`"labels":{} decoded as %+v`, empty.Extra)
	}
	// decoding over an upstream keeps the fields data does not have
	if err := json.Unmarshal([]byte(`{"desc":"e"}`), &u); err != nil {
		t.Fatal(err)
	}
	if u.Type != "chash" || u.Rare().Desc != "e" || u.Rare().Key != "x-k" {
		t.Errorf("decoded over: type %q, extra %+v", u.Type, u.Rare())
	}
	if n := unsafe.Sizeof(Upstream{}); n > 96 {
		t.Errorf("Upstream is %d bytes, over the allocator's 96-byte class", n)
	}
}

// TestUpstreamJSONFields: upstreamJSON has every JSON field of Upstream
// and UpstreamExtra, with the same tag and type, and nothing else, so
// that a field added to either is written and read.
func TestUpstreamJSONFields(t *testing.T) {
	tags := func(ty reflect.Type) map[string]string {
		m := map[string]string{}
		for f := range ty.Fields() {
			if tag := f.Tag.Get("json"); tag != "-" {
				m[f.Name] = tag + " " + f.Type.String()
			}
		}
		return m
	}
	want := tags(reflect.TypeFor[Upstream]())
	for k, v := range tags(reflect.TypeFor[UpstreamExtra]()) {
		want[k] = v
	}
	if got := tags(reflect.TypeFor[upstreamJSON]()); !reflect.DeepEqual(got, want) {
		t.Errorf("upstreamJSON's fields %v,\nUpstream's and UpstreamExtra's %v", got, want)
	}
}
