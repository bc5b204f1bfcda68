package spec

import (
	"bufio"
	"bytes"
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// everyKind is a Spec with objects of every kind, some with the
// characters json.Marshal escapes (<, >, &, U+2028) in strings, in
// plugin configurations and in raw objects, a route with its rare fields
// and an upstream of its own, an upstream with its rare fields; Hash set.
func everyKind(t *testing.T) *Spec {
	t.Helper()
	dec := func(f func([]byte) (*Route, error), s string) *Route {
		t.Helper()
		r, err := f([]byte(s))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	status := 1
	s := &Spec{
		Routes: []*Route{
			dec(DecodeRoute, `{"id":"r1","uri":"/a","upstream_id":"u1","plugins":{"proxy-rewrite":{"uri":"/v1/a"},`+
				`"response-rewrite":{"headers":{"set":{"X-Route":"<r1> & co"}}}},"create_time":1765000000,"update_time":1765000001}`),
			dec(DecodeRoute, `{"id":2,"name":"two","desc":"a <b> line\u2028break","labels":{"team":"a&b"},"uris":["/b","/c"],`+
				`"methods":["GET"],"hosts":["a.example.com"],"remote_addrs":["127.0.0.1"],"vars":[["arg_x","==","<1>"]],`+
				`"priority":3,"timeout":{"connect":1,"send":2,"read":3.5},"enable_websocket":true,"status":1,`+
				`"upstream":{"type":"chash","key":"remote_addr","nodes":[{"host":"::1","port":80,"weight":1}]}}`),
			dec(DecodeRoute, `{"id":"r3","uri":"/s","service_id":"s1","plugin_config_id":"p1"}`),
		},
		Services: []*Service{must(DecodeService([]byte(`{"id":"s1","name":"<svc>","upstream_id":"u1","plugins":{"prometheus":{}}}`)))},
		Upstreams: []*Upstream{
			must(DecodeUpstream([]byte(`{"id":"u1","type":"roundrobin","nodes":{"127.0.0.1:1980":1}}`))),
			must(DecodeUpstream([]byte(`{"id":"u2","name":"two & more","retries":2,"pass_host":"rewrite","upstream_host":"h",` +
				`"keepalive_pool":{"size":8},"checks":{"active":{"http_path":"/<health>"}},"nodes":{"127.0.0.1:1981":1}}`))),
		},
		Consumers:      []*Consumer{must(DecodeConsumer([]byte(`{"username":"jack","desc":"<d>","group_id":"g1","plugins":{"key-auth":{"key":"k&1"}}}`)))},
		PluginConfigs:  []*PluginConfig{must(DecodePluginConfig([]byte(`{"id":"p1","plugins":{"prometheus":{}}}`)))},
		GlobalRules:    []*GlobalRule{must(DecodeGlobalRule([]byte(`{"id":7,"plugins":{"prometheus":{}}}`)))},
		ConsumerGroups: []*ConsumerGroup{must(DecodeConsumerGroup([]byte(`{"id":"g1","plugins":{"prometheus":{}}}`)))},
		Credentials:    []json.RawMessage{raw(`{"id":"jack/credentials/c","plugins":{"key-auth":{"key":"<k>"}}}`)},
		PluginMetadata: []json.RawMessage{raw(`{"id":"http-logger","log_format":{"host":"$host & <x>"}}`)},
		SSLs:           []*SSL{{ID: StringID("1"), Desc: "<ssl>", Cert: "-----BEGIN CERTIFICATE-----\nx\n", Key: "k", SNIs: []string{"a.example.com"}, Status: &status}},
		Secrets:        []json.RawMessage{raw(`{"id":"vault/v1","prefix":"kv","token":"t&t","uri":"http://127.0.0.1:8200"}`)},
	}
	s.SetHash()
	return s
}

// encode is e's Encode of s, through a bufio.Writer of 64 bytes (so that
// it flushes within objects).
func encode(t *testing.T, e *Encoder, s *Spec) string {
	t.Helper()
	var b bytes.Buffer
	w := bufio.NewWriterSize(&b, 64)
	if err := e.Encode(w, s); err != nil {
		t.Fatal(err)
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// whole is s's JSON form as MarshalJSON makes it, encoding/json over the
// whole Spec (marshalFields, not the form kept for its Hash).
func whole(t *testing.T, s *Spec) string {
	t.Helper()
	b, err := s.marshalFields()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// kept is how many objects' forms e keeps.
func (e *Encoder) kept() int {
	return len(e.routes) + len(e.services) + len(e.upstreams) + len(e.consumers) + len(e.pluginConfigs) +
		len(e.globalRules) + len(e.consumerGroups) + len(e.ssls) + len(e.raws)
}

// objects is how many objects s holds.
func objects(s *Spec) int {
	return len(s.Routes) + len(s.Services) + len(s.Upstreams) + len(s.Consumers) + len(s.PluginConfigs) +
		len(s.GlobalRules) + len(s.ConsumerGroups) + len(s.SSLs) + len(s.Credentials) + len(s.PluginMetadata) + len(s.Secrets)
}

// TestEncoderAsMarshalJSON: an Encoder writes a Spec of every kind of
// object byte for byte as MarshalJSON encodes it whole, HTML characters
// escaped as it escapes them, decoding back to the same Spec and Hash;
// and goes on doing so as objects are replaced, deleted and added, the
// forms it keeps following them (those of objects gone dropped), down to
// an empty Spec.
func TestEncoderAsMarshalJSON(t *testing.T) {
	var e Encoder
	s := everyKind(t)
	check := func(step string, s *Spec) {
		t.Helper()
		got, want := encode(t, &e, s), whole(t, s)
		if got != want {
			t.Fatalf("%s: Encode\n%s\nwant MarshalJSON's\n%s", step, got, want)
		}
		var back Spec
		if err := UnmarshalEach([]byte(got), &back, nil); err != nil {
			t.Fatal(err)
		}
		// Raw JSON as a value: MarshalJSON escapes the HTML
		// characters of raw objects, which are read back so.
		opts := cmp.Options{cmp.AllowUnexported(Route{}, RouteExtra{}, Service{}, Upstream{}, UpstreamExtra{}, ID{}, Nodes{},
			Consumer{}, PluginConfig{}, GlobalRule{}, ConsumerGroup{}, SSL{}),
			cmp.Comparer(func(a, b json.RawMessage) bool {
				var x, y any
				if len(a) == 0 || len(b) == 0 {
					return len(a) == len(b)
				}
				return json.Unmarshal(a, &x) == nil && json.Unmarshal(b, &y) == nil && cmp.Equal(x, y)
			})}
		if back.Hash != s.Hash {
			t.Errorf("%s: read back with hash %x, want %x", step, back.Hash, s.Hash)
		}
		back.Hash = s.Hash
		if diff := cmp.Diff(s, &back, opts); diff != "" {
			t.Errorf("%s: read back (-written +read):\n%s", step, diff)
		}
		if n := e.kept(); n != objects(s) {
			t.Errorf("%s: %d forms kept for %d objects", step, n, objects(s))
		}
	}
	if !bytes.Contains([]byte(whole(t, s)), []byte(`\u003c`)) || !bytes.Contains([]byte(whole(t, s)), []byte(`\u2028`)) {
		t.Fatal("the Spec has no character MarshalJSON escapes: the test shows nothing of them")
	}
	check("first", s)
	check("again", s)

	// The next Spec shares what did not change, as the store's sync
	// makes it: a route replaced, a service deleted, an upstream added,
	// a credential replaced.
	next := *s
	r1 := *s.Routes[0]
	r1.URI = "/a2"
	next.Routes = []*Route{&r1, s.Routes[1], s.Routes[2]}
	next.Services = nil
	next.Routes[2] = must(DecodeRoute([]byte(`{"id":"r3","uri":"/s","upstream_id":"u3"}`)))
	next.Upstreams = append(append([]*Upstream(nil), s.Upstreams...), must(DecodeUpstream([]byte(`{"id":"u3","nodes":{"127.0.0.1:1982":1}}`))))
	next.Credentials = []json.RawMessage{json.RawMessage(`{"id":"jack/credentials/c","plugins":{"key-auth":{"key":"k2"}}}`)}
	next.SetHash()
	check("changed", &next)
	if _, ok := e.routes[s.Routes[0]]; ok {
		t.Error("the form of a route replaced is still kept")
	}
	if len(e.services) != 0 {
		t.Error("the form of a service deleted is still kept")
	}

	// What is kept is what is written: a Spec holding an object changed
	// in place, which a Spec's objects never are, is written as the
	// object was.
	before := whole(t, &next)
	next.Routes[1].Name = "renamed"
	if got := encode(t, &e, &next); got != before {
		t.Errorf("an object written before was encoded again:\n%s\nwant the form kept\n%s", got, before)
	}
	next.Routes[1].Name = "two"

	check("empty", &Spec{})
	check("empty with a hash", &Spec{Hash: s.Hash})
	check("all back", s)
}

// TestEncoderKeep: Keep makes the JSON form Encode writes and keeps it
// as MarshalJSON's for the Spec's Hash, so that MarshalJSON does not
// encode it again; the forms of its objects are kept for the next write.
func TestEncoderKeep(t *testing.T) {
	s := everyKind(t)
	encoded = encodings{} // not the form SetHash kept
	defer func() { encoded = encodings{} }()
	var e Encoder
	b, err := e.Keep(s)
	if err != nil {
		t.Fatal(err)
	}
	if want := whole(t, s); string(b) != want {
		t.Fatalf("Keep\n%s\nwant MarshalJSON's\n%s", b, want)
	}
	if n := e.kept(); n != objects(s) {
		t.Errorf("%d forms kept for %d objects", n, objects(s))
	}
	m, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(m) != string(b) || len(b) == 0 {
		t.Fatal("MarshalJSON after Keep differs")
	}
	// Kept: a change in place (which never happens to a Spec's objects)
	// is not seen by MarshalJSON, which takes the bytes kept.
	s.Routes[0].URI = "/changed"
	if m, err := s.MarshalJSON(); err != nil || string(m) != string(b) {
		t.Errorf("MarshalJSON after Keep encoded the Spec again: %v", err)
	}
}

// TestEncoderRefusesBadRaw: a raw object that is not JSON fails Encode as
// it fails MarshalJSON, and the next write of a good Spec is whole.
func TestEncoderRefusesBadRaw(t *testing.T) {
	var e Encoder
	bad := &Spec{Credentials: []json.RawMessage{json.RawMessage(`{"id":`)}}
	var b bytes.Buffer
	if err := e.Encode(bufio.NewWriter(&b), bad); err == nil {
		t.Fatal("a credential that is not JSON encoded")
	}
	if _, err := bad.marshalFields(); err == nil {
		t.Fatal("MarshalJSON encoded it")
	}
	s := everyKind(t)
	if got, want := encode(t, &e, s), whole(t, s); got != want {
		t.Fatalf("after a failure: Encode\n%s\nwant\n%s", got, want)
	}
}
