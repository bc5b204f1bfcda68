package storesync

import (
	"github.com/google/go-cmp/cmp"

	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
	"coregate/plugins"
	_ "coregate/plugins/all"
)

// logWriter sends a Syncer's log to the test log until the test ends.
type logWriter struct {
	mu   sync.Mutex
	t    *testing.T
	done bool
}

func (w *logWriter) Write(b []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if !w.done {
		w.t.Log(strings.TrimSpace(string(b)))
	}
	return len(b), nil
}

func testLog(t *testing.T) *slog.Logger {
	w := &logWriter{t: t}
	t.Cleanup(func() { w.mu.Lock(); w.done = true; w.mu.Unlock() })
	return slog.New(slog.NewTextHandler(w, nil))
}

// env is an embedded etcd, a store on it and a Syncer following it.
type env struct {
	t     *testing.T
	dir   string
	etcd  *etcdstore.Embedded
	store *etcdstore.Store // the Syncer's
	admin *etcdstore.Store // another client, as the Admin API
	cache string
	specs chan *spec.Spec
	errs  chan error
}

func newEnv(t *testing.T) *env {
	e := &env{t: t, dir: filepath.Join(t.TempDir(), "etcd"), cache: filepath.Join(t.TempDir(), CacheFile)}
	e.start()
	e.store = e.newStore()
	e.admin = e.newStore()
	return e
}

func (e *env) start() {
	et, err := etcdstore.StartEmbedded(e.dir, etcdstore.EmbedOptions{LogLevel: "none"})
	if err != nil {
		e.t.Fatal(err)
	}
	e.etcd = et
	e.t.Cleanup(et.Stop)
}

func (e *env) newStore() *etcdstore.Store {
	s, err := etcdstore.New(etcdstore.Options{
		Endpoints: e.etcd.Endpoints,
		Timeout:   2 * time.Second,
		KeepAlive: 300 * time.Millisecond,
	})
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { s.Close() })
	return s
}

func (e *env) syncer() *Syncer {
	return New(Options{Store: e.store, CachePath: e.cache, Retry: 200 * time.Millisecond, Plugins: plugins.Default, Log: testLog(e.t)})
}

// watch runs s.Watch until the test ends.
func (e *env) watch(s *Syncer) {
	e.specs = make(chan *spec.Spec, 100)
	e.errs = make(chan error, 100)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx, func(sp *spec.Spec) { e.specs <- sp }, func(err error) { e.errs <- err })
	}()
	e.t.Cleanup(func() { cancel(); <-done })
}

// put writes through the other client, retrying while etcd comes back.
func (e *env) put(key, value string) store.KV {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		kv, _, err := e.admin.Put(context.Background(), "/apisix/"+key, []byte(value), store.PutOptions{})
		if err == nil {
			return kv
		}
		if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
			e.t.Fatal(err)
		}
	}
}

func (e *env) del(key string) {
	e.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for tries := 0; ; tries++ {
		_, err := e.admin.Delete(context.Background(), "/apisix/"+key, 0)
		if err == nil || tries > 0 && errors.Is(err, store.ErrNotFound) {
			return
		}
		if !errors.Is(err, store.ErrUnavailable) || time.Now().After(deadline) {
			e.t.Fatal(err)
		}
	}
}

// next waits for a Spec whose routes are want (ids in order), skipping
// intermediate ones, within a bound.
func (e *env) next(want string) *spec.Spec {
	e.t.Helper()
	deadline := time.After(30 * time.Second)
	last := "none"
	for {
		select {
		case sp := <-e.specs:
			if last = routeIDs(sp); last == want {
				return sp
			}
		case <-deadline:
			e.t.Fatalf("no Spec with routes %s within 30 s (last %s)", want, last)
		}
	}
}

func routeIDs(sp *spec.Spec) string {
	ids := make([]string, len(sp.Routes))
	for i, r := range sp.Routes {
		ids[i] = r.ID.String()
	}
	return "[" + strings.Join(ids, " ") + "]"
}

func route(uri string) string {
	return fmt.Sprintf(`{"uri":%q,"upstream":{"type":"roundrobin","nodes":{"127.0.0.1:1980":1}}}`, uri)
}

// TestLoadAndFollow: the first read decodes every kind and leaves out
// what is not a Spec's, and each change then arrives as a new Spec.
func TestLoadAndFollow(t *testing.T) {
	e := newEnv(t)
	e.put("upstreams/u1", `{"id":"u1","nodes":{"127.0.0.1:1980":1},"type":"roundrobin"}`)
	e.put("routes/2", route("/two"))
	e.put("routes/1", `{"id":"1","uri":"/one","upstream_id":"u1"}`)
	e.put("services/s1", `{"upstream_id":"u1"}`)
	e.put("consumers/jack", `{"username":"jack","plugins":{}}`)
	e.put("plugin_configs/p1", `{"plugins":{}}`)
	e.put("global_rules/g1", `{"id":"g1","plugins":{}}`)
	e.put("ssls/1", `{"cert":"x"}`)             // not served yet: ignored
	e.put("routes/", "init_dir")                // APISIX's directory placeholder
	e.put("consumers/jack/credentials/c", `{}`) // a credential (TestCredentials)
	if _, err := e.admin.GenID(context.Background()); err != nil {
		t.Fatal(err)
	}
	s := e.syncer()
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := routeIDs(sp); got != "[2 1]" {
		t.Fatalf("routes %s, want [2 1] (creation order)", got)
	}
	if len(sp.Upstreams) != 1 || len(sp.Services) != 1 || sp.Services[0].ID.String() != "s1" ||
		len(sp.Consumers) != 1 || len(sp.PluginConfigs) != 1 || len(sp.GlobalRules) != 1 {
		t.Fatalf("Spec: %+v", sp)
	}
	if id := sp.PluginConfigs[0].ID; id.String() != "p1" {
		t.Fatalf("plugin config id %q, want p1 from its key", id)
	}
	if sp.Hash == ([32]byte{}) || !s.Reachable() || s.Revision() == 0 {
		t.Fatalf("after Load: hash %x reachable %v revision %d", sp.Hash, s.Reachable(), s.Revision())
	}

	e.watch(s)
	e.put("routes/3", route("/three"))
	got := e.next("[2 1 3]")
	if got.Routes[2].URI != "/three" {
		t.Fatalf("route 3: %+v", got.Routes[2])
	}
	e.put("routes/2", route("/two-b")) // a rewrite keeps its place
	if got := e.next("[2 1 3]"); got.Routes[0].URI != "/two-b" {
		t.Fatalf("route 2 after its rewrite: %q", got.Routes[0].URI)
	}
	e.del("routes/1")
	e.next("[2 3]")

	// An invalid object is left out, the rest is served.
	e.put("routes/bad", `{"uri":5}`)
	e.put("routes/4", route("/four"))
	e.next("[2 3 4]")
	// A route whose upstream is gone is left out, not the whole Spec.
	e.put("routes/5", `{"uri":"/five","upstream_id":"nope"}`)
	e.put("routes/6", route("/six"))
	e.next("[2 3 4 6]")
	// The local copy follows (written just after the Spec is handed on).
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := ReadCache(e.cache)
		if err != nil {
			t.Fatal(err)
		}
		if routeIDs(c) == "[2 3 4 6]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("local copy holds %s", routeIDs(c))
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestCredentials: a consumer's credentials are in the Spec, with the id
// "<username>/credentials/<id>" whatever id they were stored with, and go
// with their key.
func TestCredentials(t *testing.T) {
	e := newEnv(t)
	e.put("consumers/jack", `{"username":"jack","plugins":{"key-auth":{"key":"k0"}}}`)
	e.put("consumers/jack/credentials/c1", `{"id":"c1","plugins":{"key-auth":{"key":"k1"}}}`)
	e.put("consumers/jack/credentials/c2", `{"plugins":{"key-auth":{"key":"k2"}}}`)
	e.put("consumers/jack/credentials/bad", `[1]`) // not an object: left out
	e.put("routes/1", route("/one"))
	s := e.syncer()
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, raw := range sp.Credentials {
		got = append(got, string(raw))
	}
	want := []string{
		`{"id":"jack/credentials/c1","plugins":{"key-auth":{"key":"k1"}}}`,
		`{"id":"jack/credentials/c2","plugins":{"key-auth":{"key":"k2"}}}`,
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("credentials:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	e.watch(s)
	e.del("consumers/jack/credentials/c1")
	e.put("routes/2", route("/two"))
	if sp := e.next("[1 2]"); len(sp.Credentials) != 1 || spec.RawID(sp.Credentials[0], "id").String() != "jack/credentials/c2" {
		t.Fatalf("after a delete: %s", sp.Credentials)
	}
}

// TestPluginMetadata: plugin_metadata/<plugin> is in the Spec with the
// plugin's name as id, whatever id it was stored with, and goes with its
// key.
func TestPluginMetadata(t *testing.T) {
	e := newEnv(t)
	e.put("plugin_metadata/prometheus", `{"id":"x","disabled_labels":{"http_status":["node"]}}`)
	e.put("plugin_metadata/bad", `[1]`) // not an object: left out
	e.put("routes/1", route("/one"))
	s := e.syncer()
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.PluginMetadata) != 1 || string(sp.PluginMetadata[0]) != `{"disabled_labels":{"http_status":["node"]},"id":"prometheus"}` {
		t.Fatalf("plugin metadata: %s", sp.PluginMetadata)
	}
	e.watch(s)
	e.del("plugin_metadata/prometheus")
	e.put("routes/2", route("/two"))
	if sp := e.next("[1 2]"); len(sp.PluginMetadata) != 0 {
		t.Fatalf("after a delete: %s", sp.PluginMetadata)
	}
}

// TestPluginsChecked: an object whose plugins the Admin API would refuse
// (an unknown plugin, a configuration its schema refuses, a consumer's
// key-auth without a key, plugin metadata its schema refuses, a consumer
// in a consumer group, a credential of a plugin that does not
// authenticate), written
// to the store by other means, is left out; the rest is served, and the
// object is served once it is mended. (A global rule is not left out:
// TestGlobalRuleInvalidRefuses.)
func TestPluginsChecked(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	e.put("routes/bad-conf", `{"uri":"/b","plugins":{"limit-count":{"count":-5,"time_window":60}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
	e.put("routes/unknown", `{"uri":"/u","plugins":{"no-such-plugin":{}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
	e.put("routes/2", `{"uri":"/two","plugins":{"limit-count":{"count":5,"time_window":60}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
	e.put("services/s-bad", `{"plugins":{"proxy-rewrite":{"uri":5}}}`)
	e.put("consumers/jack", `{"username":"jack","plugins":{"key-auth":{"key":"k"}}}`)
	e.put("consumers/jill", `{"username":"jill","plugins":{"key-auth":{}}}`)
	e.put("consumers/jack/credentials/bad", `{"plugins":{"key-auth":{"key":7}}}`)
	e.put("consumers/jack/credentials/good", `{"plugins":{"key-auth":{"key":"k2"}}}`)
	e.put("consumers/jack/credentials/limit", `{"plugins":{"limit-count":{"count":5,"time_window":60}}}`)
	e.put("consumers/grouped", `{"username":"grouped","group_id":"g1","plugins":{"key-auth":{"key":"k3"}}}`)
	e.put("plugin_configs/p-bad", `{"plugins":{"no-such-plugin":{}}}`)
	e.put("plugin_metadata/prometheus", `{"disabled_labels":{"http_status":["node"]}}`)
	e.put("plugin_metadata/no-such-plugin", `{"a":1}`)
	s := e.syncer()
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := routeIDs(sp); got != "[1 2]" {
		t.Errorf("routes %s, want [1 2]", got)
	}
	if len(sp.Services) != 0 || len(sp.Consumers) != 1 || len(sp.Credentials) != 1 || len(sp.GlobalRules) != 0 ||
		len(sp.PluginConfigs) != 0 || len(sp.PluginMetadata) != 1 {
		t.Errorf("services %d, consumers %+v, credentials %s, global rules %+v, plugin configs %+v, plugin metadata %s",
			len(sp.Services), sp.Consumers, sp.Credentials, sp.GlobalRules, sp.PluginConfigs, sp.PluginMetadata)
	}
	// What is served passed the registry: the workers need not check it
	// again.
	if sp.Checked != plugins.Default.Fingerprint() {
		t.Errorf("Spec marked %x, want the registry's fingerprint", sp.Checked)
	}
	e.watch(s)
	e.put("routes/bad-conf", `{"uri":"/b","plugins":{"limit-count":{"count":5,"time_window":60}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
	if sp := e.next("[1 bad-conf 2]"); sp.Checked != plugins.Default.Fingerprint() {
		t.Errorf("Spec marked %x after a change, want the registry's fingerprint", sp.Checked)
	}
	// A Syncer without a registry checks no plugin, and marks nothing.
	unchecked, err := New(Options{Store: e.newStore(), Log: testLog(t)}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if unchecked.Checked != ([32]byte{}) {
		t.Errorf("a Syncer without a registry marked its Spec %x", unchecked.Checked)
	}
}

// TestPluginRefsChecked: an object whose plugin configuration holds a
// reference this process cannot resolve ($env:// of a variable that is
// not set, $secret://), or a key-auth key that is empty, written to the
// store by other means (or before the node lost the variable), is left
// out; one whose reference resolves is served, as stored: the Spec holds
// the reference, not its value.
func TestPluginRefsChecked(t *testing.T) {
	t.Setenv("COREGATE_SYNC_TEST_KEY", "sync-secret")
	t.Setenv("COREGATE_SYNC_TEST_UNSET", "")
	if err := os.Unsetenv("COREGATE_SYNC_TEST_UNSET"); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	up := `"upstream":{"nodes":{"127.0.0.1:1980":1}}`
	e.put("routes/1", `{"uri":"/one","plugins":{"proxy-rewrite":{"headers":{"set":{"X-K":"$env://COREGATE_SYNC_TEST_KEY"}}}},`+up+`}`)
	e.put("routes/unset", `{"uri":"/u","plugins":{"proxy-rewrite":{"headers":{"set":{"X-K":"$env://COREGATE_SYNC_TEST_UNSET"}}}},`+up+`}`)
	e.put("consumers/jack", `{"username":"jack","plugins":{"key-auth":{"key":"$env://COREGATE_SYNC_TEST_KEY"}}}`)
	e.put("consumers/bob", `{"username":"bob","plugins":{"key-auth":{"key":"$env://COREGATE_SYNC_TEST_UNSET"}}}`)
	e.put("consumers/ann", `{"username":"ann","plugins":{"key-auth":{"key":""}}}`)
	e.put("consumers/jack/credentials/s", `{"plugins":{"key-auth":{"key":"$secret://vault/1/jack"}}}`)
	sp, err := e.syncer().Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := routeIDs(sp); got != "[1]" {
		t.Errorf("routes %s, want [1]", got)
	}
	if len(sp.Consumers) != 1 || string(sp.Consumers[0].Plugins["key-auth"]) != `{"key":"$env://COREGATE_SYNC_TEST_KEY"}` || len(sp.Credentials) != 0 {
		t.Errorf("consumers %+v, credentials %s, want jack's as stored", sp.Consumers, sp.Credentials)
	}
	b, err := json.Marshal(sp)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), "$env://COREGATE_SYNC_TEST_KEY") || strings.Contains(string(b), "sync-secret") {
		t.Errorf("the Spec holds a resolved value, or not the reference: %s", b)
	}
}

// TestGlobalRuleUnresolvedRefuses: a global rule whose reference this
// process cannot resolve is not left out, as other objects are (every
// route would be served without it, its authentication among them): it
// refuses the configuration, naming the rule, and the one before keeps
// serving; mended, it is served.
func TestGlobalRuleUnresolvedRefuses(t *testing.T) {
	t.Setenv("COREGATE_SYNC_TEST_UNSET", "")
	if err := os.Unsetenv("COREGATE_SYNC_TEST_UNSET"); err != nil {
		t.Fatal(err)
	}
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	e.put("global_rules/g", `{"plugins":{"proxy-rewrite":{"headers":{"set":{"X-K":"$env://COREGATE_SYNC_TEST_UNSET"}}}}}`)
	s := e.syncer()
	if _, err := s.Load(); err == nil || !strings.Contains(err.Error(), "global rule g refuses the configuration") {
		t.Fatalf("Load with a global rule that does not resolve: %v", err)
	}
	e.put("global_rules/g", `{"plugins":{"proxy-rewrite":{"headers":{"set":{"X-K":"fixed"}}}}}`)
	sp, err := s.Load()
	if err != nil || len(sp.GlobalRules) != 1 {
		t.Fatalf("mended: %v, global rules %+v", err, sp.GlobalRules)
	}
	e.watch(s)
	e.put("global_rules/g", `{"plugins":{"proxy-rewrite":{"headers":{"set":{"X-K":"$env://COREGATE_SYNC_TEST_UNSET"}}}}}`)
	select {
	case err := <-e.errs:
		if !strings.Contains(err.Error(), "global rule g") {
			t.Errorf("refusal %v, want it to name the global rule", err)
		}
	case sp := <-e.specs:
		t.Fatalf("a configuration without the global rule was published: %+v", sp.GlobalRules)
	case <-time.After(30 * time.Second):
		t.Fatal("no refusal within 30 s")
	}
	e.put("routes/2", route("/two"))
	select {
	case err := <-e.errs:
		if !strings.Contains(err.Error(), "global rule g") {
			t.Errorf("refusal %v", err)
		}
	case sp := <-e.specs:
		t.Fatalf("published while the global rule does not resolve: routes %s", routeIDs(sp))
	case <-time.After(30 * time.Second):
		t.Fatal("no refusal within 30 s")
	}
}

// TestCoalesce: a burst of changes ends in a Spec holding all of them.
func TestCoalesce(t *testing.T) {
	e := newEnv(t)
	s := e.syncer()
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	e.watch(s)
	// 50 puts from one client, back to back.
	var want []string
	for i := range 50 {
		e.put(fmt.Sprintf("routes/r%02d", i), route(fmt.Sprintf("/r%d", i)))
		want = append(want, fmt.Sprintf("r%02d", i))
	}
	e.next("[" + strings.Join(want, " ") + "]")
}

// TestLoneChangeNotDelayed: a change after a quiet time is published at
// once, not after Coalesce; the changes that follow it closer than
// Coalesce wait for it to pass.
func TestLoneChangeNotDelayed(t *testing.T) {
	e := newEnv(t)
	s := New(Options{Store: e.store, CachePath: e.cache, Coalesce: time.Hour, Retry: 200 * time.Millisecond, Log: testLog(t)})
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	e.watch(s)
	e.put("routes/1", route("/one"))
	e.next("[1]") // within the 30 s of next: it did not wait the hour
	e.put("routes/2", route("/two"))
	select {
	case sp := <-e.specs:
		t.Fatalf("a change 1 h of coalescing apart from the last was published: %s", routeIDs(sp))
	case <-time.After(500 * time.Millisecond):
	}
}

// TestWindowOfCPUTime: the coalescing window after a publication is made
// of the CPU time it took, not of its wall clock: a publication that
// waited 300 ms without using the CPU (here, its onChange; on a busy
// machine, for the CPU) does not hold the next change back ten times
// that. Before, the change below waited 3 s.
func TestWindowOfCPUTime(t *testing.T) {
	e := newEnv(t)
	s := New(Options{Store: e.store, CachePath: e.cache, Retry: 200 * time.Millisecond, Log: testLog(t)})
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	specs := make(chan *spec.Spec, 10)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.Watch(ctx, func(sp *spec.Spec) {
			time.Sleep(300 * time.Millisecond)
			specs <- sp
		}, func(error) {})
	}()
	t.Cleanup(func() { cancel(); <-done })
	next := func(want string) time.Time {
		t.Helper()
		for deadline := time.After(30 * time.Second); ; {
			select {
			case sp := <-specs:
				if routeIDs(sp) == want {
					return time.Now()
				}
			case <-deadline:
				t.Fatalf("no Spec with routes %s within 30 s", want)
			}
		}
	}
	e.put("routes/1", route("/one"))
	next("[1]")
	start := time.Now()
	e.put("routes/2", route("/two"))
	// 300 ms in its onChange, and the put's own time
	if took := next("[1 2]").Sub(start); took > 2*time.Second {
		t.Fatalf("a change after a publication of 300 ms of wall clock and little CPU was published %v after its put", took)
	}
}

// TestCompactionResync: a watch resumed from a compacted revision starts
// over from a full read, which brings the changes made meanwhile.
func TestCompactionResync(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	s := e.syncer()
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	// Changes after the Load, then their history compacted: the watch
	// from the Load's revision cannot be served.
	e.put("routes/2", route("/two"))
	e.del("routes/1")
	kv := e.put("routes/3", route("/three"))
	if err := e.admin.Compact(context.Background(), kv.ModRevision); err != nil {
		t.Fatal(err)
	}
	e.watch(s)
	e.next("[2 3]")
	e.put("routes/4", route("/four"))
	e.next("[2 3 4]")
}

// TestEtcdRestart: etcd stopped and started again on the same directory
// and ports; the Syncer sees it gone, and the changes made before it
// reads again arrive.
func TestEtcdRestart(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	s := New(Options{Store: e.store, CachePath: e.cache, Retry: 3 * time.Second, Log: testLog(t)})
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	e.watch(s)
	e.put("routes/2", route("/two"))
	e.next("[1 2]")

	e.etcd.Stop()
	deadline := time.Now().Add(30 * time.Second)
	for s.Reachable() {
		if time.Now().After(deadline) {
			t.Fatal("Syncer still reports the store reachable 30 s after etcd stopped")
		}
		time.Sleep(50 * time.Millisecond)
	}
	e.start()
	// Made while the Syncer is not watching (it retries every 3 s).
	e.del("routes/1")
	e.put("routes/3", route("/three"))
	e.next("[2 3]")
	if !s.Reachable() {
		t.Fatal("Syncer reports the store unreachable after it came back")
	}
	e.put("routes/4", route("/four"))
	e.next("[2 3 4]")
}

// TestColdStartFromCache: with etcd unreachable at start, Load serves the
// local copy; once etcd answers, changes arrive.
func TestColdStartFromCache(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	e.put("routes/2", route("/two"))
	first, err := e.syncer().Load() // writes the local copy
	if err != nil {
		t.Fatal(err)
	}
	e.etcd.Stop()

	// A store that would wait 60 s: the copy is served after StartTimeout.
	slow, err := etcdstore.New(etcdstore.Options{Endpoints: e.etcd.Endpoints, Timeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	start := time.Now()
	cold, err := New(Options{Store: slow, CachePath: e.cache, StartTimeout: time.Second, Log: testLog(t)}).Load()
	if err != nil || cold.Hash != first.Hash {
		t.Fatalf("Load with etcd down, a local copy and a slow store: %v", err)
	}
	// The copy was not checked by this process: the workers check it.
	if cold.Checked != ([32]byte{}) {
		t.Errorf("the local copy is marked checked: %x", cold.Checked)
	}
	if d := time.Since(start); d > 20*time.Second {
		t.Fatalf("Load served the copy after %v, want about StartTimeout (1 s)", d)
	}

	s := e.syncer()
	sp, err := s.Load()
	if err != nil {
		t.Fatalf("Load with etcd down and a local copy: %v", err)
	}
	if routeIDs(sp) != "[1 2]" || sp.Hash != first.Hash {
		t.Fatalf("from the local copy: routes %s hash %x, want [1 2] %x", routeIDs(sp), sp.Hash, first.Hash)
	}
	if s.Reachable() {
		t.Fatal("Reachable with etcd down")
	}
	e.watch(s)
	e.start()
	e.put("routes/3", route("/three"))
	e.next("[1 2 3]")

	// Without a local copy, Load with etcd down fails.
	e.etcd.Stop()
	bare := New(Options{Store: e.newStore(), CachePath: filepath.Join(t.TempDir(), CacheFile), Log: testLog(t)})
	if _, err := bare.Load(); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Load with etcd down and no copy: %v, want ErrUnavailable", err)
	}
}

// TestLoadKeepsSameCopy: a Load on a store that has not changed since
// the local copy was written leaves the copy as it is; one after a change
// writes it again, and a node started then serves the new copy.
func TestLoadKeepsSameCopy(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	if _, err := e.syncer().Load(); err != nil {
		t.Fatal(err)
	}
	written := func() string {
		t.Helper()
		c, err := readCache(e.cache)
		if err != nil {
			t.Fatal(err)
		}
		return c.Written.String()
	}
	first := written()
	sp, err := e.syncer().Load()
	if err != nil {
		t.Fatal(err)
	}
	if w := written(); w != first {
		t.Errorf("the copy was written again (%s, first %s) by a Load of the same store revision", w, first)
	}
	e.put("routes/2", route("/two"))
	next, err := e.syncer().Load()
	if err != nil {
		t.Fatal(err)
	}
	if w := written(); w == first {
		t.Error("the copy was not written again after a change")
	}
	c, err := readCache(e.cache)
	if err != nil || c.Spec.Hash != next.Hash || c.Spec.Hash == sp.Hash {
		t.Fatalf("the copy after a change: %v, hash %x, want %x", err, c.Spec.Hash, next.Hash)
	}
}

// TestModifyIndexes: the modify index of each resource is the highest
// ModRevision of its objects, ssls included though they are not served,
// and a deletion moves prev_index.
func TestModifyIndexes(t *testing.T) {
	e := newEnv(t)
	r1 := e.put("routes/1", route("/one"))
	s := e.syncer()
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	e.watch(s)
	r2 := e.put("routes/2", route("/two"))
	ssl := e.put("ssls/1", `{"cert":"x","key":"y","snis":["a.com"]}`)
	u := e.put("upstreams/u", `{"nodes":{"127.0.0.1:80":1}}`)
	e.next("[1 2]")
	want := map[string]int64{
		"consumers": 0, "global_rules": 0, "protos": 0, "routes": r2.ModRevision, "services": 0,
		"ssls": ssl.ModRevision, "stream_routes": 0, "upstreams": u.ModRevision,
		"max_modify_index": u.ModRevision, "prev_index": u.ModRevision, "x_etcd_index": u.ModRevision,
	}
	deadline := time.Now().Add(30 * time.Second)
	for !cmp.Equal(s.ModifyIndexes(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("ModifyIndexes (-want +got):\n%s", cmp.Diff(want, s.ModifyIndexes()))
		}
		time.Sleep(20 * time.Millisecond)
	}
	if r1.ModRevision >= r2.ModRevision {
		t.Fatalf("revisions %d, %d", r1.ModRevision, r2.ModRevision)
	}
	e.del("routes/2")
	e.next("[1]")
	deadline = time.Now().Add(30 * time.Second)
	for {
		got := s.ModifyIndexes()
		if got["routes"] == r1.ModRevision && got["prev_index"] > u.ModRevision && got["max_modify_index"] == u.ModRevision {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after deleting routes/2: %v", got)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// rebuild stops the embedded etcd, removes its member directory, as a
// disk lost or a careless cleanup would, and starts it again: an empty
// store, of another cluster, on the same ports.
func (e *env) rebuild() {
	e.t.Helper()
	e.etcd.Stop()
	if err := os.RemoveAll(filepath.Join(e.dir, "member")); err != nil {
		e.t.Fatal(err)
	}
	e.start()
}

// refusal waits until s refuses its store as reset, and returns why.
func refusal(t *testing.T, s *Syncer) *ResetError {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		var re *ResetError
		if errors.As(s.Refusal(), &re) {
			return re
		}
		if time.Now().After(deadline) {
			t.Fatalf("Refusal %v 30 s on, want a ResetError", s.Refusal())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// quiet fails the test if a Spec is handed on within d.
func (e *env) quiet(d time.Duration) {
	e.t.Helper()
	select {
	case sp := <-e.specs:
		e.t.Fatalf("Spec with routes %s handed on from a refused store", routeIDs(sp))
	case <-time.After(d):
	}
}

// TestStoreResetAtStart: a node whose etcd lost its data starts from its
// local copy, not from the empty store (which would serve no route and
// overwrite the copy); the copy keeps its revision and cluster; the
// refusal names both origins; nothing written into the reset store is
// followed. Once the store holds the copy's configuration again it is
// followed. (Before, Load returned the empty store's Spec and wrote it
// over the copy.)
func TestStoreResetAtStart(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	e.put("routes/2", route("/two"))
	first := e.syncer()
	select {
	case <-first.FirstRead():
		t.Fatal("FirstRead closed before the first read")
	default:
	}
	if err := first.Refusal(); !errors.Is(err, ErrNotRead) {
		t.Fatalf("Refusal before the first read: %v, want ErrNotRead", err)
	}
	if _, err := first.Load(); err != nil {
		t.Fatal(err)
	}
	<-first.FirstRead()
	if err := first.Refusal(); err != nil {
		t.Fatalf("Refusal after the first read: %v", err)
	}
	rev, cluster, err := CacheOrigin(e.cache)
	if err != nil || rev != first.Revision() || cluster == 0 || cluster != e.store.ClusterID() {
		t.Fatalf("local copy's origin: revision %d cluster %x (%v), want %d %x", rev, cluster, err, first.Revision(), e.store.ClusterID())
	}

	e.rebuild()
	s := e.syncer()
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if routeIDs(sp) != "[1 2]" {
		t.Fatalf("Load on a reset store served routes %s, want the local copy's [1 2]", routeIDs(sp))
	}
	<-s.FirstRead()
	re := refusal(t, s)
	if re.CopyRevision != rev || re.CopyCluster != cluster || re.StoreRevision >= rev ||
		re.StoreCluster == cluster || re.StoreCluster == 0 || re.CopyRoutes != 2 || re.StoreRoutes != 0 {
		t.Fatalf("refusal %+v, want the copy at %d of %x with 2 routes", re, rev, cluster)
	}
	if !s.Reachable() {
		t.Fatal("a reset store that answers is reported unreachable")
	}
	e.watch(s)
	e.put("routes/9", route("/nine"))
	e.quiet(2 * time.Second)
	if r, c, err := CacheOrigin(e.cache); err != nil || r != rev || c != cluster {
		t.Fatalf("local copy's origin after the refusal: %d %x (%v), want %d %x", r, c, err, rev, cluster)
	}

	// The copy's configuration put back (as from a backup): followed again.
	e.del("routes/9")
	e.put("routes/1", route("/one"))
	e.put("routes/2", route("/two"))
	deadline := time.Now().Add(30 * time.Second)
	for s.Refusal() != nil {
		if time.Now().After(deadline) {
			t.Fatalf("still refused 30 s after the store holds the copy's configuration: %v", s.Refusal())
		}
		time.Sleep(20 * time.Millisecond)
	}
	e.put("routes/3", route("/three"))
	e.next("[1 2 3]")
}

// TestStoreResetWhileFollowing: an etcd that comes back from an outage
// empty is refused too: the Syncer keeps the configuration it serves and
// its local copy.
func TestStoreResetWhileFollowing(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	s := e.syncer()
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	e.watch(s)
	e.put("routes/2", route("/two"))
	e.next("[1 2]")
	var rev int64
	deadline := time.Now().Add(10 * time.Second)
	for rev != s.Revision() {
		if time.Now().After(deadline) {
			t.Fatalf("local copy at revision %d, the Syncer at %d", rev, s.Revision())
		}
		time.Sleep(20 * time.Millisecond)
		rev, _, _ = CacheOrigin(e.cache)
	}

	e.rebuild()
	re := refusal(t, s)
	if re.CopyRevision != rev || re.CopyRoutes != 2 || re.StoreRoutes != 0 {
		t.Fatalf("refusal %+v, want the copy at %d with 2 routes", re, rev)
	}
	e.quiet(2 * time.Second)
	if r, _, err := CacheOrigin(e.cache); err != nil || r != rev {
		t.Fatalf("local copy's revision %d (%v) after the refusal, want %d", r, err, rev)
	}
}

// TestStoreResetAccepted: with AcceptReset the first read replaces the
// local copy whatever it holds, and the store is followed.
func TestStoreResetAccepted(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	if _, err := e.syncer().Load(); err != nil {
		t.Fatal(err)
	}
	e.rebuild()
	e.put("routes/7", route("/seven"))
	s := New(Options{Store: e.store, CachePath: e.cache, Retry: 200 * time.Millisecond, AcceptReset: true, Log: testLog(t)})
	sp, err := s.Load()
	if err != nil || routeIDs(sp) != "[7]" || s.Refusal() != nil {
		t.Fatalf("Load with AcceptReset: routes %v (%v), refusal %v; want the store's [7]", routeIDs(sp), err, s.Refusal())
	}
	if r, c, err := CacheOrigin(e.cache); err != nil || r != s.Revision() || c != e.store.ClusterID() {
		t.Fatalf("local copy's origin %d %x (%v), want the store's %d %x", r, c, err, s.Revision(), e.store.ClusterID())
	}
	e.watch(s)
	e.put("routes/8", route("/eight"))
	e.next("[7 8]")
}

// TestGlobalRuleInvalidRefuses: a global rule written by other means than
// the Admin API that is invalid — it does not decode, or names a plugin
// the gateway does not have, or a configuration its plugin refuses — is
// not left out either: it refuses the configuration, naming the rule,
// where leaving it out would serve every route without it.
func TestGlobalRuleInvalidRefuses(t *testing.T) {
	for name, value := range map[string]string{
		"not decoded":    `{"plugins":{"proxy-rewrite":{}},"no_such_field":1}`,
		"unknown plugin": `{"plugins":{"key-auth-typo":{}}}`,
		"refused conf":   `{"plugins":{"limit-count":{"count":-1,"time_window":60}}}`,
		"not an object":  `[1]`,
	} {
		t.Run(name, func(t *testing.T) {
			e := newEnv(t)
			e.put("routes/1", route("/one"))
			e.put("global_rules/g", value)
			s := e.syncer()
			if sp, err := s.Load(); err == nil || !strings.Contains(err.Error(), "global rule g refuses the configuration") {
				t.Fatalf("Load with an invalid global rule: %v (served %v)", err, sp)
			}
			e.put("global_rules/g", `{"plugins":{"proxy-rewrite":{"headers":{"set":{"X-K":"fixed"}}}}}`)
			if sp, err := s.Load(); err != nil || len(sp.GlobalRules) != 1 || len(sp.Routes) != 1 {
				t.Fatalf("mended: %v", err)
			}
		})
	}
}

// TestConsumerGroups: consumer groups are served, decoded and their
// plugins checked; a consumer whose group is missing (deleted with
// force=true) or refused is left out, the rest served.
func TestConsumerGroups(t *testing.T) {
	e := newEnv(t)
	e.put("consumer_groups/g1", `{"plugins":{"limit-count":{"count":1,"time_window":60}}}`)
	e.put("consumer_groups/g-bad", `{"plugins":{"limit-count":{"count":-1,"time_window":60}}}`)
	e.put("consumers/jack", `{"username":"jack","group_id":"g1","plugins":{"key-auth":{"key":"k1"}}}`)
	e.put("consumers/jill", `{"username":"jill","group_id":"g-bad","plugins":{"key-auth":{"key":"k2"}}}`)
	e.put("consumers/rose", `{"username":"rose","group_id":"gone","plugins":{"key-auth":{"key":"k3"}}}`)
	sp, err := e.syncer().Load()
	if err != nil {
		t.Fatal(err)
	}
	if len(sp.ConsumerGroups) != 1 || sp.ConsumerGroups[0].ID.String() != "g1" ||
		string(sp.ConsumerGroups[0].Plugins["limit-count"]) != `{"count":1,"time_window":60}` {
		t.Fatalf("consumer groups %+v", sp.ConsumerGroups)
	}
	if len(sp.Consumers) != 1 || sp.Consumers[0].Username != "jack" || sp.Consumers[0].GroupID.String() != "g1" {
		t.Fatalf("consumers %+v", sp.Consumers)
	}
}

// TestLoadDecodesInParallel: a first read of hundreds of objects, decoded
// and checked on every CPU (decodeAll), gives the Spec that a Syncer
// following the same writes one by one (put) gives: the same objects
// served, the same left out, the same order.
func TestLoadDecodesInParallel(t *testing.T) {
	e := newEnv(t)
	follower := e.syncer()
	if _, err := follower.Load(); err != nil {
		t.Fatal(err)
	}
	e.watch(follower)
	var want []string
	for i := range 600 {
		id := fmt.Sprintf("r%03d", i)
		switch i % 10 {
		case 3:
			e.put("routes/"+id, `{"uri":"/b","plugins":{"limit-count":{"count":-5,"time_window":60}},"upstream_id":"u1"}`)
		case 5:
			e.put("routes/"+id, `{"uri":"/u","plugins":{"no-such-plugin":{}},"upstream_id":"u1"}`)
		case 7:
			e.put("routes/"+id, `{"uri":5}`)
		case 8:
			e.put("upstreams/u"+strconv.Itoa(i), `{"nodes":{"127.0.0.1:1980":1}}`)
			e.put("services/s"+strconv.Itoa(i), `{"plugins":{"proxy-rewrite":{"uri":"/s"}}}`)
			e.put("routes/"+id+"/not-an-id", route("/ignored"))
			e.put("no_such_resource/"+id, `{}`)
		default:
			e.put("routes/"+id, fmt.Sprintf(`{"uri":"/%s","plugins":{"proxy-rewrite":{"uri":"/x"}},"upstream_id":"u1"}`, id))
			want = append(want, id)
		}
		if i == 0 {
			e.put("upstreams/u1", `{"nodes":{"127.0.0.1:1980":1}}`)
		}
	}
	followed := e.next("[" + strings.Join(want, " ") + "]")
	// No local copy: the follower's, were it written at this revision,
	// would be served instead of the read decoded (serveCopy).
	sp, err := New(Options{Store: e.store, Plugins: plugins.Default, Log: testLog(t)}).Load()
	if err != nil {
		t.Fatal(err)
	}
	if got := routeIDs(sp); got != routeIDs(followed) {
		t.Errorf("routes read at once %s, followed %s", got, routeIDs(followed))
	}
	if sp.Hash != followed.Hash || len(sp.Upstreams) != len(followed.Upstreams) || len(sp.Services) != len(followed.Services) {
		t.Errorf("read at once: hash %x, %d upstreams, %d services; followed: %x, %d, %d",
			sp.Hash, len(sp.Upstreams), len(sp.Services), followed.Hash, len(followed.Upstreams), len(followed.Services))
	}
}
