package control

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
)

// TestCheckKinds: the indexes deltaChecked's references use name the
// resources they say.
func TestCheckKinds(t *testing.T) {
	for i, want := range map[int]string{ckUpstreams: "upstreams", ckServices: "services", ckPluginConfigs: "plugin_configs", ckConsumerGroups: "consumer_groups"} {
		if checkKinds[i].name != want {
			t.Errorf("checkKinds[%d] is %s, want %s", i, checkKinds[i].name, want)
		}
	}
	for _, k := range deltaKinds {
		if !slices.ContainsFunc(checkKinds[:], func(c checkKind) bool { return c.name == k.name }) {
			t.Errorf("%s is a Delta's member deltaChecked does not check", k.name)
		}
	}
}

// TestDeltaAsFull: random sequences of changes to every resource (objects
// replaced, added, removed and moved; references that dangle, ids taken
// twice, credentials' and secrets' ids of the wrong form among them), each
// Spec sent as a Delta against the one before it, as the supervisor
// sends them: the worker decodes the Spec sent, or refuses it with the
// error a Check of the whole Spec gives; deltaChecked's true is never
// wrong, and it is true for a good share of the changes (half of them
// are refused, their references dangling or ids taken twice).
func TestDeltaAsFull(t *testing.T) {
	for seed := range uint64(8) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) { deltaAsFullRun(t, seed) })
	}
}

func deltaAsFullRun(t *testing.T, seed uint64) {
	rng := rand.New(rand.NewPCG(seed, 41))
	ref := func(field, prefix string, n int) string {
		switch k := rng.IntN(40); {
		case k < 14:
			return ""
		case k == 14:
			return fmt.Sprintf(`,"%s":"%s%d"`, field, prefix, n+1) // dangles
		default:
			return fmt.Sprintf(`,"%s":"%s%d"`, field, prefix, rng.IntN(n))
		}
	}
	// object makes a new object of the resource with the id id.
	object := func(res, id string) any {
		switch res {
		case "routes":
			up := ref("upstream_id", "u", 6)
			if up == "" {
				up = `,"upstream":{"nodes":{"127.0.0.1:1980":1}}`
			}
			return mustRoute(t, fmt.Sprintf(`{"id":%q,"uri":"/r%d"%s%s%s}`, id, rng.IntN(99),
				up, ref("service_id", "s", 3), ref("plugin_config_id", "pc", 2)))
		case "services":
			return mustDecode(t, spec.DecodeService, fmt.Sprintf(`{"id":%q,"desc":"d%d"%s}`, id, rng.IntN(99), ref("upstream_id", "u", 6)))
		case "upstreams":
			return mustDecode(t, spec.DecodeUpstream, fmt.Sprintf(`{"id":%q,"nodes":{"127.0.0.1:%d":1}}`, id, 2000+rng.IntN(99)))
		case "plugin_configs":
			return mustDecode(t, spec.DecodePluginConfig, fmt.Sprintf(`{"id":%q,"plugins":{"proxy-rewrite":{"uri":"/p%d"}}}`, id, rng.IntN(99)))
		case "consumers":
			return mustDecode(t, spec.DecodeConsumer, fmt.Sprintf(`{"username":%q,"desc":"d%d"%s}`, id, rng.IntN(99), ref("group_id", "g", 2)))
		case "consumer_groups":
			return mustDecode(t, spec.DecodeConsumerGroup, fmt.Sprintf(`{"id":%q,"plugins":{"limit-count":{"count":%d,"time_window":60}}}`, id, 1+rng.IntN(99)))
		case "credentials":
			if rng.IntN(12) == 0 {
				id = "c" + id // not <username>/credentials/<id>
			}
			return json.RawMessage(fmt.Sprintf(`{"id":"c/credentials/%s","plugins":{"key-auth":{"key":"k%d"}}}`, id, rng.IntN(99)))
		case "secrets":
			if rng.IntN(12) == 0 {
				id = "/" + id
			}
			return json.RawMessage(fmt.Sprintf(`{"id":"vault/%s","uri":"http://127.0.0.1:%d"}`, id, 2000+rng.IntN(99)))
		}
		panic(res)
	}
	type resource struct {
		name, prefix string
		n            int
		list         func(*spec.Spec) any
	}
	resources := []resource{
		{"routes", "r", 40, func(s *spec.Spec) any { return &s.Routes }},
		{"services", "s", 3, func(s *spec.Spec) any { return &s.Services }},
		{"upstreams", "u", 6, func(s *spec.Spec) any { return &s.Upstreams }},
		{"plugin_configs", "pc", 2, func(s *spec.Spec) any { return &s.PluginConfigs }},
		{"consumers", "c", 3, func(s *spec.Spec) any { return &s.Consumers }},
		{"consumer_groups", "g", 2, func(s *spec.Spec) any { return &s.ConsumerGroups }},
		{"credentials", "k", 3, func(s *spec.Spec) any { return &s.Credentials }},
		{"secrets", "v", 2, func(s *spec.Spec) any { return &s.Secrets }},
	}
	// change applies one random change to the list of res in s.
	change := func(s *spec.Spec, res resource) {
		switch l := res.list(s).(type) {
		case *[]*spec.Route:
			*l = changeList(rng, *l, func(id string) *spec.Route { return object(res.name, id).(*spec.Route) }, res.prefix, res.n)
		case *[]*spec.Service:
			*l = changeList(rng, *l, func(id string) *spec.Service { return object(res.name, id).(*spec.Service) }, res.prefix, res.n)
		case *[]*spec.Upstream:
			*l = changeList(rng, *l, func(id string) *spec.Upstream { return object(res.name, id).(*spec.Upstream) }, res.prefix, res.n)
		case *[]*spec.PluginConfig:
			*l = changeList(rng, *l, func(id string) *spec.PluginConfig { return object(res.name, id).(*spec.PluginConfig) }, res.prefix, res.n)
		case *[]*spec.Consumer:
			*l = changeList(rng, *l, func(id string) *spec.Consumer { return object(res.name, id).(*spec.Consumer) }, res.prefix, res.n)
		case *[]*spec.ConsumerGroup:
			*l = changeList(rng, *l, func(id string) *spec.ConsumerGroup { return object(res.name, id).(*spec.ConsumerGroup) }, res.prefix, res.n)
		case *[]json.RawMessage:
			*l = changeList(rng, *l, func(id string) json.RawMessage { return object(res.name, id).(json.RawMessage) }, res.prefix, res.n)
		}
	}

	// sent is the last Spec sent; held, the worker's copy of it. Both
	// passed Check, as only such a Spec is installed.
	sent, held := &spec.Spec{}, &spec.Spec{}
	fast, refused := 0, 0
	const steps = 400
	for step := range steps {
		next := *sent
		for _, res := range resources {
			// a fresh list, as the configuration store makes
			switch l := res.list(&next).(type) {
			case *[]*spec.Route:
				*l = slices.Clone(*l)
			case *[]*spec.Service:
				*l = slices.Clone(*l)
			case *[]*spec.Upstream:
				*l = slices.Clone(*l)
			case *[]*spec.PluginConfig:
				*l = slices.Clone(*l)
			case *[]*spec.Consumer:
				*l = slices.Clone(*l)
			case *[]*spec.ConsumerGroup:
				*l = slices.Clone(*l)
			case *[]json.RawMessage:
				*l = slices.Clone(*l)
			}
		}
		for range 1 + rng.IntN(3) {
			res := resources[0]
			if k := rng.IntN(2 * len(resources)); k < len(resources) {
				res = resources[k]
			}
			change(&next, res)
		}
		next.SetHash()
		payload, ok, err := EncodeDelta(sent, &next)
		if err != nil {
			t.Fatalf("step %d: %v", step, err)
		}
		if !ok {
			// nothing kept: sent as a Config
			if next.Check() == nil {
				if held, err = DecodeSpec(mustEncode(t, &next), nil); err != nil {
					t.Fatal(err)
				}
				sent = &next
			}
			continue
		}
		wantErr := next.Check()
		got, err := DecodeDelta(payload, held, nil)
		if (err == nil) != (wantErr == nil) || (err != nil && err.Error() != "control: config: "+wantErr.Error()) {
			t.Fatalf("step %d: DecodeDelta: %v; Check of the whole Spec: %v\npayload %s", step, err, wantErr, payload)
		}
		if err != nil {
			refused++
			continue // the worker keeps the Spec it holds
		}
		want, err := DecodeSpec(mustEncode(t, &next), nil)
		if err != nil {
			t.Fatal(err)
		}
		if d := cmp.Diff(want, got); d != "" {
			t.Fatalf("step %d: decoded spec (-config +delta):\n%s\npayload %s", step, d, payload)
		}
		if deltaCheckedPayload(t, payload, held) {
			fast++
		}
		sent, held = &next, got
	}
	if fast < steps/5 {
		t.Fatalf("the changes were checked alone %d times in %d steps (%d refused)", fast, steps, refused)
	}
	t.Logf("%d of %d Deltas checked from their changes alone, %d refused", fast, steps, refused)
}

func mustEncode(t *testing.T, s *spec.Spec) []byte {
	t.Helper()
	b, err := EncodeSpec(s)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// deltaCheckedPayload decodes payload against held again and reports what
// deltaChecked said of it.
func deltaCheckedPayload(t *testing.T, payload []byte, held *spec.Spec) bool {
	t.Helper()
	var members map[string]json.RawMessage
	if err := json.Unmarshal(payload, &members); err != nil {
		t.Fatal(err)
	}
	changes := map[string]*memberChange{}
	for name, raw := range members {
		if name == "base" || name == "hash" || name == "checked" {
			continue
		}
		var items []json.RawMessage
		if err := json.Unmarshal(raw, &items); err != nil {
			t.Fatal(err)
		}
		c := &memberChange{}
		n := 0
		for _, it := range items {
			if it[0] == '[' {
				var run [2]int
				if err := json.Unmarshal(it, &run); err != nil {
					t.Fatal(err)
				}
				c.runs = append(c.runs, run)
				n += run[1] - run[0]
				continue
			}
			c.added = append(c.added, n)
			n++
		}
		changes[name] = c
	}
	got, err := DecodeDelta(payload, held, nil)
	if err != nil {
		t.Fatal(err)
	}
	return deltaChecked(held, got, changes)
}

// changeList applies one random change to l: an object replaced, added
// (at the end, or in the middle), removed, or moved; ids from prefix0 to
// prefix<n-1>, or now and then one taken twice.
func changeList[T any](rng *rand.Rand, l []T, mk func(id string) T, prefix string, n int) []T {
	id := fmt.Sprintf("%s%d", prefix, rng.IntN(n))
	switch k := rng.IntN(10); {
	case k < 4 && len(l) > 0: // replaced in place: a PUT of an existing id
		i := rng.IntN(len(l))
		return slices.Replace(l, i, i+1, mk(idOf(l[i])))
	case k < 6 && len(l) > 0: // removed
		i := rng.IntN(len(l))
		return slices.Delete(l, i, i+1)
	case k == 6 && len(l) > 1: // moved
		i, j := rng.IntN(len(l)), rng.IntN(len(l))
		v := l[i]
		return slices.Insert(slices.Delete(l, i, i+1), min(j, len(l)-1), v)
	case k == 7 && len(l) > 0: // added in the middle
		return slices.Insert(l, rng.IntN(len(l)), mk(id))
	default: // added at the end, unless its id is there (now and then it is)
		if rng.IntN(8) != 0 && slices.ContainsFunc(l, func(v T) bool { return idOf(v) == id }) {
			return l
		}
		return append(l, mk(id))
	}
}

// idOf is the id of an object of any resource of the test.
func idOf(v any) string {
	switch o := v.(type) {
	case *spec.Route:
		return o.ID.String()
	case *spec.Service:
		return o.ID.String()
	case *spec.Upstream:
		return o.ID.String()
	case *spec.PluginConfig:
		return o.ID.String()
	case *spec.Consumer:
		return o.Username
	case *spec.ConsumerGroup:
		return o.ID.String()
	case json.RawMessage:
		id := spec.RawID(o, "id").String()
		if i := len(id) - 1; i >= 0 {
			for i >= 0 && id[i] != '/' {
				i--
			}
			return id[i+1:]
		}
		return id
	}
	panic(v)
}

// TestDeltaRunKeptTwice: a Delta whose runs keep a base object twice is
// refused with the duplicate id, as a Check of the whole Spec finds it.
func TestDeltaRunKeptTwice(t *testing.T) {
	base := bulkSpec(t, 3)
	for _, runs := range []string{`[0,2],[1,2]`, `[1,3],[0,2]`, `[0,3],[2,3]`} {
		payload := fmt.Sprintf(`{"base":"%x","hash":"%x","routes":[%s]}`, base.Hash, [32]byte{1}, runs)
		if _, err := DecodeDelta([]byte(payload), base, nil); err == nil || !strings.Contains(err.Error(), "duplicate id") {
			t.Errorf("runs %s: %v, want a duplicate id", runs, err)
		}
	}
}
