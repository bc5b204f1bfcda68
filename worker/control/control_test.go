package control

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
)

func TestRoundTrip(t *testing.T) {
	a, b := net.Pipe()
	ca, cb := New(a), New(b)
	r, err := spec.DecodeRoute([]byte(`{"id":1,"uri":"/hello","upstream":{"nodes":[{"host":"127.0.0.1","port":1980,"weight":1}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{Routes: []*spec.Route{r}}
	payload, err := EncodeSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = ca.SendPayload(Config, payload)
		_ = ca.Send(Drain, DrainMsg{TimeoutMS: 1500})
	}()
	typ, p, err := cb.Recv()
	if err != nil || typ != Config {
		t.Fatalf("recv: %v %v", typ, err)
	}
	got, err := DecodeSpec(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Routes) != 1 || got.Routes[0].ID.String() != "1" || !got.Routes[0].ID.Num ||
		got.Routes[0].Upstream.Nodes.List[0].Port != 1980 || got.Routes[0].Upstream.Nodes.IsMap {
		t.Fatalf("decoded %+v", got.Routes[0])
	}
	typ, p, err = cb.Recv()
	if err != nil || typ != Drain || string(p) != `{"timeout_ms":1500}` {
		t.Fatalf("drain: %v %q %v", typ, p, err)
	}
}

// fullSpec has one object of every kind, written in the forms a decoder
// must keep (numeric and string ids, nodes as a map and as an array, vars).
func fullSpec(t *testing.T) *spec.Spec {
	t.Helper()
	r, err := spec.DecodeRoute([]byte(`{"id":1,"uri":"/a","service_id":"s","plugin_config_id":"pc","upstream_id":2,` +
		`"vars":[["arg_x","==","1"]],"plugins":{"limit-count":{"count":2,"time_window":60}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := spec.DecodeRoute([]byte(`{"id":"r2","uris":["/b","/c"],"hosts":["a.com"],"upstream":{"nodes":[{"host":"::1","port":1980,"weight":1}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := spec.DecodeService([]byte(`{"id":"s","plugins":{"key-auth":{}},"upstream":{"nodes":{"127.0.0.1:1981":2}}}`))
	if err != nil {
		t.Fatal(err)
	}
	u, err := spec.DecodeUpstream([]byte(`{"id":2,"nodes":{"127.0.0.1:1980":1},"keepalive_pool":{"size":7}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &spec.Spec{
		Routes: []*spec.Route{r, r2}, Services: []*spec.Service{sv}, Upstreams: []*spec.Upstream{u},
		Consumers:     []*spec.Consumer{mustDecode(t, spec.DecodeConsumer, `{"username":"jack","plugins":{"key-auth":{"key":"k"}}}`)},
		PluginConfigs: []*spec.PluginConfig{mustDecode(t, spec.DecodePluginConfig, `{"id":"pc","plugins":{"prometheus":{}}}`)},
		GlobalRules:   []*spec.GlobalRule{mustDecode(t, spec.DecodeGlobalRule, `{"id":1,"plugins":{"prometheus":{}}}`)},
		ConsumerGroups: []*spec.ConsumerGroup{mustDecode(t, spec.DecodeConsumerGroup,
			`{"id":"g1","plugins":{"limit-count":{"count":7,"time_window":60}}}`)},
	}
	s.SetHash()
	return s
}

// TestConfigCarriesTheSpec: a Config frame carries every resource of the
// Spec (consumers, plugin configs, global rules and consumer groups included) and its hash,
// and decodes to an equal Spec, in the written forms (the routes' plugins
// a list, read as a map again).
func TestConfigCarriesTheSpec(t *testing.T) {
	s := fullSpec(t)
	payload, err := EncodeSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeSpec(payload, nil)
	if err != nil {
		t.Fatal(err)
	}
	// The worker keeps each route's plugins as a list
	// (spec.Route.CompactPlugins): the Spec sent once made maps again.
	for _, r := range got.Routes {
		if r.Plugins != nil {
			t.Errorf("route %s: its plugins decoded as a map, not a list", r.ID)
		}
	}
	got = asSent(got)
	if d := cmp.Diff(s, got); d != "" {
		t.Fatalf("decoded spec (-sent +got):\n%s", d)
	}
	if got.SetHash() != s.Hash {
		t.Fatal("the decoded spec hashes differently")
	}
	// The wire names of the members are APISIX's (apisix.yaml's top-level
	// keys), and the hash travels in hex.
	var top map[string]json.RawMessage
	if err := json.Unmarshal(payload, &top); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for k := range top {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	want := []string{"consumer_groups", "consumers", "global_rules", "hash", "plugin_configs", "routes", "services", "upstreams"}
	if d := cmp.Diff(want, keys); d != "" {
		t.Fatalf("members (-want +got):\n%s", d)
	}
	if h := string(top["hash"]); h != `"`+hex.EncodeToString(s.Hash[:])+`"` {
		t.Fatalf("hash = %s", h)
	}
	if r := string(top["routes"]); !strings.Contains(r, `"id":1,`) || !strings.Contains(r, `"vars":[["arg_x","==","1"]]`) {
		t.Fatalf("routes not in their written form: %s", r)
	}
}

// TestConfigRefused: a payload that is not a Spec, or whose references do
// not hold, is refused with the reason.
func TestConfigRefused(t *testing.T) {
	for _, tc := range []struct{ payload, err string }{
		{`{"routes":[{"id":1,"uri":"/a","plugin_config_id":"nope"}]}`, "control: config: route 1: plugin_config_id nope not found"},
		{`{"plugin_configs":[{"id":"pc","plugins":{}},{"id":"pc","plugins":{}}]}`, "control: config: plugin_config pc: duplicate id"},
		{`{"hash":"xyz"}`, `control: config: spec: hash "xyz" is not 64 hex digits`},
		{`[]`, "control: config: spec: want an object, got ["},
	} {
		_, err := DecodeSpec([]byte(tc.payload), nil)
		if err == nil || err.Error() != tc.err {
			t.Errorf("%s: err = %v, want %s", tc.payload, err, tc.err)
		}
	}
}

// TestSendPayloadSameBytes: one encoded Config goes to several workers as
// the same frame, byte for byte, as Send would have written.
func TestSendPayloadSameBytes(t *testing.T) {
	payload, err := EncodeSpec(fullSpec(t))
	if err != nil {
		t.Fatal(err)
	}
	frame := func(send func(*Conn) error) []byte {
		a, b := net.Pipe()
		ca := New(a)
		done := make(chan []byte)
		go func() {
			got, _ := io.ReadAll(b)
			done <- got
		}()
		if err := send(ca); err != nil {
			t.Error(err)
		}
		_ = ca.Close()
		return <-done
	}
	w1 := frame(func(c *Conn) error { return c.SendPayload(Config, payload) })
	w2 := frame(func(c *Conn) error { return c.SendPayload(Config, payload) })
	viaSend := frame(func(c *Conn) error { return c.Send(Config, json.RawMessage(payload)) })
	if !bytes.Equal(w1, w2) || !bytes.Equal(w1, viaSend) || len(w1) != 5+len(payload) {
		t.Fatalf("frames differ: %d %d %d bytes", len(w1), len(w2), len(viaSend))
	}
}

func TestRecvRejects(t *testing.T) {
	a, b := net.Pipe()
	cb := New(b)
	go func() { _, _ = a.Write([]byte{0, 0, 0, 1, 99}) }()
	if _, _, err := cb.Recv(); err != ErrUnknownType {
		t.Fatalf("err = %v, want ErrUnknownType", err)
	}
	go func() { _, _ = a.Write([]byte{0xff, 0, 0, 0}) }()
	if _, _, err := cb.Recv(); err != ErrFrameTooLarge {
		t.Fatalf("err = %v, want ErrFrameTooLarge", err)
	}
}

// TestReports: the worker's frames reach the supervisor whole, in order.
func TestReports(t *testing.T) {
	a, b := net.Pipe()
	ca, cb := New(a), New(b)
	type frame struct {
		T       Type
		Payload string
	}
	sent := []struct {
		t Type
		v any
	}{
		{Ready, ReadyMsg{ID: 1, PID: 42, Selector: "ebpf"}},
		{Applied, AppliedMsg{Routes: 3}},
		{Applied, AppliedMsg{Error: "spec: route 1: bad"}},
		{Stats, StatsMsg{Accepted: 5, Handled: 5, Requests: 9, Active: 2, Reading: 1, Writing: 1}},
		{Fatal, FatalMsg{Error: "listen tcp 127.0.0.1:1: bind: address already in use"}},
		{Drain, nil},
		{Rejoin, nil},
	}
	go func() {
		for _, f := range sent {
			_ = ca.Send(f.t, f.v)
		}
	}()
	var got []frame
	for range sent {
		typ, p, err := cb.Recv()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, frame{typ, string(p)})
	}
	want := []frame{
		{Ready, `{"id":1,"pid":42,"selector":"ebpf"}`},
		{Applied, `{"routes":3}`},
		{Applied, `{"routes":0,"error":"spec: route 1: bad"}`},
		{Stats, `{"accepted":5,"handled":5,"requests":9,"active":2,"reading":1,"writing":1,"waiting":0}`},
		{Fatal, `{"error":"listen tcp 127.0.0.1:1: bind: address already in use"}`},
		{Drain, ``},
		{Rejoin, ``},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("frames (-want +got):\n%s", diff)
	}
}

// mustDecode decodes one object with decode (spec.DecodeConsumer, …).
func mustDecode[T any](t testing.TB, decode func([]byte) (*T, error), s string) *T {
	t.Helper()
	v, err := decode([]byte(s))
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// TestConfigCarriesTheMark: a Spec marked checked goes with its mark, the
// payload's first member, and comes back with it; an unmarked one is the
// Spec's JSON form alone; a mark that is not a hash is refused.
func TestConfigCarriesTheMark(t *testing.T) {
	s := fullSpec(t)
	plain, err := EncodeSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	if want, _ := json.Marshal(s); string(plain) != string(want) {
		t.Errorf("unmarked payload %s, want the Spec's JSON form", plain)
	}
	s.Checked = [32]byte{1, 2, 3}
	marked, err := EncodeSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(marked), `{"checked":"010203`) {
		t.Errorf("marked payload %.80s…", marked)
	}
	got, err := DecodeSpec(marked, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got.Checked != s.Checked || got.Hash != s.Hash || len(got.Routes) != len(s.Routes) {
		t.Errorf("decoded: mark %x hash %x routes %d", got.Checked, got.Hash, len(got.Routes))
	}
	if got, err := DecodeSpec(plain, nil); err != nil || got.Checked != ([32]byte{}) {
		t.Errorf("unmarked: mark %x, %v", got.Checked, err)
	}
	empty, err := EncodeSpec(&spec.Spec{Checked: [32]byte{9}})
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeSpec(empty, nil); err != nil || got.Checked != [32]byte{9} {
		t.Errorf("an empty marked Spec %s: %v", empty, err)
	}
	for _, bad := range []string{`{"checked":"01"}`, `{"checked":"` + strings.Repeat("zz", 32) + `"}`} {
		if _, err := DecodeSpec([]byte(bad), nil); err == nil {
			t.Errorf("%s decoded", bad)
		}
	}
}
