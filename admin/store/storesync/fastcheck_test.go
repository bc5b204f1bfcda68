package storesync

import (
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/admin/store"
)

// TestFastCheckAsFull: random puts and deletes of routes, upstreams,
// services and plugin configs (references that dangle, ids in values
// that are not their keys', objects that fail their schema among them)
// applied to two Syncers, one of which Checks every Spec whole; each
// build gives both the same Spec (Hash, objects) or both an error, and
// the fast path was taken on some builds.
func TestFastCheckAsFull(t *testing.T) {
	for seed := range uint64(6) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { fastCheckRun(t, seed) })
	}
}

func fastCheckRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	fast := New(Options{Store: unconnectedStore(t), Log: quiet})
	full := New(Options{Store: unconnectedStore(t), Log: quiet})
	created := map[string]int64{}
	rev := int64(0)
	ref := func(field, prefix string, n int) string {
		switch k := rng.IntN(48); {
		case k < 12:
			return ""
		case k == 12:
			return fmt.Sprintf(`,"%s":"%s%d"`, field, prefix, n+1) // dangles
		default:
			return fmt.Sprintf(`,"%s":"%s%d"`, field, prefix, rng.IntN(n))
		}
	}
	value := func(res, id string) string {
		foreign := ""
		if rng.IntN(60) == 0 {
			foreign = fmt.Sprintf(`"id":"%s",`, id+"x")
			if res == "routes" && rng.IntN(2) == 0 {
				foreign = fmt.Sprintf(`"id":"r%d",`, rng.IntN(12)) // a duplicate, maybe
			}
		}
		switch res {
		case "upstreams":
			return fmt.Sprintf(`{%s"nodes":{"127.0.0.1:%d":1}}`, foreign, 2000+rng.IntN(9))
		case "services":
			return fmt.Sprintf(`{%s"desc":"s"%s}`, foreign, ref("upstream_id", "u", 4))
		case "plugin_configs":
			return fmt.Sprintf(`{%s"plugins":{"proxy-rewrite":{"uri":"/p%d"}}}`, foreign, rng.IntN(9))
		}
		if rng.IntN(30) == 0 {
			return `{"uri":5}` // fails its schema
		}
		return fmt.Sprintf(`{%s"uri":"/r%d","plugins":{"proxy-rewrite":{"uri":"/v%d"}}%s%s%s}`, foreign, rng.IntN(99), rng.IntN(99),
			ref("upstream_id", "u", 4), ref("service_id", "s", 3), ref("plugin_config_id", "pc", 2))
	}
	fastBuilds := 0
	for step := range 600 {
		for range 1 + rng.IntN(3) {
			res, prefix, n := "routes", "r", 12
			switch rng.IntN(24) {
			case 0:
				res, prefix, n = "upstreams", "u", 4
			case 1:
				res, prefix, n = "services", "s", 3
			case 2:
				res, prefix, n = "plugin_configs", "pc", 2
			}
			id := fmt.Sprintf("%s%d", prefix, rng.IntN(n))
			key := "/apisix/" + res + "/" + id
			rev++
			ev := store.Event{Type: store.EventPut, KV: store.KV{Key: key, ModRevision: rev}}
			if rng.IntN(8) == 0 {
				ev.Type = store.EventDelete
				delete(created, key)
			} else {
				if created[key] == 0 {
					created[key] = rev
				}
				ev.KV.CreateRevision, ev.KV.Value = created[key], []byte(value(res, id))
			}
			fast.apply(ev)
			full.apply(ev)
		}
		full.valid = false
		if fast.fastCheck() {
			fastBuilds++
		}
		a, errA := fast.build()
		b, errB := full.build()
		if (errA == nil) != (errB == nil) {
			t.Fatalf("step %d: %v with the changed routes checked, %v with the whole Spec", step, errA, errB)
		}
		if errA != nil {
			continue
		}
		ids := func(sp *spec.Spec) []string {
			var out []string
			for _, r := range sp.Routes {
				out = append(out, r.ID.String())
			}
			return out
		}
		if a.Hash != b.Hash || !slices.Equal(ids(a), ids(b)) || len(a.Upstreams) != len(b.Upstreams) || len(a.Services) != len(b.Services) {
			t.Fatalf("step %d: routes %v with the changed routes checked, %v with the whole Spec", step, ids(a), ids(b))
		}
	}
	if fastBuilds == 0 {
		t.Fatal("no build took the fast path")
	}
	t.Logf("%d of 600 builds checked the changed routes alone", fastBuilds)
}
