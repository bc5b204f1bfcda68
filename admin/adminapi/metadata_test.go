package adminapi

import (
	"fmt"
	"testing"

	"coregate/plugins"
)

// metadataPlugin is a test plugin with a metadata schema, as APISIX's
// example-plugin: {"skey", "ikey"}, both required.
type metadataPlugin struct{ testPlugin }

func (metadataPlugin) MetadataSchema() []byte {
	return []byte(`{"type":"object","properties":{"ikey":{"type":"number","minimum":0},"skey":{"type":"string"}},"required":["ikey","skey"]}`)
}

// TestPluginMetadata: /apisix/admin/plugin_metadata/{plugin}, as
// t/admin/plugin-metadata.t has it: stored at /apisix/plugin_metadata/<plugin>
// with the plugin's name as id and no timestamps, checked against the
// plugin's metadata schema (any object for a plugin without one), refused
// for a plugin the gateway does not have.
func TestPluginMetadata(t *testing.T) {
	r := plugins.NewRegistry([]plugins.Entry{{Name: "example-plugin", Priority: 0}, {Name: "key-auth", Priority: 2500}})
	r.Register("example-plugin", metadataPlugin{testPlugin(`{"type":"object"}`)})
	r.Register("key-auth", testPlugin(`{"type":"object"}`))
	st := newStore(t)
	h, err := New(Options{Store: st, Admin: testAdmin(), Plugins: r})
	if err != nil {
		t.Fatal(err)
	}
	c := serve(t, h, st)

	key := st.Prefix() + "/plugin_metadata/example-plugin"
	c.want(c.do("PUT", "/apisix/admin/plugin_metadata/example-plugin", `{"skey":"val","ikey":1}`), 201,
		`{"key":"`+key+`","value":{"id":"example-plugin","ikey":1,"skey":"val"}}`)
	c.want(c.do("PUT", "/apisix/admin/plugin_metadata/example-plugin", `{"skey":"val2","ikey":2,"id":"other"}`), 200,
		`{"key":"`+key+`","value":{"id":"example-plugin","ikey":2,"skey":"val2"}}`)
	got := c.do("GET", "/apisix/admin/plugin_metadata/example-plugin", "").json(t)
	if v, _ := got["value"].(map[string]any); v["skey"] != "val2" || v["id"] != "example-plugin" || v["create_time"] != nil {
		t.Fatalf("GET: %v", got)
	}
	if m := c.stored("/plugin_metadata/example-plugin"); fmt.Sprint(m["ikey"]) != "2" {
		t.Fatalf("stored: %v", m)
	}

	c.want(c.do("PUT", "/apisix/admin/plugin_metadata/example-plugin", `{"skey":"val"}`), 400,
		`{"error_msg":"invalid configuration: property \"ikey\" is required"}`)
	c.want(c.do("PUT", "/apisix/admin/plugin_metadata/example-plugin", `{"skey":"val","ikey":-1}`), 400, "")
	if r := c.do("PUT", "/apisix/admin/plugin_metadata/example-plugin", `{"skey":"val","ikey":-1}`).json(t); r["field"] != "ikey" {
		t.Fatalf("the refusal names no field: %v", r)
	}
	c.want(c.do("PUT", "/apisix/admin/plugin_metadata", `{"k":"v"}`), 400, `{"error_msg":"missing plugin name"}`)
	c.want(c.do("PUT", "/apisix/admin/plugin_metadata/test", `{"k":"v"}`), 400, `{"error_msg":"invalid plugin name"}`)
	c.want(c.do("PUT", "/apisix/admin/plugin_metadata/example-plugin", `{"skey":"v","ikey":1,"create_time":1}`), 400,
		`{"error_msg":"the property is forbidden:  create_time","field":"create_time"}`)
	c.want(c.do("POST", "/apisix/admin/plugin_metadata", `{"k":"v"}`), 405,
		"{\"error_msg\":\"not supported `POST` method for plugin_metadata\"}")
	// A plugin without a metadata schema takes any object.
	c.want(c.do("PUT", "/apisix/admin/plugin_metadata/key-auth", `{"k":"v"}`), 201, "")
	c.want(c.do("PUT", "/apisix/admin/plugin_metadata/key-auth", `[1]`), 400, "")

	list := c.do("GET", "/apisix/admin/plugin_metadata", "").json(t)
	if fmt.Sprint(list["total"]) != "2" {
		t.Fatalf("list: %v", list)
	}
	c.want(c.do("DELETE", "/apisix/admin/plugin_metadata/example-plugin", ""), 200, `{"deleted":"1","key":"`+key+`"}`)
	c.want(c.do("DELETE", "/apisix/admin/plugin_metadata/not_found", ""), 404, "")
	c.want(c.do("GET", "/apisix/admin/plugin_metadata/example-plugin", ""), 404, "")
}
