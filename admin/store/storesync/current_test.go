package storesync

import (
	"encoding/json"
	"os"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
)

// TestLoadServesCurrentCopy: a node started again on a store at the
// revision of its local copy serves the copy, marked checked, without
// decoding the store's objects first; Watch decodes them before it
// follows the store, once told the workers are ready (Started), hands
// nothing on for the same configuration, leaves the copy as it is, and a
// change after it holds every object read.
func TestLoadServesCurrentCopy(t *testing.T) {
	e := newEnv(t)
	e.put("upstreams/u1", `{"nodes":{"127.0.0.1:1980":1}}`)
	e.put("routes/1", `{"uri":"/one","upstream_id":"u1","plugins":{"proxy-rewrite":{"uri":"/x"}}}`)
	e.put("routes/2", route("/two"))
	first, err := e.syncer().Load() // writes the copy
	if err != nil {
		t.Fatal(err)
	}
	if first.Checked != plugins.Default.Fingerprint() {
		t.Fatalf("the store's Spec is marked %x, want the registry's fingerprint", first.Checked)
	}
	c, err := readCache(e.cache)
	if err != nil || c.checked != first.Checked {
		t.Fatalf("the copy's mark: %v, %x, want %x", err, c.checked, first.Checked)
	}

	s := e.syncer()
	sp, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	if sp.Hash != first.Hash || routeIDs(sp) != "[1 2]" || len(sp.Upstreams) != 1 || sp.Checked != first.Checked {
		t.Fatalf("served routes %s, %d upstreams, hash %x, mark %x; want the copy's [1 2], 1, %x, %x",
			routeIDs(sp), len(sp.Upstreams), sp.Hash, sp.Checked, first.Hash, first.Checked)
	}
	if len(s.objs) != 0 || len(s.pending) != 3 {
		t.Fatalf("Load decoded %d objects and left %d to Watch, want 0 and the 3 read", len(s.objs), len(s.pending))
	}
	select {
	case <-s.FirstRead():
	default:
		t.Fatal("FirstRead not closed: the Admin API would wait for the store's first read")
	}
	if err := s.Refusal(); err != nil || s.Revision() != c.Revision {
		t.Fatalf("Refusal %v, Revision %d, want nil and the copy's %d", err, s.Revision(), c.Revision)
	}

	e.watch(s)
	time.Sleep(300 * time.Millisecond)
	if s.ModifyIndexes() != nil || s.pending == nil {
		t.Fatal("the store's read checked before the workers are ready (Started)")
	}
	s.Started()
	deadline := time.Now().Add(30 * time.Second)
	for s.ModifyIndexes() == nil { // set once Watch has decoded the read
		if time.Now().After(deadline) {
			t.Fatal("the store's read not decoded within 30 s")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if after, err := readCache(e.cache); err != nil || !after.Written.Equal(c.Written) {
		t.Errorf("the copy was written again (%v, %v) for the configuration it holds", err, after.Written)
	}
	e.put("routes/3", route("/three"))
	select {
	case next := <-e.specs:
		if routeIDs(next) != "[1 2 3]" || len(next.Upstreams) != 1 {
			t.Fatalf("the first Spec handed on: routes %s, %d upstreams; want [1 2 3] and u1", routeIDs(next), len(next.Upstreams))
		}
	case err := <-e.errs:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("the change not handed on within 30 s")
	}
}

// setCopyMember replaces one member of the local copy's JSON, as another
// build (or an older one, without "checked") would have written it.
func setCopyMember(t *testing.T, path, member string, value json.RawMessage) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if value == nil {
		delete(m, member)
	} else {
		m[member] = value
	}
	if b, err = json.Marshal(m); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestLoadDecodesCopyNotCurrent: a copy that is not known to hold the
// store's configuration as this build checks it is not served at once:
// the store's objects are decoded and checked first, as before, and a
// copy of another build's mark is written again with this one's, so that
// the next start may serve it.
func TestLoadDecodesCopyNotCurrent(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	first, err := e.syncer().Load()
	if err != nil {
		t.Fatal(err)
	}
	other := json.RawMessage(`"` + strings.Repeat("ab", 32) + `"`)
	for _, tc := range []struct {
		name  string
		edit  func()
		opts  func(*Options)
		again bool // the copy is written again
	}{
		{name: "checked by another build", edit: func() { setCopyMember(t, e.cache, "checked", other) }, again: true},
		{name: "written before the mark", edit: func() { setCopyMember(t, e.cache, "checked", nil) }, again: true},
		{name: "of another cluster", edit: func() { setCopyMember(t, e.cache, "cluster_id", json.RawMessage(`"1234"`)) }, again: true},
		{name: "no registry", opts: func(o *Options) { o.Plugins = nil }, again: true},
		{name: "the store moved on", edit: func() { e.put("routes/2", route("/two")) }, again: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.edit != nil {
				tc.edit()
			}
			before, err := readCache(e.cache)
			if err != nil {
				t.Fatal(err)
			}
			o := Options{Store: e.store, CachePath: e.cache, Plugins: plugins.Default, Log: testLog(t)}
			if tc.opts != nil {
				tc.opts(&o)
			}
			s := New(o)
			sp, err := s.Load()
			if err != nil {
				t.Fatal(err)
			}
			if s.pending != nil || len(s.objs) == 0 {
				t.Fatalf("the copy served at once: %d objects decoded, %d left to Watch", len(s.objs), len(s.pending))
			}
			if !strings.HasPrefix(routeIDs(sp), "[1") {
				t.Fatalf("routes %s", routeIDs(sp))
			}
			after, err := readCache(e.cache)
			if err != nil {
				t.Fatal(err)
			}
			if again := !after.Written.Equal(before.Written); again != tc.again {
				t.Errorf("the copy written again: %v, want %v", again, tc.again)
			}
			if o.Plugins != nil && after.checked != first.Checked {
				t.Errorf("the copy's mark %x, want this build's %x", after.checked, first.Checked)
			}
		})
	}
}

// TestCurrentCopyRefusedNow: an object the copy holds that this process
// refuses (a route whose $env:// reference no longer resolves, the
// variable gone at the restart) is served from the copy at the start, then
// left out once Watch has checked the store's read: the Spec without it is
// handed on as a change, and replaces the copy.
func TestCurrentCopyRefusedNow(t *testing.T) {
	t.Setenv("COREGATE_SYNC_TEST_KEY", "sync-secret")
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	e.put("routes/2", `{"uri":"/two","plugins":{"proxy-rewrite":{"headers":{"set":{"X-K":"$env://COREGATE_SYNC_TEST_KEY"}}}},"upstream":{"nodes":{"127.0.0.1:1980":1}}}`)
	if sp, err := e.syncer().Load(); err != nil || routeIDs(sp) != "[1 2]" {
		t.Fatalf("with the variable set: %v", err)
	}
	if err := os.Unsetenv("COREGATE_SYNC_TEST_KEY"); err != nil {
		t.Fatal(err)
	}
	s := e.syncer()
	sp, err := s.Load()
	if err != nil || routeIDs(sp) != "[1 2]" || s.pending == nil {
		t.Fatalf("Load: %v, routes %s, want the copy's [1 2] served at once", err, routeIDs(sp))
	}
	e.watch(s)
	s.Started()
	select {
	case next := <-e.specs:
		if routeIDs(next) != "[1]" {
			t.Fatalf("handed on routes %s, want [1]", routeIDs(next))
		}
	case err := <-e.errs:
		t.Fatal(err)
	case <-time.After(30 * time.Second):
		t.Fatal("the store's Spec not handed on within 30 s")
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := readCache(e.cache)
		if err == nil && routeIDs(c.Spec) == "[1]" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the copy not replaced within 30 s: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
