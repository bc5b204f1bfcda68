package storesync

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"os"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/internal/testcert"
)

// wholeJSON is sp's JSON form as encoding/json makes it over the whole
// Spec (MarshalJSON of a Spec without a hash, which keeps no form), with
// its hash added as MarshalJSON adds it: what the local copy held before
// it was streamed an object at a time.
func wholeJSON(t *testing.T, sp *spec.Spec) []byte {
	t.Helper()
	c := *sp
	c.Hash = [32]byte{}
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	b = append(b[:len(b)-1], `,"hash":"`...)
	b = hex.AppendEncode(b, sp.Hash[:])
	return append(b, `"}`...)
}

// copySpec is the local copy's "spec", as written.
func copySpec(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var c struct {
		Spec json.RawMessage `json:"spec"`
	}
	if err := json.Unmarshal(b, &c); err != nil {
		t.Fatal(err)
	}
	return c.Spec
}

// TestCopyAsWhole: the local copy of a configuration with every kind of
// object (and characters encoding/json escapes) holds the Spec's JSON
// byte for byte as encoding/json writes it whole, and reads back as the
// Spec with its Hash, written at Load and then through Watch, whose
// writes keep the forms of the objects that did not change: after a
// route is replaced, one deleted, one added, a credential replaced and
// plugin metadata deleted, the copy holds the new Spec, the same way.
func TestCopyAsWhole(t *testing.T) {
	e := newEnv(t)
	c := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	ssl, err := json.Marshal(map[string]any{"id": "1", "cert": c.CertPEM, "key": c.KeyPEM, "snis": []string{"a.com"}, "desc": "<a & b>"})
	if err != nil {
		t.Fatal(err)
	}
	e.put("upstreams/u1", `{"id":"u1","type":"roundrobin","nodes":{"127.0.0.1:1980":1},"desc":"<u1>"}`)
	e.put("routes/1", `{"id":"1","uri":"/one","upstream_id":"u1","desc":"a <b> & c","plugins":{"response-rewrite":{"headers":{"set":{"X-R":"<1>"}}}}}`)
	e.put("routes/2", route("/two"))
	e.put("routes/3", `{"id":"3","uri":"/three","service_id":"s1","plugin_config_id":"p1"}`)
	e.put("services/s1", `{"upstream_id":"u1","name":"s & t"}`)
	e.put("consumer_groups/g1", `{"plugins":{"prometheus":{}}}`)
	e.put("consumers/jack", `{"username":"jack","group_id":"g1","plugins":{"key-auth":{"key":"k<0>"}}}`)
	e.put("consumers/jack/credentials/c1", `{"plugins":{"key-auth":{"key":"k&1"}}}`)
	e.put("plugin_configs/p1", `{"plugins":{"prometheus":{}}}`)
	e.put("global_rules/g1", `{"plugins":{"prometheus":{}}}`)
	e.put("plugin_metadata/prometheus", `{"disabled_labels":{"http_status":["node"]}}`)
	e.put("ssls/1", string(ssl))
	e.put("secrets/vault/v1", `{"uri":"http://127.0.0.1:1","prefix":"kv/<x>","token":"t&t"}`)
	s := e.syncer()
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Routes) != 3 || len(sp.Services) != 1 || len(sp.Upstreams) != 1 || len(sp.Consumers) != 1 ||
		len(sp.ConsumerGroups) != 1 || len(sp.Credentials) != 1 || len(sp.PluginConfigs) != 1 ||
		len(sp.GlobalRules) != 1 || len(sp.PluginMetadata) != 1 || len(sp.SSLs) != 1 || len(sp.Secrets) != 1 {
		t.Fatalf("not every kind in the Spec: %s", wholeJSON(t, sp))
	}
	check := func(step string, sp *spec.Spec) {
		t.Helper()
		got, want := copySpec(t, e.cache), wholeJSON(t, sp)
		if !bytes.Equal(got, want) {
			t.Fatalf("%s: the copy holds\n%s\nwant\n%s", step, got, want)
		}
		if !bytes.Contains(got, []byte(`\u003c`)) {
			t.Fatalf("%s: no character escaped: the test shows nothing of them", step)
		}
		back, err := ReadCache(e.cache)
		if err != nil || back.Hash != sp.Hash {
			t.Fatalf("%s: read back: %v, hash %x, want %x", step, err, back.Hash, sp.Hash)
		}
		if again := wholeJSON(t, back); !bytes.Equal(again, want) {
			t.Fatalf("%s: read back and encoded again\n%s\nwant\n%s", step, again, want)
		}
	}
	check("Load", sp)

	e.watch(s)
	e.put("routes/2", route("/two-b"))
	e.del("routes/3")
	e.put("routes/4", `{"uri":"/four","upstream_id":"u1","desc":"<4>"}`)
	e.put("consumers/jack/credentials/c1", `{"plugins":{"key-auth":{"key":"k&2"}}}`)
	e.del("plugin_metadata/prometheus")
	e.put("routes/5", route("/five"))
	last := e.next("[1 2 4 5]")
	if len(last.PluginMetadata) != 0 {
		t.Fatalf("plugin metadata after its deletion: %s", last.PluginMetadata)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		if back, err := ReadCache(e.cache); err == nil && back.Hash == last.Hash {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the copy does not hold the last Spec within 30 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	check("changed", last)
}
