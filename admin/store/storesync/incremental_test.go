package storesync

import (
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"coregate/admin/spec"
	"coregate/admin/store"
	"coregate/internal/testcert"
)

// TestBuildFromLast: random sequences of puts and deletes of objects of
// every kind a Spec lists (routes, services, upstreams, consumers,
// consumer groups, plugin configs, global rules, ssls, credentials,
// plugin metadata, secrets) — mostly objects replaced in place and
// added, as a store mostly changes, with deletions, re-creations, invalid
// values, references that dangle, routes under another id and global
// rules that refuse the configuration among them — a few at a time
// between two builds, as the watch coalesces them. After each, the
// Syncer's build, made from the last when it can be (buildFrom), equals
// the build of a Syncer given the store's content at once: the same
// lists in the same order, the same Hash, the same error. Most builds
// are made from the last.
func TestBuildFromLast(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { buildFromRun(t, seed, false) })
	}
}

// TestBuildFromLastRemovals is TestBuildFromLast with many more
// deletions: one change in six deletes an object of any kind, referred
// to or not, and one build in three follows a run of several deletions
// (up to 17 objects, past maxHoles at times), of objects
// anywhere in the order, for the builds made from the last to have
// objects removed from every list, among them the last of a chunk and
// objects replaced before, and some objects left out or the
// configuration refused for what was removed. Many of the builds made
// from the last follow removals.
func TestBuildFromLastRemovals(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { buildFromRun(t, seed, true) })
	}
}

// buildFromRun is TestBuildFromLast's run with seed; removals, the
// deletions of TestBuildFromLastRemovals.
func buildFromRun(t *testing.T, seed uint64, removals bool) {
	st := unconnectedStore(t)
	quiet := slog.New(slog.DiscardHandler)
	rng := rand.New(rand.NewPCG(seed, 41))
	cert := testcert.New(t, testcert.Options{DNSNames: []string{"a.com"}}, nil)
	s := New(Options{Store: st, Log: quiet})
	type stored struct {
		value          []byte
		create, modify int64
	}
	live := map[string]stored{}
	rev := int64(0)
	pick := func(n int) string { return fmt.Sprint(rng.IntN(n)) }
	// value is a value for the object of resource res stored under id:
	// valid mostly, referring to objects that may not be stored.
	value := func(res, id string) []byte {
		v := rng.IntN(1000)
		switch res {
		case "routes":
			ref := ""
			switch rng.IntN(6) {
			case 0:
				ref = fmt.Sprintf(`,"service_id":"%s"`, pick(6))
			case 1:
				ref = fmt.Sprintf(`,"plugin_config_id":"%s","upstream_id":"%s"`, pick(6), pick(12))
			case 2:
				if rng.IntN(15) == 0 {
					ref = `,"upstream_id":"missing"` // left out
					break
				}
				fallthrough
			default:
				ref = fmt.Sprintf(`,"upstream_id":"%s"`, pick(12))
			}
			if rng.IntN(25) == 0 {
				// under another id (left out, its references dangling,
				// it would refuse the configuration: build skips by the
				// key's id)
				return fmt.Appendf(nil, `{"id":"other%s","uri":"/o/%d","upstream":{"nodes":{"127.0.0.1:1980":1}}}`, id, v)
			}
			return fmt.Appendf(nil, `{"uri":"/r%s/%d"%s}`, id, v, ref)
		case "upstreams":
			return fmt.Appendf(nil, `{"nodes":{"127.0.0.1:%d":1}}`, 1000+v)
		case "services":
			return fmt.Appendf(nil, `{"name":"s%d","upstream_id":"%s"}`, v, pick(12))
		case "consumers":
			if rng.IntN(3) == 0 {
				return fmt.Appendf(nil, `{"username":"%s","group_id":"%s","desc":"%d"}`, id, pick(4), v)
			}
			return fmt.Appendf(nil, `{"username":"%s","desc":"%d"}`, id, v)
		case "consumer_groups":
			return fmt.Appendf(nil, `{"plugins":{},"desc":"%d"}`, v)
		case "plugin_configs":
			return fmt.Appendf(nil, `{"plugins":{},"desc":"%d"}`, v)
		case "global_rules":
			if rng.IntN(8) == 0 {
				return []byte(`{"plugins":7}`) // refuses the configuration
			}
			return fmt.Appendf(nil, `{"plugins":{"prometheus":{"n":%d}}}`, v)
		case "ssls":
			b, _ := json.Marshal(map[string]any{"cert": cert.CertPEM, "key": cert.KeyPEM, "snis": []string{fmt.Sprintf("h%d.a.com", v)}})
			return b
		case "secrets":
			return fmt.Appendf(nil, `{"uri":"http://127.0.0.1:%d","prefix":"kv","token":"t"}`, 8000+v)
		}
		return fmt.Appendf(nil, `{"desc":"%d"}`, v) // credentials, plugin_metadata
	}
	// key is a key of resource res; ids are few, so that keys are put
	// again (in place), deleted and made again.
	key := func(res string) string {
		switch res {
		case "routes":
			return "/apisix/routes/" + pick(80)
		case "upstreams":
			return "/apisix/upstreams/" + pick(12)
		case "consumers":
			if rng.IntN(3) == 0 {
				return "/apisix/consumers/c" + pick(4) + "/credentials/" + pick(3)
			}
			return "/apisix/consumers/c" + pick(6)
		case "plugin_metadata":
			return "/apisix/plugin_metadata/" + []string{"prometheus", "http-logger", "syslog"}[rng.IntN(3)]
		case "secrets":
			return "/apisix/secrets/vault/" + pick(3)
		case "global_rules":
			return "/apisix/global_rules/" + pick(12) // some made after the start, refusing among them
		}
		return "/apisix/" + res + "/" + pick(6)
	}
	resources := []string{"routes", "routes", "routes", "routes", "routes", "routes", "upstreams", "services", "consumers",
		"consumer_groups", "plugin_configs", "global_rules", "ssls", "plugin_metadata", "secrets"}
	put := func(k string, v []byte) {
		rev++
		create := rev
		if old, ok := live[k]; ok {
			create = old.create
		}
		live[k] = stored{v, create, rev}
		s.apply(store.Event{Type: store.EventPut, KV: store.KV{Key: k, Value: v, CreateRevision: create, ModRevision: rev}})
	}
	// A start: every object referred to, most of the others, as a full
	// read would find them, and no global rule that refuses.
	referred := []string{"upstreams", "services", "plugin_configs", "consumer_groups"}
	for _, res := range referred {
		for i := range 12 {
			put(fmt.Sprintf("/apisix/%s/%d", res, i), value(res, fmt.Sprint(i)))
		}
	}
	for _, res := range resources {
		for range 30 {
			k := key(res)
			if res == "global_rules" {
				put(k, []byte(`{"plugins":{}}`))
				continue
			}
			put(k, value(res, k[len("/apisix/"+res+"/"):]))
		}
	}
	del := func(k string) {
		rev++
		delete(live, k)
		s.apply(store.Event{Type: store.EventDelete, KV: store.KV{Key: k, ModRevision: rev}})
	}
	// isReferred: res is of the objects others refer to, whose removal
	// leaves objects out (or refuses the configuration, a consumer
	// group's) for a few builds; deleted less often than the others
	// with removals, for the builds made from the last to be many.
	isReferred := func(k string) bool { return slices.Contains(referred, strings.Split(k, "/")[2]) }
	builds, failed, afterRemovals := 0, 0, 0
	from := s.fromLast
	// A run of appends: for run more builds, each step only adds new
	// routes (a bulk load's), under ids never used before, one of them
	// at times naming an upstream that is not stored, which spec.Check
	// refuses after the build from the last has appended the routes in
	// the last Spec's array (the build is thrown away, and made whole
	// without the route); the step after deletes it. A run's first step
	// deletes the routes added before but the last 8, so that the
	// configuration stays about as large.
	run, added := 0, 0
	var addedKeys []string
	inPlace, discarded, appendBuilds := 0, 0, 0
	// kept are the Specs of the last few builds, each with a copy of its
	// lists as built (a worker's base is one of them): no later build
	// may change what they hold, the lists of the builds that appended
	// in place in their arrays included.
	type keptSpec struct{ sp, copy *spec.Spec }
	var kept []keptSpec
	for step := range 1200 {
		if run == 0 && rng.IntN(12) == 0 {
			run = 3 + rng.IntN(6)
			for ; len(addedKeys) > 8; addedKeys = addedKeys[1:] {
				if _, ok := live[addedKeys[0]]; ok {
					del(addedKeys[0])
				}
			}
		}
		appends, missing := run > 0, false
		if appends {
			run--
			appendBuilds++
			for _, k := range addedKeys {
				if v, ok := live[k]; ok && strings.Contains(string(v.value), "missing") {
					del(k)
				}
			}
			for i := range 1 + rng.IntN(4) {
				added++
				k := fmt.Sprint("/apisix/routes/a", added)
				v := fmt.Appendf(nil, `{"uri":"/a%d","upstream_id":"%s"}`, added, pick(12))
				if i == 0 && rng.IntN(5) == 0 {
					v, missing = fmt.Appendf(nil, `{"uri":"/a%d","upstream_id":"missing"}`, added), true
				}
				put(k, v)
				addedKeys = append(addedKeys, k)
			}
		}
		for range 1 + rng.IntN(rng.IntN(6)+1) {
			if appends {
				break
			}
			res := resources[rng.IntN(len(resources))]
			k := key(res)
			_, exists := live[k]
			switch op := rng.IntN(50); {
			case !removals && exists && (op == 0 || op == 1 && res != "routes"),
				removals && exists && op < 8 && (op < 2 || !isReferred(k)):
				del(k)
			case op == 2 && res != "global_rules":
				put(k, []byte(`{"uri":`)) // invalid: left out, as a deletion would be
			default:
				_, _, id, _ := s.classify(k)
				put(k, value(res, id))
			}
		}
		if !appends && (rng.IntN(3) == 0 || removals && rng.IntN(2) == 0) {
			// an object referred to made again, or a route referring
			// to none or a global rule refusing put again, so that
			// the references dangle, or the configuration is refused,
			// for a few builds only (with removals, every one)
			var gone []string
			for _, res := range referred {
				for i := range 12 {
					if k := fmt.Sprintf("/apisix/%s/%d", res, i); live[k].value == nil || live[k].value[len(live[k].value)-1] != '}' {
						gone = append(gone, k)
					}
				}
			}
			for k, v := range live {
				if strings.Contains(string(v.value), "missing") || string(v.value) == `{"plugins":7}` {
					gone = append(gone, k)
				}
			}
			slices.Sort(gone)
			if len(gone) > 0 && !removals {
				gone = gone[rng.IntN(len(gone)):][:1]
			}
			for _, k := range gone {
				_, _, id, _ := s.classify(k)
				put(k, value(strings.Split(k, "/")[2], id))
			}
		}
		if !appends && removals && rng.IntN(3) == 0 {
			// a run of deletions, anywhere in the order, of an object
			// referred to at times
			keys := slices.Sorted(maps.Keys(live))
			for range 2 + rng.IntN(rng.IntN(16)+1) {
				if len(keys) == 0 {
					break
				}
				i := rng.IntN(len(keys))
				if !isReferred(keys[i]) || rng.IntN(4) == 0 {
					del(keys[i])
					keys = slices.Delete(keys, i, i+1)
				}
			}
		}
		removed, fromLast, last := s.last != nil && len(s.removed) > 0, s.fromLast, s.last
		got, gotErr := s.build()
		if removed && s.fromLast > fromLast {
			afterRemovals++
		}
		if missing && last != nil && s.fromLast == fromLast {
			discarded++
		}
		for _, k := range kept {
			if d := sameLists(k.sp, k.copy); d != "" {
				t.Fatalf("step %d: a Spec of an earlier build changed: %s", step, d)
			}
		}
		if gotErr == nil {
			if len(kept) > 0 {
				prev := kept[len(kept)-1].sp.Routes
				if len(prev) > 0 && len(got.Routes) > len(prev) && &got.Routes[0] == &prev[0] {
					inPlace++
				}
			}
			kept = append(kept, keptSpec{got, listsCopy(got)})
			if len(kept) > 5 {
				kept = kept[1:]
			}
		}
		fresh := New(Options{Store: st, Log: quiet})
		for k, v := range live {
			fresh.put(store.KV{Key: k, Value: v.value, CreateRevision: v.create, ModRevision: v.modify})
		}
		want, wantErr := fresh.build()
		builds++
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
			t.Fatalf("step %d: error %v, a fresh read's %v", step, gotErr, wantErr)
		}
		if wantErr != nil {
			failed++
			continue
		}
		if got.Hash != want.Hash {
			t.Fatalf("step %d: Hash %x, a fresh read's %x", step, got.Hash, want.Hash)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: the Spec differs from a fresh read's:\n%s", step, specDiff(got, want))
		}
	}
	// Most builds were made from the last one's; others whole, and
	// some failed (a global rule refusing), for the test to have tried
	// them all.
	// Some appended routes in place, in the last Spec's array, and some
	// of the builds that did so were thrown away; a sixth of the others
	// followed removals, with removals.
	if n := s.fromLast - from; n < builds/2 || n+failed == builds || failed == 0 || removals && afterRemovals < (builds-appendBuilds)/6 ||
		inPlace < builds/20 || discarded == 0 {
		t.Fatalf("%d builds, %d from the last (%d after removals, %d appending in place), %d refused, %d thrown away after appends",
			builds, n, afterRemovals, inPlace, failed, discarded)
	}
	t.Logf("%d builds, %d from the last (%d after removals, %d appending in place), %d refused, %d thrown away after appends",
		builds, s.fromLast-from, afterRemovals, inPlace, failed, discarded)
}

// listsCopy is a Spec with sp's lists, copied.
func listsCopy(sp *spec.Spec) *spec.Spec {
	c := new(spec.Spec)
	sv, cv := reflect.ValueOf(sp).Elem(), reflect.ValueOf(c).Elem()
	for i := range sv.NumField() {
		if f := sv.Field(i); f.Kind() == reflect.Slice {
			cv.Field(i).Set(reflect.AppendSlice(reflect.MakeSlice(f.Type(), 0, f.Len()), f))
		}
	}
	return c
}

// sameLists names the first object of sp's lists that is not the one
// at its place in c's (listsCopy), by identity: the same pointer, the
// same bytes (a json.RawMessage's); "" when there is none.
func sameLists(sp, c *spec.Spec) string {
	sv, cv := reflect.ValueOf(sp).Elem(), reflect.ValueOf(c).Elem()
	for i := range sv.NumField() {
		a, b := sv.Field(i), cv.Field(i)
		if a.Kind() != reflect.Slice {
			continue
		}
		name := sv.Type().Field(i).Name
		if a.Len() != b.Len() {
			return fmt.Sprintf("%s: %d objects, %d when built", name, a.Len(), b.Len())
		}
		for j := range a.Len() {
			x, y := a.Index(j), b.Index(j)
			if x.Pointer() != y.Pointer() || x.Kind() == reflect.Slice && x.Len() != y.Len() {
				return fmt.Sprintf("%s[%d] is not the object it was built with", name, j)
			}
		}
	}
	return ""
}

// specDiff names the lists of a and b that differ, by their objects'
// ids.
func specDiff(a, b *spec.Spec) string {
	av, bv := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	out := ""
	for i := range av.NumField() {
		if !reflect.DeepEqual(av.Field(i).Interface(), bv.Field(i).Interface()) {
			x, _ := json.Marshal(av.Field(i).Interface())
			y, _ := json.Marshal(bv.Field(i).Interface())
			out += fmt.Sprintf("%s:\n  got  %s\n  want %s\n", av.Type().Field(i).Name, x, y)
		}
	}
	return out
}

// TestBuildFromRemoval: a route removed from the middle of 3 000, and then
// one whose sum cut a chunk (the chunk after it runs on), makes its Spec
// from the last (buildFrom), hashes again the chunk that held it and no
// other (the one after too, for the one that cut), and moves none of the
// objects after it (their pos, the holes before them counted instead);
// a route after them replaced in place is put in its place, and the last
// route replaced, then deleted before the build, with one added, leaves
// no trace of the replacement.
func TestBuildFromRemoval(t *testing.T) {
	s := New(Options{Store: unconnectedStore(t)})
	const n = 3000
	rev := int64(0)
	put := func(i int, create int64) {
		rev++
		if create == 0 {
			create = rev
		}
		s.apply(store.Event{Type: store.EventPut, KV: store.KV{Key: fmt.Sprintf("/apisix/routes/%d", i),
			Value: fmt.Appendf(nil, `{"uri":"/r%d/%d","upstream":{"nodes":{"127.0.0.1:1980":1}}}`, i, rev), CreateRevision: create, ModRevision: rev}})
	}
	for i := range n {
		put(i, 0)
	}
	if _, err := s.build(); err != nil {
		t.Fatal(err)
	}
	cutter := -1 // a route in the middle whose sum cuts a chunk
	for i := n / 2; i < n-1 && cutter < 0; i++ {
		if s.order[i].sum[0] == 0 {
			cutter = i
		}
	}
	if cutter < 0 {
		t.Fatal("no route's sum cuts a chunk")
	}
	for _, c := range []struct {
		i      int // in s.order
		chunks int // hashed again at most
	}{{n / 3, 1}, {cutter - 1, 2}} {
		gone := s.order[c.i]
		after := slices.Clone(s.order[c.i+1:])
		pos := make([]int, len(after))
		for j, o := range after {
			pos[j] = o.pos
		}
		lastSums := map[*chunkSum]bool{}
		for _, c := range s.chunkSums {
			lastSums[c] = true
		}
		from := s.fromLast
		rev++
		s.apply(store.Event{Type: store.EventDelete, KV: store.KV{Key: gone.key, ModRevision: rev}})
		sp, err := s.build()
		if err != nil {
			t.Fatal(err)
		}
		if s.fromLast != from+1 {
			t.Fatalf("route %s removed: a whole build", gone.key)
		}
		if slices.Contains(sp.Routes, gone.route) || len(sp.Routes) != len(s.order) {
			t.Fatalf("route %s removed: %d routes served of %d", gone.key, len(sp.Routes), len(s.order))
		}
		hashed := 0
		for _, c := range s.chunkSums {
			if !lastSums[c] {
				hashed++
			}
		}
		if hashed > c.chunks {
			t.Errorf("route %s removed: %d chunks hashed again of %d, want %d at most", gone.key, hashed, len(s.chunkSums), c.chunks)
		}
		for j, o := range after {
			if o.pos != pos[j] {
				t.Fatalf("route %s removed: route %s moved from pos %d to %d", gone.key, o.key, pos[j], o.pos)
			}
		}
	}
	// A route after both replaced in place: its place is its pos less
	// the two holes before it.
	o := s.order[len(s.order)-2]
	var i int
	fmt.Sscanf(o.key, "/apisix/routes/%d", &i)
	put(i, o.create)
	sp, err := s.build()
	if err != nil {
		t.Fatal(err)
	}
	if got := sp.Routes[len(sp.Routes)-2]; got != s.objs[o.key].route || got == o.route {
		t.Fatalf("route %s replaced: %v in its place", o.key, got.URI)
	}
	// The last route replaced, then deleted, and one added: the Spec
	// serves the routes of s.order, in order.
	o = s.order[len(s.order)-1]
	fmt.Sscanf(o.key, "/apisix/routes/%d", &i)
	put(i, o.create)
	rev++
	s.apply(store.Event{Type: store.EventDelete, KV: store.KV{Key: o.key, ModRevision: rev}})
	put(n, 0)
	from := s.fromLast
	if sp, err = s.build(); err != nil {
		t.Fatal(err)
	}
	if s.fromLast != from+1 || len(sp.Routes) != len(s.order) {
		t.Fatalf("route %s replaced, deleted, one added: %d routes of %d (from the last: %v)", o.key, len(sp.Routes), len(s.order), s.fromLast != from)
	}
	for j, r := range s.order {
		if sp.Routes[j] != r.route {
			t.Fatalf("route %s replaced, deleted, one added: route %d is %s, not %s", o.key, j, sp.Routes[j].URI, r.route.URI)
		}
	}
}

// TestBuildFromAppends: routes added after 3 000, a few a build, are
// appended in place, in the array of the last Spec's routes (grown),
// whose capacity the Spec handed on does not show, and the Hash takes up
// the last build's SHA-256 state after its chunks but the last one
// (Syncer.topState), keeping those chunks' sums where they are; the Hash
// is the one made from nothing. A build whose appends spec.Check refuses
// (a route naming no stored upstream) is thrown away, and no Spec built
// before it, kept as a worker's base is, changes: neither its objects
// nor, after that build's appends past its length, what it holds.
func TestBuildFromAppends(t *testing.T) {
	s := New(Options{Store: unconnectedStore(t), Log: slog.New(slog.DiscardHandler)})
	rev := int64(0)
	put := func(id string, value string) {
		rev++
		s.apply(store.Event{Type: store.EventPut, KV: store.KV{Key: "/apisix/routes/" + id, Value: []byte(value),
			CreateRevision: rev, ModRevision: rev}})
	}
	s.apply(store.Event{Type: store.EventPut, KV: store.KV{Key: "/apisix/upstreams/u",
		Value: []byte(`{"nodes":{"127.0.0.1:1980":1}}`), CreateRevision: 1, ModRevision: 1}})
	rev = 1
	for i := range 3000 {
		put(fmt.Sprint(i), fmt.Sprintf(`{"uri":"/r%d","upstream_id":"u"}`, i))
	}
	first, err := s.build()
	if err != nil {
		t.Fatal(err)
	}
	type keptSpec struct{ sp, copy *spec.Spec }
	kept := []keptSpec{{first, listsCopy(first)}}
	n := 3000
	for b := range 12 {
		if b == 6 {
			// Appended in place, then refused: the build is made
			// whole, without the route, which is then deleted.
			put("missing", `{"uri":"/missing","upstream_id":"missing"}`)
			last, from := s.last, s.fromLast
			if _, err := s.build(); err != nil || s.fromLast != from {
				t.Fatalf("a route naming no upstream: %v, from the last %v", err, s.fromLast != from)
			}
			if l := s.room.Routes; len(l) > len(last.Routes) && &l[0] == &last.Routes[0] {
				t.Fatal("the build refused is the next one's to append to")
			}
			rev++
			s.apply(store.Event{Type: store.EventDelete, KV: store.KV{Key: "/apisix/routes/missing", ModRevision: rev}})
			sp, err := s.build()
			if err != nil {
				t.Fatal(err)
			}
			kept = append(kept, keptSpec{sp, listsCopy(sp)})
			continue
		}
		last, lastSums := s.last, s.chunkSums
		for range 1 + b%3 {
			put(fmt.Sprint(n), fmt.Sprintf(`{"uri":"/r%d","upstream_id":"u"}`, n))
			n++
		}
		from := s.fromLast
		sp, err := s.build()
		if err != nil {
			t.Fatal(err)
		}
		if s.fromLast != from+1 || len(sp.Routes) != n {
			t.Fatalf("build %d: %d routes of %d, from the last: %v", b, len(sp.Routes), n, s.fromLast != from)
		}
		if &sp.Routes[0] != &last.Routes[0] || cap(sp.Routes) != len(sp.Routes) {
			t.Fatalf("build %d: routes not appended in place in the last Spec's array, or with room shown", b)
		}
		for i, o := range s.order[1:] { // after the upstream
			if sp.Routes[i] != o.route {
				t.Fatalf("build %d: route %d is %s, not %s", b, i, sp.Routes[i].URI, o.route.URI)
			}
		}
		// Kept in place: in lastSums' array, unless they outgrew it.
		k := len(lastSums) - 1
		moved := &s.chunkSums[0] != &lastSums[0] && len(s.chunkSums) <= cap(lastSums)
		if moved || s.topN != len(s.chunkSums)-1 || !slices.Equal(s.chunkSums[:k], lastSums[:k]) {
			t.Fatalf("build %d: the chunks before the last one's not kept in place (%d of %d chunks kept)", b, s.topN, len(s.chunkSums))
		}
		if want := hashObjects(s.order); sp.Hash != want {
			t.Fatalf("build %d: Hash %x, made from nothing %x", b, sp.Hash, want)
		}
		for _, k := range kept {
			if d := sameLists(k.sp, k.copy); d != "" {
				t.Fatalf("build %d: a Spec built before changed: %s", b, d)
			}
		}
		kept = append(kept, keptSpec{sp, listsCopy(sp)})
	}
}
