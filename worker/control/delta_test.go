package control

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
	"coregate/internal/testcert"
)

// mustRoute decodes a route or fails t.
func mustRoute(t testing.TB, js string) *spec.Route {
	t.Helper()
	r, err := spec.DecodeRoute([]byte(js))
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// viaDelta sends next as the supervisor would after base, to a worker
// that decoded base from its Config: it returns what the worker decodes.
func viaDelta(t *testing.T, base, next *spec.Spec) (*spec.Spec, []byte) {
	t.Helper()
	full, err := EncodeSpec(base)
	if err != nil {
		t.Fatal(err)
	}
	held, err := DecodeSpec(full, nil) // the worker's copy of base
	if err != nil {
		t.Fatal(err)
	}
	payload, ok, err := EncodeDelta(base, next)
	if err != nil || !ok {
		t.Fatalf("EncodeDelta: ok %v, %v", ok, err)
	}
	got, err := DecodeDelta(payload, held, nil)
	if err != nil {
		t.Fatalf("DecodeDelta(%s): %v", payload, err)
	}
	return got, payload
}

// TestDeltaCarriesTheSpec: a Delta decodes, against the worker's copy of
// the base, to the same Spec a Config of the new one does, whatever
// changed: objects kept, replaced, removed, added, moved, of every kind.
func TestDeltaCarriesTheSpec(t *testing.T) {
	base := fullSpec(t)
	next := *base
	next.Routes = []*spec.Route{
		base.Routes[1], // moved before the one now after it
		mustRoute(t, `{"id":1,"uri":"/a2","upstream_id":2}`), // replaced
		mustRoute(t, `{"id":"r3","uri":"/new","upstream_id":2}`),
	}
	next.Services = nil // removed (route 1 no longer names it)
	next.Consumers = append(slices.Clone(base.Consumers), mustDecode(t, spec.DecodeConsumer, `{"username":"jill"}`))
	next.PluginConfigs = []*spec.PluginConfig{mustDecode(t, spec.DecodePluginConfig, `{"id":"pc","plugins":{"prometheus":{"prefer_name":true}}}`)}
	next.ConsumerGroups = append(slices.Clone(base.ConsumerGroups), mustDecode(t, spec.DecodeConsumerGroup, `{"id":"g2","plugins":{"limit-count":{"count":9,"time_window":60}}}`))
	next.Credentials = []json.RawMessage{json.RawMessage(`{"id":"jack/credentials/c1","plugins":{"key-auth":{"key":"k2"}}}`)}
	next.SetHash()

	got, payload := viaDelta(t, base, &next)
	wantJSON, err := EncodeSpec(&next)
	if err != nil {
		t.Fatal(err)
	}
	want, err := DecodeSpec(wantJSON, nil)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("decoded spec (-config +delta):\n%s\npayload %s", d, payload)
	}
	// What was kept travels as runs, not as objects.
	for _, kept := range []string{`"/b"`, `"username":"jack"`, `"id":1,"plugins":{"prometheus":{}}`, `"127.0.0.1:1980":1`, `"count":7`} {
		if strings.Contains(string(payload), kept) {
			t.Errorf("the payload carries %s, which the base has: %s", kept, payload)
		}
	}
	for _, sent := range []string{`"/a2"`, `"/new"`, `"jill"`, `"prefer_name":true`, `"k2"`, `"count":9`} {
		if !strings.Contains(string(payload), sent) {
			t.Errorf("the payload lacks %s: %s", sent, payload)
		}
	}
}

// TestDeltaBulkLoad: the Delta of a route added to 5 000 is one run and
// the new route, and the worker's Spec shares the base's routes, whether
// the new list is a copy of the base's or the base's grown in its array,
// past its length, as the store's sync grows it (spec.Spec).
func TestDeltaBulkLoad(t *testing.T) {
	for _, inArray := range []bool{false, true} {
		base := bulkSpec(t, 5000)
		added := mustRoute(t, `{"id":"new","uri":"/new","upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
		next := *base
		if inArray {
			room := slices.Grow(slices.Clone(base.Routes), 1)
			base.Routes = slices.Clip(room)
			next.Routes = slices.Clip(append(room, added))
			if &next.Routes[0] != &base.Routes[0] {
				t.Fatal("the route added not in the base's array")
			}
		} else {
			next.Routes = append(slices.Clone(base.Routes), added)
		}
		next.SetHash()
		got, payload := viaDelta(t, base, &next)
		if want := `"routes":[[0,5000],{"id":"new",`; !strings.Contains(string(payload), want) || len(payload) > 400 {
			t.Fatalf("in the base's array %v: payload %s, want %s... and under 400 bytes", inArray, payload, want)
		}
		if len(got.Routes) != 5001 || got.Routes[5000].ID.String() != "new" || got.Routes[4999].ID.String() != "r4999" {
			t.Fatalf("in the base's array %v: got %d routes", inArray, len(got.Routes))
		}
		if got.Hash != next.Hash {
			t.Fatal("the decoded Spec lacks the new hash")
		}
	}
}

// TestDeltaBulkLoadInPlace: a chain of Deltas of a bulk load, each adding
// routes at the end of the Spec the one before made, makes each list in
// the array of the one before while it has room (the routes kept are not
// copied), and a new one when it has none; every Spec's routes stay
// those it was decoded with, including the base's of a second Delta
// decoded against it (it gets a list of its own), and nothing appended to
// a Spec's list writes in another's. Extends says so of a list made in
// its base's array, and of no two lists the one of which does not begin
// with the other's routes.
func TestDeltaBulkLoadInPlace(t *testing.T) {
	sent := bulkSpec(t, 1000)
	held, err := DecodeSpec(mustEncode(t, sent), nil)
	if err != nil {
		t.Fatal(err)
	}
	type kept struct {
		s   *spec.Spec
		ids []string
	}
	var specs []kept
	keep := func(s *spec.Spec) {
		var ids []string
		for _, r := range s.Routes {
			ids = append(ids, r.ID.String())
		}
		specs = append(specs, kept{s, ids})
	}
	keep(held)
	inPlace, fresh := 0, 0
	for step := range 60 {
		next := *sent
		next.Routes = slices.Clone(sent.Routes)
		for k := range 1 + step%3 {
			next.Routes = append(next.Routes, mustRoute(t, fmt.Sprintf(`{"id":"n%d-%d","uri":"/n/%d/%d","upstream":{"nodes":{"127.0.0.1:1980":1}}}`, step, k, step, k)))
		}
		next.SetHash()
		payload, ok, err := EncodeDelta(sent, &next)
		if err != nil || !ok {
			t.Fatal(ok, err)
		}
		if step%10 == 9 {
			// a second Delta against the same base: decoded first,
			// it takes the base's room, and the one after gets a
			// list of its own
			other := next
			other.Routes = append(slices.Clone(sent.Routes), mustRoute(t, `{"id":"other","uri":"/other","upstream":{"nodes":{"127.0.0.1:1980":1}}}`))
			other.SetHash()
			p, ok, err := EncodeDelta(sent, &other)
			if err != nil || !ok {
				t.Fatal(ok, err)
			}
			o, err := DecodeDelta(p, held, nil)
			if err != nil {
				t.Fatal(err)
			}
			keep(o)
		}
		got, err := DecodeDelta(payload, held, nil)
		if err != nil {
			t.Fatal(err)
		}
		if cap(got.Routes) != len(got.Routes) {
			t.Fatalf("step %d: a list of %d routes with room for %d: an append would write in the next Delta's", step, len(got.Routes), cap(got.Routes))
		}
		if unsafe.SliceData(got.Routes) == unsafe.SliceData(held.Routes) {
			inPlace++
			if !Extends(held.Routes, got.Routes) {
				t.Fatalf("step %d: a list made in its base's array does not extend it", step)
			}
		} else {
			fresh++
		}
		keep(got)
		// Extends holds of the lists of the last array only, and of
		// those a list that begins with the other's objects
		for _, a := range specs {
			for _, b := range specs {
				if Extends(a.s.Routes, b.s.Routes) && (len(a.ids) > len(b.ids) || !slices.Equal(a.ids, b.ids[:len(a.ids)])) {
					t.Fatalf("step %d: Extends of a list of %d routes and one of %d that does not begin with it", step, len(a.ids), len(b.ids))
				}
			}
		}
		if Extends(sent.Routes, next.Routes) {
			t.Fatalf("step %d: Extends of lists DecodeDelta did not make", step)
		}
		// an append to a Spec's list, as a caller of DecodeDelta may
		// make, leaves the others' as they are
		_ = append(got.Routes, nil)
		sent, held = &next, got
	}
	for i, k := range specs {
		if len(k.s.Routes) != len(k.ids) {
			t.Fatalf("Spec %d: %d routes, decoded with %d", i, len(k.s.Routes), len(k.ids))
		}
		for j, r := range k.s.Routes {
			if r.ID.String() != k.ids[j] {
				t.Fatalf("Spec %d: route %d is %s, decoded as %s", i, j, r.ID, k.ids[j])
			}
		}
	}
	// 1000 routes have room for 1000/64+16 = 31 more: some 120 added
	// take a new list every 15 or so, and after each second Delta
	if inPlace < 40 || fresh < 6 {
		t.Fatalf("%d lists made in place, %d anew", inPlace, fresh)
	}
	t.Logf("%d lists made in place, %d anew", inPlace, fresh)
}

func bulkSpec(t testing.TB, n int) *spec.Spec {
	var sb strings.Builder
	sb.WriteString(`{"routes":[`)
	for i := range n {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"id":"r%d","uri":"/bulk/%d","upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, i, i)
	}
	sb.WriteString(`]}`)
	s, err := DecodeSpec([]byte(sb.String()), nil)
	if err != nil {
		t.Fatal(err)
	}
	s.SetHash()
	return s
}

// TestDeltaNotWorthIt: a Spec that keeps nothing of the base, or either
// without a hash, goes as a Config.
func TestDeltaNotWorthIt(t *testing.T) {
	base := fullSpec(t)
	other := &spec.Spec{Routes: []*spec.Route{mustRoute(t, `{"id":9,"uri":"/z","upstream":{"nodes":{"127.0.0.1:1":1}}}`)}}
	other.SetHash()
	unhashed := *base
	unhashed.Hash = [32]byte{}
	for name, c := range map[string][2]*spec.Spec{
		"nothing kept":    {base, other},
		"no base":         {nil, base},
		"base unhashed":   {&unhashed, base},
		"next unhashed":   {base, &unhashed},
		"equal, unhashed": {&unhashed, &unhashed},
	} {
		if p, ok, err := EncodeDelta(c[0], c[1]); ok || err != nil {
			t.Errorf("%s: a Delta (%s, %v)", name, p, err)
		}
	}
}

// TestDeltaRefused: a Delta against another base, or malformed, is
// refused, and the worker's base is left as it was.
func TestDeltaRefused(t *testing.T) {
	base := bulkSpec(t, 3)
	before, err := EncodeSpec(base)
	if err != nil {
		t.Fatal(err)
	}
	next := *base
	next.Routes = base.Routes[:2]
	next.SetHash()
	good, ok, err := EncodeDelta(base, &next)
	if err != nil || !ok {
		t.Fatal(ok, err)
	}
	other := bulkSpec(t, 4)
	if _, err := DecodeDelta(good, other, nil); !errors.Is(err, ErrBase) {
		t.Errorf("against another base: %v, want ErrBase", err)
	}
	if _, err := DecodeDelta(good, nil, nil); !errors.Is(err, ErrBase) {
		t.Errorf("against no base: %v, want ErrBase", err)
	}
	h := strings.TrimPrefix(string(good[:strings.Index(string(good), `,"routes"`)]), "{")
	for _, p := range []string{
		`{` + h + `,"routes":[[0,4]]}`,                        // past the base's end
		`{` + h + `,"routes":[[2,1]]}`,                        // backwards
		`{` + h + `,"routes":[[-1,1]]}`,                       // before its start
		`{` + h + `,"routes":[[0,1],{"id":"r0","uri":1}]}`,    // not a route
		`{` + h + `,"routes":[[0,1],[0,1]]}`,                  // a duplicate id
		`{` + h + `,"routes":[[0,1]],"mystery":[]}`,           // unknown member
		`{` + h + `,"routes":[[0,1]]} {}`,                     // trailing data
		`{"routes":[[0,1]],` + h + `}`,                        // base after a resource
		`{` + strings.Split(h, ",")[0] + `,"routes":[[0,1]]}`, // no new hash
		`[]`,
	} {
		if s, err := DecodeDelta([]byte(p), base, nil); err == nil {
			t.Errorf("%s: decoded %d routes, want an error", p, len(s.Routes))
		}
	}
	after, err := EncodeSpec(base)
	if err != nil {
		t.Fatal(err)
	}
	if string(before) != string(after) {
		t.Fatal("a refused Delta changed the base")
	}
}

// TestDeltaSSLs: ssls travel in a Delta as the other decoded objects do:
// the one kept as a run, the one changed as itself.
func TestDeltaSSLs(t *testing.T) {
	c := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	ssl := func(id, sni string) *spec.SSL {
		b, _ := json.Marshal(map[string]any{"id": id, "cert": c.CertPEM, "key": c.KeyPEM, "sni": sni})
		return mustDecode(t, spec.DecodeSSL, string(b))
	}
	base := fullSpec(t)
	base.SSLs = []*spec.SSL{ssl("s1", "a.com"), ssl("s2", "b.com")}
	base.SetHash()
	next := *base
	next.SSLs = []*spec.SSL{base.SSLs[0], ssl("s2", "c.com")}
	next.SetHash()
	got, payload := viaDelta(t, base, &next)
	if len(got.SSLs) != 2 || got.SSLs[0].SNI != "a.com" || got.SSLs[1].SNI != "c.com" || got.SSLs[1].Key != c.KeyPEM {
		t.Fatalf("ssls %+v", got.SSLs)
	}
	if !strings.Contains(string(payload), `"ssls":[[0,1],{`) || strings.Contains(string(payload), `"a.com"`) {
		t.Fatalf("payload %s", payload)
	}
}

// TestDeltaCarriesSecrets: the secret objects travel in a Delta as the
// other JSON-kept resources do: those kept as runs, the changed ones whole.
func TestDeltaCarriesSecrets(t *testing.T) {
	base := fullSpec(t)
	base.Secrets = []json.RawMessage{
		json.RawMessage(`{"id":"vault/v1","prefix":"kept-prefix","token":"t","uri":"http://127.0.0.1:8200"}`),
		json.RawMessage(`{"id":"vault/v2","prefix":"old-prefix","token":"t","uri":"http://127.0.0.1:8200"}`),
	}
	base.SetHash()
	next := *base
	next.Secrets = []json.RawMessage{base.Secrets[0],
		json.RawMessage(`{"id":"vault/v2","prefix":"new-prefix","token":"t","uri":"http://127.0.0.1:8200"}`),
		json.RawMessage(`{"access_key_id":"a","id":"aws/a1","secret_access_key":"s"}`),
	}
	next.SetHash()
	got, payload := viaDelta(t, base, &next)
	if d := cmp.Diff(next.Secrets, got.Secrets); d != "" {
		t.Fatalf("secrets (-want +got):\n%s", d)
	}
	if got.Hash != next.Hash {
		t.Fatal("hash differs")
	}
	if strings.Contains(string(payload), "kept-prefix") || !strings.Contains(string(payload), "new-prefix") || !strings.Contains(string(payload), "aws/a1") {
		t.Fatalf("payload %s", payload)
	}
}
