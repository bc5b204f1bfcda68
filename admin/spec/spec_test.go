package spec

import (
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestIDJSON(t *testing.T) {
	tests := []struct {
		in      string
		want    ID
		out     string
		wantErr bool
	}{
		{`1`, NumID(1), `1`, false},
		{`"1"`, StringID("1"), `"1"`, false},
		{`1e2`, NumID(100), `100`, false},
		{`"a-b_c.d"`, StringID("a-b_c.d"), `"a-b_c.d"`, false},
		{`0`, ID{}, ``, true},
		{`1.5`, ID{}, ``, true},
		{`""`, ID{}, ``, true},
		{`"a/b"`, ID{}, ``, true},
		{`null`, ID{}, ``, true},
	}
	for _, tc := range tests {
		var id ID
		err := json.Unmarshal([]byte(tc.in), &id)
		if (err != nil) != tc.wantErr {
			t.Errorf("unmarshal %s: err = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if tc.wantErr {
			continue
		}
		if id != tc.want {
			t.Errorf("unmarshal %s = %#v, want %#v", tc.in, id, tc.want)
		}
		b, _ := json.Marshal(id)
		if string(b) != tc.out {
			t.Errorf("marshal %#v = %s, want %s", id, b, tc.out)
		}
	}
	if NumID(5).String() != StringID("5").String() {
		t.Error("1 and \"1\" must name the same object")
	}
}

// TestValidPathIDs: ValidStringID and ValidUsername allow what the
// schemas allow in an object's id and a consumer's username.
func TestValidPathIDs(t *testing.T) {
	long := func(n int) string {
		b := make([]byte, n)
		for i := range b {
			b[i] = 'a'
		}
		return string(b)
	}
	for _, s := range []string{"1", "a-b_c.d", "A9", "..", ".", "-", "_", "a/b", "a b", "a:b", "a%2fb", "é", "", "ja.ck",
		"x\x00y", long(64), long(65), long(256), long(257)} {
		raw, _ := json.Marshal(s)
		idOK := ValidateObject(KindPluginConfig, []byte(`{"id":`+string(raw)+`,"plugins":{}}`)) == nil
		if got := ValidStringID(s); got != idOK {
			t.Errorf("ValidStringID(%q) = %v, the schema says %v", s, got, idOK)
		}
		nameOK := ValidateObject(KindConsumer, []byte(`{"username":`+string(raw)+`}`)) == nil
		if got := ValidUsername(s); got != nameOK {
			t.Errorf("ValidUsername(%q) = %v, the schema says %v", s, got, nameOK)
		}
	}
}

func TestNodeAddr(t *testing.T) {
	tests := []struct {
		n      Node
		scheme string
		want   string
	}{
		{Node{Host: "127.0.0.1", Port: 1980}, "http", "127.0.0.1:1980"},
		{Node{Host: "example.com"}, "http", "example.com:80"},
		{Node{Host: "example.com"}, "", "example.com:80"},
		{Node{Host: "example.com"}, "https", "example.com:443"},
		{Node{Host: "example.com"}, "grpcs", "example.com:443"},
		{Node{Host: "example.com"}, "grpc", "example.com:80"},
		{Node{Host: "::1", Port: 8080}, "http", "[::1]:8080"},
		{Node{Host: "[::1]"}, "https", "[::1]:443"},
	}
	for _, tc := range tests {
		if got := tc.n.Addr(tc.scheme); got != tc.want {
			t.Errorf("%+v.Addr(%q) = %q, want %q", tc.n, tc.scheme, got, tc.want)
		}
	}
}

func TestNodesJSON(t *testing.T) {
	tests := []struct {
		in   string
		want Nodes
		out  string
	}{
		{`{"a:1":1,"[::1]:80":2,"b":0,"::3":4}`,
			Nodes{IsMap: true, List: []Node{{Host: "a", Port: 1, Weight: 1}, {Host: "::1", Port: 80, Weight: 2}, {Host: "b"}, {Host: "::3", Weight: 4}}},
			`{"a:1":1,"[::1]:80":2,"b":0,"[::3]":4}`},
		{`{"a:1":1,"a:1":5}`, Nodes{IsMap: true, List: []Node{{Host: "a", Port: 1, Weight: 5}}}, `{"a:1":5}`},
		{`{}`, Nodes{IsMap: true, List: []Node{}}, `{}`},
		{`[]`, Nodes{List: []Node{}}, `[]`},
		{`[{"host":"[::1]","port":8080,"weight":1,"priority":2}]`,
			Nodes{List: []Node{{Host: "::1", Port: 8080, Weight: 1, Priority: 2}}},
			`[{"host":"::1","port":8080,"weight":1,"priority":2}]`},
	}
	for _, tc := range tests {
		var ns Nodes
		if err := json.Unmarshal([]byte(tc.in), &ns); err != nil {
			t.Errorf("unmarshal %s: %v", tc.in, err)
			continue
		}
		if diff := cmp.Diff(tc.want, ns); diff != "" {
			t.Errorf("unmarshal %s (-want +got):\n%s", tc.in, diff)
		}
		b, _ := json.Marshal(ns)
		if string(b) != tc.out {
			t.Errorf("marshal %s = %s, want %s", tc.in, b, tc.out)
		}
	}
	for _, bad := range []string{`{"a:x":1}`, `{"a:":1}`, `{"a:1:2x]":1}`, `{"a":"1"}`, `[{"host":"a"}]`, `[{"host":"a","weight":1,"x":1}]`, `[1]`, `"a"`, `{"a b":1}`, `{"[::1]x":1}`} {
		var ns Nodes
		if err := json.Unmarshal([]byte(bad), &ns); !errors.Is(err, ErrInvalid) {
			t.Errorf("unmarshal %s: err = %v, want ErrInvalid", bad, err)
		}
	}
}

func TestEffective(t *testing.T) {
	three, zero := 3, 0
	idle, size := 5.5, 10
	tests := []struct {
		name                          string
		u                             Upstream
		retries                       int
		kaSize                        int
		kaIdle                        time.Duration
		kaReq                         int
		typ, scheme, passHost, hashOn string
	}{
		{"defaults, 3 nodes", Upstream{Nodes: Nodes{List: make([]Node, 3)}}, 2, 320, 60 * time.Second, 1000, "roundrobin", "http", "pass", "vars"},
		{"no nodes", Upstream{}, 0, 320, 60 * time.Second, 1000, "roundrobin", "http", "pass", "vars"},
		{"explicit", Upstream{Nodes: Nodes{List: make([]Node, 3)}, Type: "chash", Extra: &UpstreamExtra{Retries: &zero, Scheme: "https", PassHost: "node", HashOn: "header",
			KeepalivePool: &KeepalivePool{Size: &size, IdleTimeout: &idle, Requests: &three}}},
			0, 10, 5500 * time.Millisecond, 3, "chash", "https", "node", "header"},
	}
	for _, tc := range tests {
		s, i, r := tc.u.EffectiveKeepalive()
		got := []any{tc.u.EffectiveRetries(), s, i, r, tc.u.EffectiveType(), tc.u.EffectiveScheme(), tc.u.EffectivePassHost(), tc.u.EffectiveHashOn()}
		want := []any{tc.retries, tc.kaSize, tc.kaIdle, tc.kaReq, tc.typ, tc.scheme, tc.passHost, tc.hashOn}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}

	prio, off := -2, 0
	routes := []struct {
		r       Route
		enabled bool
		prio    int
		uris    []string
		hosts   []string
		remotes []string
	}{
		{Route{URI: "/a", Host: "h", Extra: &RouteExtra{RemoteAddr: "1.1.1.1"}}, true, 0, []string{"/a"}, []string{"h"}, []string{"1.1.1.1"}},
		{Route{Hosts: []string{"x", "y"}, Priority: &prio, Status: &off, Extra: &RouteExtra{URIs: []string{"/a", "/b"}, RemoteAddrs: []string{"::1"}}}, false, -2, []string{"/a", "/b"}, []string{"x", "y"}, []string{"::1"}},
		{Route{Status: &three}, false, 0, nil, nil, nil},
	}
	for i, tc := range routes {
		got := []any{tc.r.Enabled(), tc.r.EffectivePriority(), tc.r.AllURIs(), tc.r.AllHosts(), tc.r.AllRemoteAddrs()}
		want := []any{tc.enabled, tc.prio, tc.uris, tc.hosts, tc.remotes}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("route %d (-want +got):\n%s", i, diff)
		}
	}
}

func TestCheck(t *testing.T) {
	u := func(id ID) *Upstream { return &Upstream{ID: id, Nodes: Nodes{List: []Node{}}} }
	tests := []struct {
		name string
		s    Spec
		want string
	}{
		{"ok", Spec{
			Upstreams: []*Upstream{u(NumID(1)), u(StringID("two"))},
			Services:  []*Service{{ID: NumID(1), UpstreamID: StringID("1")}},
			Routes: []*Route{
				{ID: NumID(1), UpstreamID: NumID(1)},
				{ID: NumID(2), ServiceID: StringID("1"), Extra: &RouteExtra{PluginConfigID: StringID("pc")}},
				{ID: StringID("3"), UpstreamID: StringID("two")},
			},
			PluginConfigs: []*PluginConfig{{ID: StringID("pc"), Plugins: map[string]json.RawMessage{}}},
			Consumers:     []*Consumer{{Username: "jack"}},
			GlobalRules:   []*GlobalRule{{ID: NumID(1), Plugins: map[string]json.RawMessage{}}},
		}, ""},
		{"missing upstream", Spec{Routes: []*Route{{ID: NumID(1), UpstreamID: NumID(9)}}}, "route 1: upstream_id 9 not found"},
		{"missing service", Spec{Routes: []*Route{{ID: StringID("r"), ServiceID: NumID(3)}}}, "route r: service_id 3 not found"},
		{"missing plugin config", Spec{Routes: []*Route{{ID: NumID(1), Extra: &RouteExtra{PluginConfigID: NumID(3)}}}}, "route 1: plugin_config_id 3 not found"},
		{"service upstream", Spec{Services: []*Service{{ID: NumID(2), UpstreamID: NumID(9)}}}, "service 2: upstream_id 9 not found"},
		{"duplicate route", Spec{Routes: []*Route{{ID: NumID(1)}, {ID: StringID("1")}}}, "route 1: duplicate id"},
		{"duplicate upstream", Spec{Upstreams: []*Upstream{u(NumID(4)), u(NumID(4))}}, "upstream 4: duplicate id"},
		{"missing id", Spec{Routes: []*Route{{ID: NumID(1)}, {}}}, "route #1: missing id"},
		{"duplicate consumer", Spec{Consumers: []*Consumer{{Username: "a"}, {Username: "a"}}}, "consumer a: duplicate id"},
	}
	for _, tc := range tests {
		err := tc.s.Check()
		if diff := cmp.Diff(tc.want, errText(err)); diff != "" {
			t.Errorf("%s: Check (-want +got):\n%s", tc.name, diff)
		}
		if err != nil && !errors.Is(err, ErrReference) {
			t.Errorf("%s: error does not match ErrReference", tc.name)
		}
	}
}

func TestSetHash(t *testing.T) {
	mk := func(uri string) *Spec {
		r, err := DecodeRoute([]byte(`{"id":1,"uri":"` + uri + `","plugins":{"b":{"x":1},"a":{}},` + up + `}`))
		if err != nil {
			t.Fatal(err)
		}
		return &Spec{Routes: []*Route{r}}
	}
	a, b, c := mk("/a"), mk("/a"), mk("/b")
	if a.SetHash() != b.SetHash() {
		t.Error("equal specs hash differently")
	}
	if a.SetHash() == c.SetHash() {
		t.Error("different specs hash the same")
	}
	if a.Hash == ([32]byte{}) {
		t.Error("SetHash did not set Hash")
	}
}

// TestMarshalReusesSetHash: a Spec written after SetHash is SetHash's
// encoding with the hash appended, byte for byte what encoding it afresh
// gives, and it decodes back to the same Spec.
func TestMarshalReusesSetHash(t *testing.T) {
	r, err := DecodeRoute([]byte(`{"id":"1","uri":"/a","upstream":{"nodes":{"127.0.0.1:80":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*Spec{{}, {Routes: []*Route{r}, Consumers: []*Consumer{{Username: "jack"}}}} {
		s.SetHash()
		got, err := s.MarshalJSON()
		if err != nil {
			t.Fatal(err)
		}
		want, err := s.marshalFields()
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != string(want) {
			t.Errorf("MarshalJSON after SetHash\n got %s\nwant %s", got, want)
		}
		var back Spec
		if err := json.Unmarshal(got, &back); err != nil {
			t.Fatal(err)
		}
		if back.Hash != s.Hash || len(back.Routes) != len(s.Routes) {
			t.Errorf("decoded back: hash %x routes %d, want %x %d", back.Hash, len(back.Routes), s.Hash, len(s.Routes))
		}
	}
}

// TestUnmarshalKept: a Spec read with UnmarshalKept is the one written,
// and is written again as the bytes it was read from, kept, not encoded
// anew (a space the encoder never writes tells them apart); a Spec
// without a hash keeps nothing.
func TestUnmarshalKept(t *testing.T) {
	r, err := DecodeRoute([]byte(`{"id":"k1","uri":"/kept","upstream":{"nodes":{"127.0.0.1:80":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	s := &Spec{Routes: []*Route{r}}
	h := s.SetHash()
	b, err := s.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	encoded = encodings{} // as in a process that never encoded it
	defer func() { encoded = encodings{} }()
	read := append([]byte("{ "), b[1:]...)
	var got Spec
	if err := UnmarshalKept(read, &got); err != nil {
		t.Fatal(err)
	}
	if got.Hash != h || len(got.Routes) != 1 || got.Routes[0].URI != "/kept" {
		t.Fatalf("read back: hash %x, routes %d", got.Hash, len(got.Routes))
	}
	again, err := got.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	if string(again) != string(read) {
		t.Errorf("written again as\n%s\nwant the bytes read\n%s", again, read)
	}

	encoded = encodings{}
	var bare Spec
	if err := UnmarshalKept([]byte(`{"routes":[{"id":"k1","uri":"/kept"}]}`), &bare); err != nil || bare.Hash != ([32]byte{}) {
		t.Fatalf("without a hash: %v, hash %x", err, bare.Hash)
	}
	for _, en := range encoded.ents {
		if en != nil {
			t.Errorf("a Spec without a hash kept an encoding: %x", en.hash)
		}
	}
}

// TestUnmarshalEach: UnmarshalEach (and UnmarshalJSON, which is it)
// decodes what MarshalJSON writes into the Spec written, calling each once
// per object, and refuses what is not a Spec's JSON.
func TestUnmarshalEach(t *testing.T) {
	r1, err := DecodeRoute([]byte(`{"id":"1","uri":"/a","upstream_id":"u","plugins":{"prometheus":{}}}`))
	if err != nil {
		t.Fatal(err)
	}
	r2, err := DecodeRoute([]byte(`{"id":2,"uris":["/b","/c"],"service_id":"s","vars":[["arg_x","==","1"]]}`))
	if err != nil {
		t.Fatal(err)
	}
	u, err := DecodeUpstream([]byte(`{"id":"u","type":"chash","key":"remote_addr","nodes":[{"host":"::1","port":80,"weight":1}]}`))
	if err != nil {
		t.Fatal(err)
	}
	sv, err := DecodeService([]byte(`{"id":"s","upstream":{"nodes":{"127.0.0.1:80":1}}}`))
	if err != nil {
		t.Fatal(err)
	}
	raw := func(s string) json.RawMessage { return json.RawMessage(s) }
	s := &Spec{
		Routes: []*Route{r1, r2}, Services: []*Service{sv}, Upstreams: []*Upstream{u},
		Consumers:      []*Consumer{must(DecodeConsumer([]byte(`{"username":"jack","desc":"d","labels":{"a":"b"},"plugins":{"key-auth":{"key":"k"}}}`)))},
		PluginConfigs:  []*PluginConfig{must(DecodePluginConfig([]byte(`{"id":"p","plugins":{}}`)))},
		GlobalRules:    []*GlobalRule{must(DecodeGlobalRule([]byte(`{"id":7,"plugins":{"prometheus":{}}}`)))},
		Credentials:    []json.RawMessage{raw(`{"id":"jack/credentials/c","plugins":{}}`)},
		PluginMetadata: []json.RawMessage{raw(`{"id":"prometheus","disabled_labels":[]}`)},
	}
	s.SetHash()
	for _, in := range []*Spec{s, {}} {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		var got Spec
		n := 0
		if err := UnmarshalEach(b, &got, func() { n++ }); err != nil {
			t.Fatalf("UnmarshalEach(%s): %v", b, err)
		}
		if diff := cmp.Diff(in, &got, cmp.AllowUnexported(Route{}, Service{}, Upstream{}, ID{}, Nodes{}, Consumer{}, PluginConfig{}, GlobalRule{})); diff != "" {
			t.Errorf("UnmarshalEach (-written +read):\n%s", diff)
		}
		objs := len(in.Routes) + len(in.Services) + len(in.Upstreams) + len(in.Consumers) + len(in.PluginConfigs) +
			len(in.GlobalRules) + len(in.Credentials) + len(in.PluginMetadata)
		if n != objs {
			t.Errorf("each called %d times for %d objects", n, objs)
		}
	}
	for _, bad := range []string{``, `[]`, `{"routes":{}}`, `{"routes":[{"id":1}`, `{"hash":"xy"}`, `{"routes":[1]}`, `{} {}`, `{"x":}`} {
		var a Spec
		if err := json.Unmarshal([]byte(bad), &a); err == nil {
			t.Errorf("%q: read as %+v, want an error", bad, a)
		}
	}
	var got Spec
	if err := UnmarshalEach([]byte(`{"routes":[{"id":1,"uri":"/x"}],"routes":null,"other":{"a":[1]}}`), &got, nil); err != nil || got.Routes != nil {
		t.Errorf("a repeated member: routes %v, err %v; want the last (null) to win", got.Routes, err)
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// TestSecretsInSpec: a Spec's secrets travel in its JSON form as stored,
// count in its hash, and Check wants their ids "<manager>/<id>" and
// unique.
func TestSecretsInSpec(t *testing.T) {
	v := json.RawMessage(`{"id":"vault/v1","prefix":"kv","token":"t","uri":"http://127.0.0.1:8200"}`)
	s := &Spec{Secrets: []json.RawMessage{v}}
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
	h := s.SetHash()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Spec
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Secrets) != 1 || string(back.Secrets[0]) != string(v) || back.Hash != h {
		t.Fatalf("decoded %s as %+v", b, back)
	}
	s2 := &Spec{Secrets: []json.RawMessage{json.RawMessage(`{"id":"vault/v1","prefix":"kv2","token":"t","uri":"http://127.0.0.1:8200"}`)}}
	if s2.SetHash() == h {
		t.Fatal("a changed secret does not change the hash")
	}
	for _, bad := range []string{`{"id":"v1"}`, `{"id":"vault/a/b"}`, `{"id":"/v1"}`, `{}`} {
		s := &Spec{Secrets: []json.RawMessage{json.RawMessage(bad)}}
		var re *ReferenceError
		if err := s.Check(); !errors.As(err, &re) || re.Kind != "secret" {
			t.Errorf("%s: %v", bad, err)
		}
	}
	dup := &Spec{Secrets: []json.RawMessage{v, v}}
	if err := dup.Check(); err == nil {
		t.Error("two secrets vault/v1 passed")
	}
}
