package standalone

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/admin/store"
	"coregate/admin/store/storesync"
	"coregate/plugins"
)

const storeFile = `routes:
  - id: 1
    uri: /one
    upstream_id: u
  - uri: /two
    upstream_id: u
upstreams:
  - id: u
    nodes:
      "127.0.0.1:1980": 1
consumers:
  - username: jack
    plugins:
      key-auth:
        key: k
  - id: jack/credentials/c1
    plugins:
      key-auth:
        key: k2
plugin_metadata:
  - id: prometheus
    disabled_labels: {}
#END
`

// logBuffer is a logger whose lines a test reads.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func newTestStore(t *testing.T, body string) (*Store, string, *logBuffer) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	writeFile(t, path, body)
	lb := &logBuffer{}
	return NewStore(StoreOptions{Path: path, Interval: pollEvery, Log: slog.New(slog.NewTextHandler(lb, nil))}), path, lb
}

func keys(kvs []store.KV) string {
	var ks []string
	for _, kv := range kvs {
		ks = append(ks, strings.TrimPrefix(kv.Key, "/apisix/"))
	}
	return strings.Join(ks, " ")
}

// TestStoreList: every item of the file is a key, in the file's order,
// an item without an id named arr_<n>; reading the same file again gives
// the same revision; writes are refused.
func TestStoreList(t *testing.T) {
	s, _, _ := newTestStore(t, storeFile)
	ctx := context.Background()
	kvs, rev, err := s.List(ctx, "/apisix/")
	if err != nil {
		t.Fatal(err)
	}
	want := "routes/1 routes/arr_2 upstreams/u consumers/jack consumers/jack/credentials/c1 plugin_metadata/prometheus"
	if got := keys(kvs); got != want || rev != 1 {
		t.Fatalf("List: %s at %d, want %s at 1", got, rev, want)
	}
	if v := string(kvs[1].Value); v != `{"upstream_id":"u","uri":"/two"}` && v != `{"uri":"/two","upstream_id":"u"}` {
		t.Errorf("routes/arr_2 = %s", v)
	}
	for i, kv := range kvs {
		if kv.CreateRevision != int64(i+1) || kv.ModRevision != 1 {
			t.Errorf("%s: create %d mod %d", kv.Key, kv.CreateRevision, kv.ModRevision)
		}
	}
	routes, rev2, err := s.List(ctx, "/apisix/routes/")
	if err != nil || keys(routes) != "routes/1 routes/arr_2" || rev2 != 1 {
		t.Errorf("List of routes: %s at %d, %v", keys(routes), rev2, err)
	}
	if kv, err := s.Get(ctx, "/apisix/upstreams/u"); err != nil || !strings.Contains(string(kv.Value), "127.0.0.1:1980") {
		t.Errorf("Get: %s, %v", kv.Value, err)
	}
	if _, err := s.Get(ctx, "/apisix/upstreams/nope"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get of a missing key: %v", err)
	}
	if got := s.Origin("/apisix/routes/arr_2"); got != "apisix.yaml: routes[1] (id arr_2)" {
		t.Errorf("Origin = %q", got)
	}
	if !s.ReadOnly() {
		t.Error("not ReadOnly")
	}
	if _, _, err := s.Put(ctx, "/apisix/routes/3", []byte(`{}`), store.PutOptions{}); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Put: %v", err)
	}
	if _, err := s.Delete(ctx, "/apisix/routes/1", 0); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("Delete: %v", err)
	}
	if _, err := s.GenID(ctx); !errors.Is(err, store.ErrReadOnly) {
		t.Errorf("GenID: %v", err)
	}
}

// TestStoreRefusesFile: a file that lacks #END or does not parse is
// refused as a whole, its keys kept as they were; an item that cannot be
// a key (not an object, an id used twice) is logged and left out.
func TestStoreRefusesFile(t *testing.T) {
	s, path, lb := newTestStore(t, storeFile)
	ctx := context.Background()
	if _, _, err := s.List(ctx, "/apisix/"); err != nil {
		t.Fatal(err)
	}
	writeFile(t, path, strings.TrimSuffix(storeFile, "#END\n"))
	if _, _, err := s.List(ctx, "/apisix/"); !errors.Is(err, ErrEndFlag) || err.Error() != "apisix.yaml: missing valid end flag" {
		t.Errorf("a file without #END: %v", err)
	}
	writeFile(t, path, "routes: [\n#END\n")
	if _, _, err := s.List(ctx, "/apisix/"); !errors.Is(err, ErrFormat) {
		t.Errorf("a file that does not parse: %v", err)
	}
	if _, err := s.Get(ctx, "/apisix/routes/1"); err != nil {
		t.Errorf("the keys of the last good read: %v", err)
	}
	writeFile(t, path, "routes:\n  - id: 1\n    uri: /a\n  - 7\n  - id: 1\n    uri: /b\n  - id: a/b\n    uri: /c\n#END\n")
	kvs, rev, err := s.List(ctx, "/apisix/")
	if err != nil || keys(kvs) != "routes/1" || rev != 2 {
		t.Fatalf("items left out: %s at %d, %v", keys(kvs), rev, err)
	}
	if string(kvs[0].Value) != `{"id":1,"uri":"/a"}` {
		t.Errorf("routes/1 = %s, want the first", kvs[0].Value)
	}
	log := lb.String()
	for _, want := range []string{`item=routes[1] err="want an object"`, `item="routes[2] (id 1)" err="duplicate id: routes/1 also names routes[0] (id 1)"`, `invalid id \"a/b\"`} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}
}

// TestStoreWatch: a change of the file is sent as the keys it puts and
// deletes, at a new revision; a file refused ends the watch with its
// error once it has settled; a watch from a revision the store has
// passed is compacted.
func TestStoreWatch(t *testing.T) {
	s, path, _ := newTestStore(t, storeFile)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_, rev, err := s.List(ctx, "/apisix/")
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, "/apisix/", rev+1)
	next := func() store.WatchResponse {
		t.Helper()
		select {
		case wr, ok := <-ch:
			if !ok {
				t.Fatal("watch closed")
			}
			return wr
		case <-time.After(waitFor):
			t.Fatal("no watch response")
		}
		return store.WatchResponse{}
	}
	changed := strings.Replace(storeFile, "uri: /one", "uri: /uno", 1)
	changed = strings.Replace(changed, "  - uri: /two\n    upstream_id: u\n", "", 1)
	writeFile(t, path, changed)
	wr := next()
	var got []string
	for _, ev := range wr.Events {
		got = append(got, map[store.EventType]string{store.EventPut: "put ", store.EventDelete: "delete "}[ev.Type]+strings.TrimPrefix(ev.KV.Key, "/apisix/"))
	}
	// Route 1 changed; the items after route arr_2 moved up, put again
	// (their place in the file is their CreateRevision).
	want := "put routes/1, put upstreams/u, put consumers/jack, put consumers/jack/credentials/c1, put plugin_metadata/prometheus, delete routes/arr_2"
	if strings.Join(got, ", ") != want || wr.Revision != rev+1 || wr.Err != nil {
		t.Fatalf("events %v at %d (%v), want %s at %d", got, wr.Revision, wr.Err, want, rev+1)
	}
	// A change that moves nothing puts what changed alone.
	writeFile(t, path, strings.Replace(changed, "key: k2", "key: k3", 1))
	if wr := next(); len(wr.Events) != 1 || wr.Events[0].KV.Key != "/apisix/consumers/jack/credentials/c1" || wr.Revision != rev+2 {
		t.Fatalf("one item changed: %+v", wr)
	}
	writeFile(t, path, strings.TrimSuffix(changed, "#END\n"))
	if wr := next(); !errors.Is(wr.Err, ErrEndFlag) {
		t.Fatalf("a file without #END: %+v", wr)
	}
	if _, ok := <-ch; ok {
		t.Fatal("the watch goes on after an error")
	}
	if wr := <-s.Watch(ctx, "/apisix/", rev+1); !errors.Is(wr.Err, store.ErrCompacted) {
		t.Errorf("a watch from a past revision: %+v", wr)
	}
}

// TestStoreSyncPolicy: the standalone file followed by storesync, as a
// node follows it, is under etcd's policy: an item that fails validation,
// or whose plugin configuration the registry refuses, or whose reference
// dangles, is left out (logged, naming the file and the item) and the rest
// served, marked checked; a file that lacks #END is refused as a whole
// and reported once, the previous configuration serving, until it is
// mended.
func TestStoreSyncPolicy(t *testing.T) {
	body := `routes:
  - id: 1
    uri: /one
    upstream:
      nodes:
        "127.0.0.1:1980": 1
  - id: bad
    uri: /bad
    foo: 1
  - id: bad-plugin
    uri: /p
    plugins:
      limit-count:
        count: -5
        time_window: 60
  - id: dangling
    uri: /d
    upstream_id: nope
#END
`
	s, path, lb := newTestStore(t, body)
	sy := storesync.New(storesync.Options{Store: s, Plugins: plugins.Default, Retry: pollEvery,
		Log: slog.New(slog.NewTextHandler(lb, nil))})
	sp, err := sy.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.Routes) != 1 || sp.Routes[0].ID.String() != "1" {
		t.Fatalf("routes %d, want route 1 alone", len(sp.Routes))
	}
	if sp.Checked != plugins.Default.Fingerprint() {
		t.Error("the Spec is not marked checked")
	}
	log := lb.String()
	for _, want := range []string{`item="apisix.yaml: routes[1] (id bad)"`, "additional properties forbidden, found foo",
		`item="apisix.yaml: routes[2] (id bad-plugin)"`, "failed to check the configuration of plugin limit-count",
		"route dangling: upstream_id nope not found"} {
		if !strings.Contains(log, want) {
			t.Errorf("log lacks %s:\n%s", want, log)
		}
	}

	ctx, cancel := context.WithCancel(context.Background())
	specs := make(chan *spec.Spec, 8)
	errs := make(chan error, 8)
	done := make(chan struct{})
	go func() {
		defer close(done)
		sy.Watch(ctx, func(sp *spec.Spec) { specs <- sp }, func(err error) { errs <- err })
	}()
	defer func() { cancel(); <-done }()

	writeFile(t, path, strings.TrimSuffix(body, "#END\n"))
	select {
	case err := <-errs:
		if !errors.Is(err, ErrEndFlag) || err.Error() != "apisix.yaml: missing valid end flag" {
			t.Errorf("reported %v", err)
		}
	case sp := <-specs:
		t.Fatalf("a file without #END was served: %d routes", len(sp.Routes))
	case <-time.After(waitFor):
		t.Fatal("a file without #END was not reported")
	}
	select {
	case err := <-errs:
		t.Errorf("reported twice: %v", err)
	case sp := <-specs:
		t.Fatalf("a file without #END was served: %d routes", len(sp.Routes))
	case <-time.After(quietFor):
	}
	writeFile(t, path, strings.Replace(body, "upstream_id: nope", "upstream:\n      nodes:\n        \"127.0.0.1:1981\": 1", 1))
	select {
	case sp := <-specs:
		if len(sp.Routes) != 2 {
			t.Errorf("mended: %d routes, want 1 and dangling", len(sp.Routes))
		}
	case <-time.After(waitFor):
		t.Fatal("the mended file was not served")
	}
}

// TestCheckFile: CheckFile reports every item a node would leave out,
// each naming the file and the item, and a file refused as a whole as
// that one error.
func TestCheckFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apisix.yaml")
	writeFile(t, path, `routes:
  - id: 1
    uri: /one
    upstream_id: nope
  - id: 2
    uri: /two
    foo: 1
  - id: 3
    uri: /three
    plugins:
      limit-count:
        count: -5
        time_window: 60
    upstream:
      nodes:
        "127.0.0.1:1980": 1
  - id: 4
    uri: /four
    upstream:
      nodes:
        "127.0.0.1:1980": 1
#END
`)
	err := CheckFile(path, plugins.Default)
	if err == nil {
		t.Fatal("no error")
	}
	lines := strings.Split(err.Error(), "\n")
	want := []string{
		"apisix.yaml: routes[1] (id 2): invalid configuration: additional properties forbidden, found foo",
		"apisix.yaml: routes (id 3): failed to check the configuration of plugin limit-count",
		"apisix.yaml: route 1: upstream_id nope not found",
	}
	if len(lines) != len(want) {
		t.Fatalf("%d problems, want %d:\n%v", len(lines), len(want), err)
	}
	for i, w := range want {
		if !strings.HasPrefix(lines[i], w) {
			t.Errorf("problem %d: %s\nwant %s…", i, lines[i], w)
		}
	}
	if !errors.Is(err, ErrInvalid) {
		t.Errorf("%v is not ErrInvalid", err)
	}
	writeFile(t, path, "routes: []\n")
	if err := CheckFile(path, plugins.Default); !errors.Is(err, ErrEndFlag) {
		t.Errorf("a file without #END: %v", err)
	}
	writeFile(t, path, "routes: []\n#END\n")
	if err := CheckFile(path, plugins.Default); err != nil {
		t.Errorf("a good file: %v", err)
	}
}

// TestStoreSyncGlobalRule: a global rule of the file that is invalid (a
// plugin the gateway does not have, an item that is not an object) is not
// left out as other items are: it refuses the file, naming the item, since
// every route would be served without it.
func TestStoreSyncGlobalRule(t *testing.T) {
	const routes = `routes:
  - id: 1
    uri: /one
    upstream:
      nodes:
        "127.0.0.1:1980": 1
`
	for name, rules := range map[string]string{
		"unknown plugin": "global_rules:\n  - id: g\n    plugins:\n      key-auth-typo: {}\n",
		"not an object":  "global_rules:\n  - [1]\n",
	} {
		t.Run(name, func(t *testing.T) {
			s, _, _ := newTestStore(t, routes+rules+"#END\n")
			sy := storesync.New(storesync.Options{Store: s, Plugins: plugins.Default, Retry: pollEvery,
				Log: slog.New(slog.NewTextHandler(io.Discard, nil))})
			sp, err := sy.Load()
			if err == nil || !strings.Contains(err.Error(), "global") || !strings.Contains(err.Error(), "refuses") {
				t.Fatalf("a file with an invalid global rule: %v (served %v)", err, sp)
			}
		})
	}
}
