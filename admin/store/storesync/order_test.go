package storesync

import (
	"fmt"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/store"
)

// TestOrderKeptAcrossChanges: the order a Syncer keeps from one build to
// the next, through puts of new objects, updates, deletions, re-creations
// and invalid values made valid again, serves the objects as a sort of them all does, with
// the Hash a Syncer that read them all at once gives.
func TestOrderKeptAcrossChanges(t *testing.T) {
	st := unconnectedStore(t)
	quiet := slog.New(slog.DiscardHandler)
	s := New(Options{Store: st, Log: quiet})
	rng := rand.New(rand.NewPCG(1, 2))
	type stored struct {
		value          []byte
		create, modify int64
	}
	live := map[string]stored{} // what the store holds
	rev := int64(0)
	kinds := []string{"routes", "upstreams", "services", "consumers"}
	value := func(kind, id string) []byte {
		switch kind {
		case "routes":
			return fmt.Appendf(nil, `{"uri":"/r%s/%d","upstream":{"nodes":{"127.0.0.1:1980":1}}}`, id, rng.IntN(100))
		case "upstreams":
			return fmt.Appendf(nil, `{"nodes":{"127.0.0.1:%d":1}}`, 1000+rng.IntN(1000))
		case "services":
			return fmt.Appendf(nil, `{"name":"s%d"}`, rng.IntN(100))
		}
		return fmt.Appendf(nil, `{"username":"%s","desc":"%d"}`, id, rng.IntN(100))
	}
	for step := range 3000 {
		rev++
		kind := kinds[rng.IntN(len(kinds))]
		id := fmt.Sprint(rng.IntN(60))
		key := "/apisix/" + kind + "/" + id
		old, exists := live[key]
		switch op := rng.IntN(10); {
		case op < 3 && exists:
			delete(live, key)
			s.apply(store.Event{Type: store.EventDelete, KV: store.KV{Key: key, ModRevision: rev}})
		default:
			// An invalid value is left out, as a deletion would be, but
			// the key keeps its create revision in the store: when it is
			// made valid again it goes back to its place, not to the end.
			v := value(kind, id)
			if op == 9 {
				v = []byte(`{"uri":`)
			}
			create := rev
			if exists {
				create = old.create
			}
			live[key] = stored{v, create, rev}
			s.apply(store.Event{Type: store.EventPut, KV: store.KV{Key: key, Value: v, CreateRevision: create, ModRevision: rev}})
		}
		if step%7 != 0 {
			continue
		}
		got, err := s.build()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		var want []*object
		for _, o := range s.objs {
			want = append(want, o)
		}
		slices.SortFunc(want, byCreation)
		if !slices.Equal(s.order, want) {
			t.Fatalf("step %d: kept order %v, sorted %v (%d objects)", step, keys(s.order), keys(want), len(s.objs))
		}
		// A Syncer that reads the store now, as list does.
		fresh := New(Options{Store: st, Log: quiet})
		for k, v := range live {
			fresh.put(store.KV{Key: k, Value: v.value, CreateRevision: v.create, ModRevision: v.modify})
		}
		fs, err := fresh.build()
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if got.Hash != fs.Hash || len(got.Routes) != len(fs.Routes) || len(got.Consumers) != len(fs.Consumers) {
			t.Fatalf("step %d: the kept order's Spec differs from a fresh read's", step)
		}
		for i := range got.Routes {
			if got.Routes[i].ID != fs.Routes[i].ID {
				t.Fatalf("step %d: route %d is %s, a fresh read has %s", step, i, got.Routes[i].ID.String(), fs.Routes[i].ID.String())
			}
		}
	}
}

func keys(objs []*object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = fmt.Sprintf("%s@%d", o.key, o.create)
	}
	return out
}
