package plugins

import (
	"encoding/json"
	"sync/atomic"
	"testing"
)

// countChecks counts the checks of its configurations; it refuses one
// whose "bad" is true.
type countChecks struct {
	checks *atomic.Int64
	schema string
}

func (p countChecks) Schema() []byte { return []byte(p.schema) }

func (p countChecks) Check(raw json.RawMessage) error {
	p.checks.Add(1)
	var v struct{ Bad bool }
	if err := json.Unmarshal(raw, &v); err != nil || v.Bad {
		return errRefused
	}
	return nil
}

func (countChecks) Build(raw json.RawMessage, _ Env) (Instance, error) { return string(raw), nil }

var errRefused = &json.UnsupportedValueError{Str: "refused"}

func countingRegistry(schema string) (*Registry, *atomic.Int64) {
	n := new(atomic.Int64)
	r := NewRegistry([]Entry{{Name: "c", Priority: 1}})
	r.Register("c", countChecks{n, schema})
	return r, n
}

// TestCheckedOnce: a configuration the registry passed is not checked
// again, by Check, CheckAll or a build; one it refused, or one holding a
// reference, is checked every time.
func TestCheckedOnce(t *testing.T) {
	r, n := countingRegistry(`{"type":"object"}`)
	good := map[string]json.RawMessage{"c": json.RawMessage(`{"v":1}`)}
	for range 3 {
		if _, err := r.CheckAll(good, false); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Build(good, Env{}); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 1 {
		t.Errorf("a configuration passed: %d checks, want 1", got)
	}
	for range 2 {
		if err := r.Check("c", json.RawMessage(`{"bad":true}`)); err == nil {
			t.Fatal("a refused configuration passed")
		}
	}
	if got := n.Load(); got != 3 {
		t.Errorf("a configuration refused twice: %d checks in all, want 3", got)
	}
	t.Setenv("COREGATE_CHECKED_ONCE", "x")
	for range 2 {
		if err := r.Check("c", json.RawMessage(`{"v":"$env://COREGATE_CHECKED_ONCE"}`)); err != nil {
			t.Fatal(err)
		}
	}
	if got := n.Load(); got != 5 {
		t.Errorf("a configuration with a reference checked twice: %d checks in all, want 5", got)
	}
	// Without a consumer schema, CheckConsumer is Check: passed already.
	if err := r.CheckConsumer("c", json.RawMessage(`{"v":1}`)); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 5 {
		t.Errorf("after CheckConsumer: %d checks in all, want 5", got)
	}
}

// TestBuildChecked: a build marked checked does not check a configuration
// without a reference, which it builds as written, even one this registry
// would refuse (the mark says a registry like it passed it); one with a
// reference is checked and refused as ever.
func TestBuildChecked(t *testing.T) {
	r, n := countingRegistry(`{"type":"object"}`)
	if _, err := r.BuildPhasesChecked(map[string]json.RawMessage{"c": json.RawMessage(`{"v":2}`)}, Env{}, true); err != nil {
		t.Fatal(err)
	}
	if got := n.Load(); got != 0 {
		t.Errorf("checked build: %d checks, want 0", got)
	}
	_, err := r.BuildPhasesChecked(map[string]json.RawMessage{"c": json.RawMessage(`{"v":"$env://COREGATE_UNSET_FOR_TEST"}`)}, Env{}, true)
	if err == nil {
		t.Error("a reference that does not resolve was built")
	}
	if _, err := r.BuildPhasesChecked(map[string]json.RawMessage{"nope": json.RawMessage(`{}`)}, Env{}, true); err == nil {
		t.Error("an unknown plugin was built")
	}
}

// TestFingerprint: registries of the same plugins and schemas have one
// fingerprint, which only theirs Trusts; another schema gives another.
func TestFingerprint(t *testing.T) {
	a, _ := countingRegistry(`{"type":"object"}`)
	b, _ := countingRegistry(`{"type":"object"}`)
	c, _ := countingRegistry(`{"type":"object","required":["v"]}`)
	if a.Fingerprint() != b.Fingerprint() {
		t.Error("two registries of the same plugins differ")
	}
	if a.Fingerprint() == c.Fingerprint() {
		t.Error("another schema, the same fingerprint")
	}
	if !a.Trusts(b.Fingerprint()) || a.Trusts(c.Fingerprint()) || a.Trusts([32]byte{}) {
		t.Error("Trusts")
	}
	before := a.Fingerprint()
	a.table["d"] = &Entry{Name: "d"}
	a.Register("d", limitLike{})
	if a.Fingerprint() == before {
		t.Error("a plugin registered since, the same fingerprint")
	}
}
