package storesync

import (
	"encoding/json"
	"fmt"
	"log/slog"
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
		t.Run(fmt.Sprint(seed), func(t *testing.T) { buildFromRun(t, seed) })
	}
}

func buildFromRun(t *testing.T, seed uint64) {
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
	builds, failed := 0, 0
	from := s.fromLast
	for step := range 1200 {
		for range 1 + rng.IntN(rng.IntN(6)+1) {
			res := resources[rng.IntN(len(resources))]
			k := key(res)
			_, exists := live[k]
			switch op := rng.IntN(50); {
			case op == 0 && exists, op == 1 && exists && res != "routes":
				rev++
				delete(live, k)
				s.apply(store.Event{Type: store.EventDelete, KV: store.KV{Key: k, ModRevision: rev}})
			case op == 2 && res != "global_rules":
				put(k, []byte(`{"uri":`)) // invalid: left out, as a deletion would be
			default:
				_, _, id, _ := s.classify(k)
				put(k, value(res, id))
			}
		}
		if rng.IntN(3) == 0 {
			// an object referred to made again, or a route referring
			// to none or a global rule refusing put again, so that
			// the references dangle, or the configuration is refused,
			// for a few builds only
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
			if len(gone) > 0 {
				k := gone[rng.IntN(len(gone))]
				_, _, id, _ := s.classify(k)
				put(k, value(strings.Split(k, "/")[2], id))
			}
		}
		got, gotErr := s.build()
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
	if n := s.fromLast - from; n < builds/2 || n+failed == builds || failed == 0 {
		t.Fatalf("%d builds, %d from the last, %d refused", builds, n, failed)
	}
	t.Logf("%d builds, %d from the last, %d refused", builds, s.fromLast-from, failed)
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
