package storesync

import (
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"coregate/admin/store"
)

// TestModifyIndexesAsWalked: random puts and deletes of keys of every
// indexed resource and others (revisions mostly rising, some lower, as a
// test store may give), then full reads; the ModifyIndexes kept as keys
// change are those found by walking every key, as they were before.
func TestModifyIndexesAsWalked(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 9))
	s := New(Options{Store: unconnectedStore(t), Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
	resources := append(slices.Clone(IndexedResources), "plugin_metadata", "gen_id")
	rev := int64(0)
	walked := func() map[string]int64 {
		m := map[string]int64{}
		for _, r := range IndexedResources {
			m[r] = 0
		}
		var top int64
		for key, rev := range s.mods {
			res, _, _ := strings.Cut(strings.TrimPrefix(key, s.dir), "/")
			m[res] = max(m[res], rev)
			top = max(top, rev)
		}
		m["max_modify_index"], m["prev_index"], m["x_etcd_index"] = top, s.prevIdx, s.rev
		return m
	}
	for step := range 3000 {
		key := fmt.Sprintf("/apisix/%s/%d", resources[rng.IntN(len(resources))], rng.IntN(6))
		rev++
		ev := store.Event{Type: store.EventPut, KV: store.KV{Key: key, CreateRevision: rev, ModRevision: rev, Value: []byte(`{`)}}
		switch rng.IntN(10) {
		case 0, 1, 2:
			ev.Type, ev.KV.Value = store.EventDelete, nil
		case 3:
			ev.KV.ModRevision = max(1, rev-int64(rng.IntN(20)))
		}
		s.apply(ev)
		if step%500 == 499 {
			s.clearMods() // a full read
		}
		s.setIndexes()
		if got, want := s.ModifyIndexes(), walked(); !maps.Equal(got, want) {
			t.Fatalf("step %d: %v kept, %v walked", step, got, want)
		}
	}
}
