package storesync

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/store"
)

// TestHashAsFromNothing: random sequences of upstreams and routes put,
// replaced and deleted (a route now and then naming an upstream that is
// not stored, left out), each Spec's Hash made by a build that takes over
// the chunks of the builds before; it equals the Hash of a Syncer given
// the same keys, values and create revisions at once (no chunk to take
// over), and hashObjects' of the objects served; it changes with the
// objects served, and with the order of two objects.
func TestHashAsFromNothing(t *testing.T) {
	for seed := range uint64(3) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { hashRun(t, seed) })
	}
}

func hashRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	s := New(Options{Store: unconnectedStore(t)})
	kvs := map[string]store.KV{}
	rev := int64(0)
	put := func(key string, value []byte) {
		rev++
		kv := store.KV{Key: key, Value: value, CreateRevision: rev, ModRevision: rev}
		if old, ok := kvs[key]; ok {
			kv.CreateRevision = old.CreateRevision
		}
		kvs[key] = kv
		s.apply(store.Event{Type: store.EventPut, KV: kv})
	}
	del := func(key string) {
		rev++
		delete(kvs, key)
		s.apply(store.Event{Type: store.EventDelete, KV: store.KV{Key: key, ModRevision: rev}})
	}
	route := func(i int) {
		up := fmt.Sprint("u", rng.IntN(40))
		if rng.IntN(50) == 0 {
			up = "missing"
		}
		put(fmt.Sprintf("/apisix/routes/%d", i), fmt.Appendf(nil, `{"uri":"/r%d/%d","upstream_id":%q}`, i, rev, up))
	}
	for i := range 40 {
		put(fmt.Sprintf("/apisix/upstreams/u%d", i), fmt.Appendf(nil, `{"nodes":{"127.0.0.1:%d":1}}`, 2000+i))
	}
	next := 0
	for range 1500 {
		route(next)
		next++
	}
	var last [32]byte
	var lastServed []*object
	for step := range 60 {
		for range 1 + rng.IntN(6) {
			keys := slices.Sorted(maps.Keys(kvs))
			switch op := rng.IntN(10); {
			case op < 4:
				route(next)
				next++
			case op < 7:
				var i int
				if _, err := fmt.Sscanf(keys[rng.IntN(len(keys))], "/apisix/routes/%d", &i); err == nil {
					route(i)
				}
			case op < 9:
				if k := keys[rng.IntN(len(keys))]; k[:15] == "/apisix/routes/" {
					del(k)
				}
			default:
				i := rng.IntN(40)
				put(fmt.Sprintf("/apisix/upstreams/u%d", i), fmt.Appendf(nil, `{"nodes":{"127.0.0.1:%d":1}}`, 3000+int(rev)))
			}
		}
		sp, err := s.build()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		fresh := New(Options{Store: unconnectedStore(t)})
		for _, kv := range kvs {
			fresh.put(kv)
		}
		want, err := fresh.build()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if sp.Hash != want.Hash {
			t.Fatalf("step %d: Hash %x, from nothing %x", step, sp.Hash, want.Hash)
		}
		if len(want.Routes) != len(sp.Routes) {
			t.Fatalf("step %d: %d routes, from nothing %d", step, len(sp.Routes), len(want.Routes))
		}
		var served []*object
		for _, o := range s.order {
			if o.route == nil || slices.Contains(sp.Routes, o.route) {
				served = append(served, o)
			}
		}
		if h := hashObjects(served); h != sp.Hash {
			t.Fatalf("step %d: Hash %x, hashObjects %x", step, sp.Hash, h)
		}
		if same := slices.Equal(served, lastServed); same != (sp.Hash == last) {
			t.Fatalf("step %d: the objects served the same as the step before: %v; the Hash: %v", step, same, !same)
		}
		last, lastServed = sp.Hash, served
	}
	// Two routes' create revisions swapped: the same objects in another
	// order.
	keys := slices.Sorted(maps.Keys(kvs))
	a, b := kvs[keys[len(keys)-1]], kvs[keys[len(keys)-2]]
	a.CreateRevision, b.CreateRevision = b.CreateRevision, a.CreateRevision
	kvs[a.Key], kvs[b.Key] = a, b
	swapped := New(Options{Store: unconnectedStore(t)})
	for _, kv := range kvs {
		swapped.put(kv)
	}
	sp, err := swapped.build()
	if err != nil {
		t.Fatal(err)
	}
	if sp.Hash == last {
		t.Error("two objects swapped: the same Hash")
	}
}
