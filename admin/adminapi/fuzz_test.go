package adminapi

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	"coregate/admin/spec"
	"coregate/admin/store/etcdstore"
)

// validStored checks a stored value the way the gateway reads it: spec's
// decoding for its kind, the registry for each plugin.
func validStored(key, prefix string, raw []byte) error {
	rest := strings.TrimPrefix(key, prefix+"/")
	dir, _, _ := strings.Cut(rest, "/")
	var err error
	switch {
	case dir == "routes":
		_, err = spec.DecodeRoute(raw)
	case dir == "services":
		_, err = spec.DecodeService(raw)
	case dir == "upstreams":
		_, err = spec.DecodeUpstream(raw)
	case dir == "consumers" && strings.Contains(rest, "/credentials/"):
		err = localSchema(credentialSchema)(raw)
	case dir == "consumers":
		err = spec.ValidateObject(spec.KindConsumer, raw)
	case dir == "plugin_configs":
		err = spec.ValidateObject(spec.KindPluginConfig, raw)
	case dir == "global_rules":
		err = spec.ValidateObject(spec.KindGlobalRule, raw)
	case dir == "ssls":
		_, err = spec.DecodeSSL(raw)
	case dir == "gen_id":
		return nil
	default:
		return fmt.Errorf("unexpected key %s", key)
	}
	if err != nil {
		return err
	}
	obj, ok := decodeStored(raw)
	if !ok {
		return fmt.Errorf("not an object")
	}
	for name, conf := range pluginConfs(obj) {
		if err := testPlugins.Check(name, conf); err != nil {
			return err
		}
	}
	return nil
}

// checkAnswer is the invariant every answer keeps: no 5xx but the 503 of
// a store that did not answer (a compare-and-swap that lost is tried
// again), and a body that is what the Content-Type says.
func checkAnswer(status int, body []byte) error {
	if status >= 500 {
		var m struct {
			ErrorMsg string `json:"error_msg"`
		}
		_ = json.Unmarshal(body, &m)
		switch {
		case status == 503 && strings.HasPrefix(m.ErrorMsg, "store: unavailable"):
		default:
			return fmt.Errorf("status %d: %s", status, body)
		}
	}
	if len(body) > 0 && !json.Valid(body) && status != 400 && status != 403 && !(status == 200 && string(body) == "done") {
		return fmt.Errorf("status %d: body not JSON: %q", status, body)
	}
	return nil
}

var fuzzMethods = []string{"GET", "PUT", "POST", "PATCH", "DELETE"}

// FuzzAdmin sends one request, method, path (under /apisix/admin/) and
// JSON body all from the fuzzer, and checks the answer and what the
// store holds at the key it names.
func FuzzAdmin(f *testing.F) {
	seeds := []struct {
		m          byte
		path, body string
	}{
		{1, "routes/1", `{"uri":"/a","upstream":{"nodes":{"127.0.0.1:1":1}}}`},
		{1, "routes/1", `{"uri":"/a","methods":["GET"],"plugins":{"limit-count":{"count":1,"time_window":60}},"upstream_id":"1"}`},
		{1, "upstreams/1", `{"type":"chash","key":"remote_addr","nodes":[{"host":"::1","port":80,"weight":1}]}`},
		{2, "routes", `{"uri":"/b","hosts":["a.com"],"vars":[["arg_x","==","1"]],"upstream":{"nodes":{"a:1":1}}}`},
		{3, "routes/1", `{"uri":null,"uris":["/x"],"upstream":{"nodes":{"127.0.0.1:1":null}}}`},
		{3, "routes/1/upstream/nodes", `{"127.0.0.1:2":3}`},
		{3, "routes/1/plugins/prometheus", `{}`},
		{4, "routes/1?force=true", ``},
		{1, "consumers", `{"username":"jack","plugins":{"key-auth":{"key":"k"}}}`},
		{1, "consumers/jack/credentials/c", `{"plugins":{"key-auth":{"key":"k"}}}`},
		{1, "plugin_configs/p", `{"plugins":{"prometheus":{}}}`},
		{1, "global_rules/g", `{"plugins":{"prometheus":{}}}`},
		{1, "services/s", `{"upstream_id":1,"plugins":{}}`},
		{1, "ssls/1", `{"cert":"x","key":"y","snis":["a.com"]}`},
		{0, "routes?page=1&page_size=10&name=a&label=b&uri=c&filter=upstream_id%3D1", ``},
		{0, "plugins/list", ``},
		{0, "schema/route", ``},
		{2, "schema/validate/routes", `{"uri":"/a"}`},
		{1, "routes/1?ttl=1e9", `{"uri":"/a"}`},
		{1, "routes/1", `{"uri":"/a","create_time":1}`},
		{1, "routes/1", `[`},
	}
	for _, s := range seeds {
		f.Add(s.m, s.path, []byte(s.body))
	}
	c := newTestServer(f)
	execs := 0
	f.Fuzz(func(t *testing.T, m byte, p string, body []byte) {
		if len(body) > 64<<10 || len(p) > 512 {
			return
		}
		// Every 500 executions the store is emptied and compacted: the
		// objects POSTed under new ids would otherwise pile up by the
		// million, and every list, reference check and etcd write slow
		// down with them (from 6 000 executions a second to a few hundred).
		if execs++; execs%500 == 0 {
			emptyStore(t, c.st)
		}
		method := fuzzMethods[int(m)%len(fuzzMethods)]
		req, err := http.NewRequest(method, c.url+"/apisix/admin/"+p, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("X-API-KEY", testKey)
		resp, err := c.http.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		out, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		if err := checkAnswer(resp.StatusCode, out); err != nil {
			t.Fatalf("%s %q %q: %v", method, p, body, err)
		}
		// What a write answered with is what is stored, and it is valid.
		if resp.StatusCode != 200 && resp.StatusCode != 201 || method == "GET" || method == "DELETE" {
			return
		}
		var env struct {
			Key   string          `json:"key"`
			Value json.RawMessage `json:"value"`
		}
		if json.Unmarshal(out, &env) != nil || env.Key == "" {
			return // plugins/reload, schema/validate
		}
		kv, err := c.st.Get(t.Context(), env.Key)
		if err != nil {
			t.Fatalf("%s %q %q: answered %s, then %v", method, p, body, out, err)
		}
		if !bytes.Equal(kv.Value, env.Value) {
			t.Fatalf("%s %q: answered %s, stored %s", method, p, env.Value, kv.Value)
		}
		if err := validStored(kv.Key, c.st.Prefix(), kv.Value); err != nil {
			t.Fatalf("%s %q %q: stored %s, which the gateway refuses: %v", method, p, body, kv.Value, err)
		}
	})
}

// emptyStore deletes every key under the store's prefix and compacts the
// etcd's history.
func emptyStore(t *testing.T, st *etcdstore.Store) {
	kvs, _, err := st.List(t.Context(), st.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range kvs {
		if _, err := st.Delete(t.Context(), kv.Key, 0); err != nil {
			t.Fatal(err)
		}
	}
	_, rev, err := st.List(t.Context(), st.Prefix())
	if err != nil {
		t.Fatal(err)
	}
	// With nothing written since the last compaction, rev is compacted
	// already.
	if err := st.Compact(t.Context(), rev); err != nil && !strings.Contains(err.Error(), "compacted") {
		t.Fatal(err)
	}
}
