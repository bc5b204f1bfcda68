package adminapi

import (
	"encoding/json"
	"testing"

	"coregate/admin/store"
)

func TestPatch(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","methods":["GET","POST"],"desc":"d",`+
		`"labels":{"a":"1","b":"2"},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1,"127.0.0.1:2":1}}}`), 201, "")
	kv, _ := c.st.Get(t.Context(), c.st.Prefix()+"/routes/1")
	created := c.stored("/routes/1")["create_time"]

	// Deep merge: objects merge, null deletes, arrays are replaced.
	r := c.do("PATCH", "/apisix/admin/routes/1", `{"methods":["PUT"],"desc":null,"labels":{"b":null,"c":"3"},`+
		`"upstream":{"nodes":{"127.0.0.1:2":null,"127.0.0.1:3":5}}}`)
	wantValue(t, c, r, 200, "/routes/1", `{"id":"1","uri":"/a","methods":["PUT"],"labels":{"a":"1","c":"3"},`+
		`"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1,"127.0.0.1:3":5}}}`)
	if v := r.json(t)["value"].(map[string]any); v["create_time"] != created {
		t.Fatalf("create_time %v, was %v", v["create_time"], created)
	}
	kv2, _ := c.st.Get(t.Context(), c.st.Prefix()+"/routes/1")
	if kv2.ModRevision <= kv.ModRevision || kv2.CreateRevision != kv.CreateRevision {
		t.Fatalf("revisions %+v then %+v", kv, kv2)
	}

	// The sub-path form replaces one member, creating objects on the way.
	wantValue(t, c, c.do("PATCH", "/apisix/admin/routes/1/methods", `["DELETE"]`), 200, "/routes/1",
		`{"id":"1","uri":"/a","methods":["DELETE"],"labels":{"a":"1","c":"3"},`+
			`"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1":1,"127.0.0.1:3":5}}}`)
	wantValue(t, c, c.do("PATCH", "/apisix/admin/routes/1/upstream/nodes", `{"127.0.0.1:9":2}`), 200, "/routes/1",
		`{"id":"1","uri":"/a","methods":["DELETE"],"labels":{"a":"1","c":"3"},`+
			`"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:9":2}}}`)
	wantValue(t, c, c.do("PATCH", "/apisix/admin/routes/1/labels", `null`), 200, "/routes/1",
		`{"id":"1","uri":"/a","methods":["DELETE"],"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:9":2}}}`)
	wantValue(t, c, c.do("PATCH", "/apisix/admin/routes/1/plugins/prometheus", `{}`), 200, "/routes/1",
		`{"id":"1","uri":"/a","methods":["DELETE"],"plugins":{"prometheus":{}},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:9":2}}}`)
	// An empty object replaces (APISIX cannot tell it from an empty array).
	wantValue(t, c, c.do("PATCH", "/apisix/admin/routes/1", `{"plugins":{}}`), 200, "/routes/1",
		`{"id":"1","uri":"/a","methods":["DELETE"],"plugins":{},"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:9":2}}}`)
	c.want(c.do("PATCH", "/apisix/admin/routes/1/uri/x", `"y"`), 400, `{"error_msg":"invalid sub-path: /uri"}`)

	// PATCH may set the timestamps.
	r = c.do("PATCH", "/apisix/admin/routes/1", `{"create_time":5,"update_time":6}`)
	c.want(r, 200, "")
	if v := r.json(t)["value"].(map[string]any); v["create_time"] != json.Number("5") || v["update_time"] != json.Number("6") {
		t.Fatalf("timestamps: %s", r.body)
	}

	// The result is checked as a whole; nothing invalid is stored.
	before := c.stored("/routes/1")
	c.want(c.do("PATCH", "/apisix/admin/routes/1", `{"methods":["FOO"]}`), 400, "")
	c.want(c.do("PATCH", "/apisix/admin/routes/1/upstream/nodes", `{"127.0.0.1:99999":1}`), 400, "")
	c.want(c.do("PATCH", "/apisix/admin/routes/1", `{"id":"2"}`), 400, `{"error_msg":"wrong route id","field":"id"}`)
	if after := c.stored("/routes/1"); !jsonEqual(encodeJSON(before), encodeJSON(after)) {
		t.Fatalf("changed by refused patches: %v", after)
	}

	c.want(c.do("PATCH", "/apisix/admin/routes/9", `{"uri":"/x"}`), 404, `{"message":"Key not found"}`)
	c.want(c.do("PATCH", "/apisix/admin/routes", `{"uri":"/x"}`), 400, `{"error_msg":"missing route id"}`)
	c.want(c.do("PATCH", "/apisix/admin/routes/1", ``), 400, `{"error_msg":"missing new configuration"}`)
	c.want(c.do("PATCH", "/apisix/admin/routes/1", `[1]`), 400, `{"error_msg":"invalid configuration"}`)
}

// TestPatchCompareAndSwap: PATCH writes only over the revision it read.
// The store's compare-and-swap is what makes it so; here the revision
// read is made stale by a write between the PATCH's read and its write,
// which a second PATCH from the same stale read stands for.
func TestPatchCompareAndSwap(t *testing.T) {
	c := newTestServer(t)
	c.want(c.do("PUT", "/apisix/admin/routes/1", `{"uri":"/a","upstream":`+upstream1+`}`), 201, "")
	old, _ := c.st.Get(t.Context(), c.st.Prefix()+"/routes/1")
	c.want(c.do("PATCH", "/apisix/admin/routes/1", `{"uri":"/b"}`), 200, "")
	_, _, err := c.st.Put(t.Context(), old.Key, old.Value, store.PutOptions{IfModRevision: old.ModRevision})
	if e := storeError(err); e.Status != 503 || e.Msg != "value changed before overwritten" {
		t.Fatalf("stale write: %v", err)
	}
}
