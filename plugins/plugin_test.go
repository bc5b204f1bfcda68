package plugins

import (
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// fake is a test plugin: it refuses a configuration with a "bad" member and
// records each Build.
type fake struct{ builds *int }

type fakeInstance struct{ conf string }

func (f fake) Schema() []byte { return []byte(`{"type":"object"}`) }

func (f fake) Check(raw json.RawMessage) error {
	var m map[string]any
	if err := json.Unmarshal(raw, &m); err != nil {
		return err
	}
	if _, bad := m["bad"]; bad {
		return fmt.Errorf("property \"bad\" is not allowed")
	}
	return nil
}

func (f fake) Build(raw json.RawMessage, _ Env) (Instance, error) {
	if f.builds != nil {
		*f.builds++
	}
	return &fakeInstance{conf: string(raw)}, nil
}

var testTable = []Entry{{"test-auth", 2500}, {"test-limit", 1002}, {"test-b", 500}, {"test-a", 500}, {"test-unregistered", 1}}

func testRegistry() *Registry {
	r := NewRegistry(testTable)
	for _, n := range []string{"test-auth", "test-limit", "test-b", "test-a"} {
		r.Register(n, fake{})
	}
	return r
}

func TestBuildOrder(t *testing.T) {
	got, err := testRegistry().Build(map[string]json.RawMessage{
		"test-a": json.RawMessage(`{}`), "test-limit": json.RawMessage(`{"count":1}`),
		"test-b": json.RawMessage(`{}`), "test-auth": json.RawMessage(`{}`),
	}, NewLocalEnv())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, c := range got {
		names = append(names, c.Name)
	}
	// Priority first, name breaks ties; the route's order never matters.
	if d := cmp.Diff([]string{"test-auth", "test-limit", "test-a", "test-b"}, names); d != "" {
		t.Fatalf("order (-want +got):\n%s", d)
	}
	if got[1].Instance.(*fakeInstance).conf != `{"count":1}` || got[1].Priority != 1002 {
		t.Fatalf("instance built from the wrong config: %+v", got[1])
	}
}

func TestBuildErrors(t *testing.T) {
	r := testRegistry()
	_, err := r.Build(map[string]json.RawMessage{"no-such": json.RawMessage(`{}`)}, NewLocalEnv())
	if !errors.Is(err, ErrUnknown) || err.Error() != "unknown plugin [no-such]" {
		t.Fatalf("unknown plugin: %v", err)
	}
	// In the table but not implemented: unknown too, as a plugin APISIX
	// has not enabled.
	_, err = r.Build(map[string]json.RawMessage{"test-unregistered": json.RawMessage(`{}`)}, NewLocalEnv())
	if !errors.Is(err, ErrUnknown) || err.Error() != "unknown plugin [test-unregistered]" {
		t.Fatalf("unregistered plugin: %v", err)
	}
	_, err = r.Build(map[string]json.RawMessage{"test-a": json.RawMessage(`{"bad":1}`)}, NewLocalEnv())
	if err == nil || err.Error() != `failed to check the configuration of plugin test-a err: property "bad" is not allowed` {
		t.Fatalf("bad config: %v", err)
	}
	if got, err := r.Build(nil, NewLocalEnv()); err != nil || len(got) != 0 {
		t.Fatalf("no plugins: %v %v", got, err)
	}
}

// TestCheckIsPure: Check answers with APISIX's messages and builds
// nothing.
func TestCheckIsPure(t *testing.T) {
	builds := 0
	r := NewRegistry(testTable)
	r.Register("test-a", fake{builds: &builds})
	if err := r.Check("test-a", json.RawMessage(`{}`)); err != nil {
		t.Fatal(err)
	}
	if err := r.Check("test-a", json.RawMessage(`{"bad":true}`)); err == nil ||
		err.Error() != `failed to check the configuration of plugin test-a err: property "bad" is not allowed` {
		t.Fatalf("bad config: %v", err)
	}
	if err := r.Check("nope", json.RawMessage(`{}`)); !errors.Is(err, ErrUnknown) || err.Error() != "unknown plugin [nope]" {
		t.Fatalf("unknown: %v", err)
	}
	if builds != 0 {
		t.Fatalf("Check built %d instances", builds)
	}
	if _, err := r.Build(map[string]json.RawMessage{"test-a": json.RawMessage(`{"bad":1}`)}, NewLocalEnv()); err == nil || builds != 0 {
		t.Fatalf("Build did not check before building: %v, %d builds", err, builds)
	}
}

// limitLike has a schema as a limit plugin's, and nothing more to check.
type limitLike struct{}

func (limitLike) Schema() []byte {
	return []byte(`{"type":"object","properties":{"count":{"type":"integer","exclusiveMinimum":0}},"required":["count"]}`)
}
func (limitLike) Check(json.RawMessage) error { return nil }
func (limitLike) Build(raw json.RawMessage, _ Env) (Instance, error) {
	return &fakeInstance{conf: string(raw)}, nil
}

// TestSchema: a plugin's schema is compiled when first used, refuses with
// APISIX's messages before the plugin's own Check, and is there to show.
func TestSchema(t *testing.T) {
	r := NewRegistry(testTable)
	r.Register("test-limit", limitLike{})
	for _, tc := range []struct{ conf, want string }{
		{`{"count":3}`, ""},
		{`{}`, `failed to check the configuration of plugin test-limit err: property "count" is required`},
		{`{"count":0}`, `failed to check the configuration of plugin test-limit err: property "count" validation failed: expected 0 to be greater than 0`},
		{`{"count":"3"}`, `failed to check the configuration of plugin test-limit err: property "count" validation failed: wrong type: expected integer, got string`},
	} {
		err := r.Check("test-limit", json.RawMessage(tc.conf))
		if got := errString(err); got != tc.want {
			t.Errorf("Check(%s) = %q, want %q", tc.conf, got, tc.want)
		}
	}
	doc, ok := r.Schema("test-limit")
	if !ok || !json.Valid(doc) || !strings.Contains(string(doc), `"exclusiveMinimum"`) {
		t.Fatalf("Schema: %s, %v", doc, ok)
	}
	if _, ok := r.Schema("test-a"); ok {
		t.Fatal("Schema of an unregistered plugin")
	}
}

// TestBadSchema: a schema that does not compile is an error of Compile
// naming the plugin, and of every check of the plugin's configuration;
// the plugin shows no schema.
func TestBadSchema(t *testing.T) {
	r := NewRegistry(testTable)
	r.Register("test-limit", badSchema{})
	r.Register("test-a", fake{})
	if err := r.Compile(); err == nil || !strings.Contains(err.Error(), "test-limit: schema") {
		t.Fatalf("Compile: %v, want the schema of test-limit refused", err)
	}
	if err := r.Check("test-limit", json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "test-limit") {
		t.Errorf("Check: %v, want an error naming test-limit", err)
	}
	if err := r.CheckMetadata("test-limit", json.RawMessage(`{}`)); err == nil {
		t.Error("CheckMetadata: nil")
	}
	if _, ok := r.Schema("test-limit"); ok {
		t.Error("Schema of a plugin whose schema does not compile")
	}
	if err := r.Check("test-a", json.RawMessage(`{}`)); err != nil {
		t.Errorf("Check of the other plugin: %v", err)
	}
}

type badSchema struct{ limitLike }

func (badSchema) Schema() []byte { return []byte(`{"type":"no-such-type"}`) }

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRegisterTwicePanics(t *testing.T) {
	r := testRegistry()
	defer func() {
		if r := recover(); r == nil {
			t.Fatal("registering a name twice did not panic")
		}
	}()
	r.Register("test-a", fake{})
}

func TestRegisterOutsideTheTablePanics(t *testing.T) {
	defer func() {
		err, _ := recover().(error)
		if !errors.Is(err, ErrNotInTable) {
			t.Fatalf("registering a name outside the table: %v", err)
		}
	}()
	NewRegistry(testTable).Register("not-in-table", fake{})
}

func TestNames(t *testing.T) {
	if d := cmp.Diff([]string{"test-a", "test-auth", "test-b", "test-limit"}, testRegistry().Names()); d != "" {
		t.Fatalf("names (-want +got):\n%s", d)
	}
}

// TestTable: the table is in execution order, each name and priority once,
// with APISIX's priorities.
func TestTable(t *testing.T) {
	names := map[string]int{}
	prios := map[int]string{}
	for i, e := range Table {
		if i > 0 && Table[i-1].Priority <= e.Priority {
			t.Errorf("%s (%d) after %s (%d): not in execution order", e.Name, e.Priority, Table[i-1].Name, Table[i-1].Priority)
		}
		if _, dup := names[e.Name]; dup {
			t.Errorf("%s twice", e.Name)
		}
		if other, dup := prios[e.Priority]; dup {
			t.Errorf("%s and %s share priority %d", e.Name, other, e.Priority)
		}
		names[e.Name], prios[e.Priority] = e.Priority, e.Name
	}
	for name, prio := range map[string]int{"key-auth": 2500, "limit-count": 1002, "prometheus": 500, "proxy-rewrite": 1008, "mocking": 10900} {
		if names[name] != prio {
			t.Errorf("%s: priority %d, APISIX's is %d", name, names[name], prio)
		}
	}
	if !sort.SliceIsSorted(Table, func(i, j int) bool { return Table[i].Priority > Table[j].Priority }) {
		t.Error("table not sorted")
	}
}

type phased struct{}

func (phased) Rewrite(Ctx)                               {}
func (phased) Access(Ctx)                                {}
func (phased) Log(Ctx)                                   {}
func (phased) BodyFilter(_ Ctx, b []byte, _ bool) []byte { return b }

type accessOnly struct{}

func (accessOnly) Access(Ctx) {}

type headerOnly struct{}

func (headerOnly) HeaderFilter(Ctx) {}
func (headerOnly) BeforeProxy(Ctx)  {}

// TestPhases: each phase's table holds the instances that run in it, in
// execution order.
func TestPhases(t *testing.T) {
	p := NewPhases([]Configured{
		{&Entry{"a", 3}, phased{}}, {&Entry{"b", 2}, accessOnly{}}, {&Entry{"c", 1}, headerOnly{}}, {&Entry{"d", 0}, struct{}{}},
	})
	got := map[string][]string{}
	for ph := Rewrite; ph < NumPhases; ph++ {
		got[ph.String()] = p.Names(ph)
	}
	want := map[string][]string{
		"rewrite": {"a"}, "access": {"a", "b"}, "before_proxy": {"c"},
		"header_filter": {"c"}, "body_filter": {"a"}, "log": {"a"},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("phases (-want +got):\n%s", d)
	}
	if len(p.Rewrite) != 1 || len(p.Access) != 2 || len(p.BeforeProxy) != 1 || len(p.HeaderFilter) != 1 ||
		len(p.BodyFilter) != 1 || len(p.Log) != 1 || len(p.Plugins) != 4 {
		t.Fatalf("tables: %+v", p)
	}
	if _, ok := p.Access[1].(accessOnly); !ok {
		t.Fatalf("access order: %+v", p.Access)
	}
}

type bodyReader int64

func (bodyReader) Rewrite(Ctx)        {}
func (b bodyReader) BodyLimit() int64 { return int64(b) }

// TestPhasesBodyLimit: the phases' BodyLimit is the largest of their
// BodyReaders', 0 without one, whose phases hold no reads at all.
func TestPhasesBodyLimit(t *testing.T) {
	if p := NewPhases([]Configured{{&Entry{"a", 3}, phased{}}}); p.BodyLimit() != 0 || p.reads != nil {
		t.Fatalf("no reader: %d, %v", p.BodyLimit(), p.reads)
	}
	p := NewPhases([]Configured{{&Entry{"a", 3}, bodyReader(10)}, {&Entry{"b", 2}, phased{}}, {&Entry{"c", 1}, bodyReader(64)}})
	if p.BodyLimit() != 64 || len(p.Rewrite) != 3 {
		t.Fatalf("BodyLimit %d, %d rewrite", p.BodyLimit(), len(p.Rewrite))
	}
}

type bodyTee int64

func (bodyTee) Log(Ctx)           {}
func (b bodyTee) TeeLimit() int64 { return int64(b) }

// TestPhasesTeeLimit: the phases' TeeLimit is the largest of their
// BodyTees', 0 without one, and apart from BodyLimit.
func TestPhasesTeeLimit(t *testing.T) {
	if p := NewPhases([]Configured{{&Entry{"a", 3}, bodyReader(10)}}); p.TeeLimit() != 0 {
		t.Fatalf("no tee: %d", p.TeeLimit())
	}
	p := NewPhases([]Configured{{&Entry{"a", 3}, bodyTee(5)}, {&Entry{"b", 2}, bodyReader(10)}, {&Entry{"c", 1}, bodyTee(1 << 20)}})
	if p.TeeLimit() != 1<<20 || p.BodyLimit() != 10 || len(p.Log) != 2 {
		t.Fatalf("TeeLimit %d, BodyLimit %d, %d log", p.TeeLimit(), p.BodyLimit(), len(p.Log))
	}
}

func TestCounterTable(t *testing.T) {
	c := NewCounterTable(2)
	a, _ := c.Counter([]byte("a"), 0, 10)
	a.Add(3)
	if got, _ := c.Counter([]byte("a"), 5, 20); got != a || got.Load() != 3 {
		t.Fatalf("same key, same window: %p %p %d", got, a, got.Load())
	}
	if got, _ := c.Counter([]byte("a"), 11, 20); got.Load() != 0 {
		t.Fatalf("expired counter not reset: %d", got.Load())
	}
	b, _ := c.Counter([]byte("b"), 11, 15)
	b.Add(1)
	if got, _ := c.Counter([]byte("c"), 12, 30); got != nil {
		t.Fatal("a full table made a counter")
	}
	// b expired at 15: its slot goes to c.
	if got, _ := c.Counter([]byte("c"), 16, 30); got == nil || got.Load() != 0 || c.Len() != 2 {
		t.Fatalf("expired counter not given up: %v, %d counters", got, c.Len())
	}
}

func TestMetricTable(t *testing.T) {
	m := NewMetricTable(2)
	m.Slot("http_status", "200", "1").Add(2)
	m.Slot("http_status", "200", "1").Add(1)
	m.Slot("http_status", "404", "1").Add(1)
	if m.Slot("http_status", "500", "1") != nil {
		t.Fatal("series over the bound")
	}
	if m.Value("http_status", "200", "1") != 3 || m.Value("http_status", "404", "1") != 1 || m.Value("http_status", "500", "1") != 0 {
		t.Fatal("values")
	}
	// Label values do not run into each other.
	if m.Value("http_status", "20", "01") != 0 {
		t.Fatal("series keys collide")
	}
}
