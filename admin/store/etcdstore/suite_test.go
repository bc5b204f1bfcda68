package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/store"
)

// The suite every etcd runs: the embedded one (TestEmbedded) and a real
// etcd process (TestEtcdProcess). Each case works under a prefix of its
// own, so the cases share one etcd.

var prefixN atomic.Int64

// newStore opens a Store on endpoints under a fresh prefix, closed when
// the test ends.
func newStore(t *testing.T, endpoints []string) *Store {
	t.Helper()
	return openStore(t, Options{Endpoints: endpoints})
}

// newLocalStore is newStore calling the embedded etcd e in process
// (Options.Embedded).
func newLocalStore(t *testing.T, e *Embedded) *Store {
	t.Helper()
	return openStore(t, Options{Endpoints: e.Endpoints, Embedded: e})
}

// openStore opens a Store with o under a fresh prefix and the suite's
// timeout and keep-alive, closed when the test ends.
func openStore(t *testing.T, o Options) *Store {
	t.Helper()
	o.Prefix = fmt.Sprintf("/t%d/apisix", prefixN.Add(1))
	o.Timeout = 10 * time.Second
	o.KeepAlive = 500 * time.Millisecond
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// openConfig opens a Store the way a node does, from its
// deployment.etcd settings, closed when the test ends.
func openConfig(t *testing.T, cfg nodeconf.EtcdConfig) *Store {
	t.Helper()
	o, err := OptionsFrom(cfg)
	if err != nil {
		t.Fatal(err)
	}
	s, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func runSuite(t *testing.T, endpoints []string) {
	runSuiteOn(t, func(t *testing.T) *Store { return newStore(t, endpoints) })
}

// runSuiteOn runs the suite on the stores open opens, one per case.
func runSuiteOn(t *testing.T, open func(*testing.T) *Store) {
	t.Run("CRUD", func(t *testing.T) { testCRUD(t, open(t)) })
	t.Run("CompareAndSwap", func(t *testing.T) { testCAS(t, open(t)) })
	t.Run("TTL", func(t *testing.T) { testTTL(t, open(t)) })
	t.Run("GenID", func(t *testing.T) { testGenID(t, open(t)) })
	t.Run("ListOrder", func(t *testing.T) { testList(t, open(t)) })
	t.Run("Watch", func(t *testing.T) { testWatch(t, open(t)) })
	t.Run("WatchIdle", func(t *testing.T) { testWatchIdle(t, open(t)) })
	// Last: compaction drops every case's history.
	t.Run("Compacted", func(t *testing.T) { testCompacted(t, open(t)) })
}

func testCRUD(t *testing.T, s *Store) {
	ctx := ctxT(t)
	key := s.Prefix() + "/routes/1"
	if _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get absent: %v, want ErrNotFound", err)
	}
	kv, prev, err := s.Put(ctx, key, []byte(`{"uri":"/a"}`), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if prev.Key != "" {
		t.Fatalf("first Put: prev %+v, want none (the Admin API's 201)", prev)
	}
	if kv.Key != key || string(kv.Value) != `{"uri":"/a"}` || kv.CreateRevision == 0 || kv.CreateRevision != kv.ModRevision {
		t.Fatalf("first Put: kv %+v", kv)
	}
	got, err := s.Get(ctx, key)
	if err != nil {
		t.Fatal(err)
	}
	if got.Key != key || string(got.Value) != `{"uri":"/a"}` || got.CreateRevision != kv.CreateRevision || got.ModRevision != kv.ModRevision {
		t.Fatalf("Get: %+v, want %+v", got, kv)
	}
	kv2, prev, err := s.Put(ctx, key, []byte(`{"uri":"/b"}`), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if prev.Key != key || string(prev.Value) != `{"uri":"/a"}` || prev.ModRevision != kv.ModRevision {
		t.Fatalf("second Put: prev %+v, want the first value (the Admin API's 200)", prev)
	}
	if kv2.CreateRevision != kv.CreateRevision || kv2.ModRevision <= kv.ModRevision {
		t.Fatalf("second Put: kv %+v after %+v: create revision kept, mod revision grows", kv2, kv)
	}
	del, err := s.Delete(ctx, key, 0)
	if err != nil {
		t.Fatal(err)
	}
	if string(del.Value) != `{"uri":"/b"}` || del.ModRevision != kv2.ModRevision {
		t.Fatalf("Delete: prev %+v", del)
	}
	if _, err := s.Get(ctx, key); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Get deleted: %v, want ErrNotFound", err)
	}
	if _, err := s.Delete(ctx, key, 0); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("Delete absent: %v, want ErrNotFound", err)
	}
	if s.ReadOnly() {
		t.Fatal("etcd store read-only")
	}
}

func testCAS(t *testing.T, s *Store) {
	ctx := ctxT(t)
	key := s.Prefix() + "/upstreams/u"
	kv, _, err := s.Put(ctx, key, []byte(`{"v":1}`), store.PutOptions{IfModRevision: -1})
	if err != nil {
		t.Fatalf("create-only Put of a new key: %v", err)
	}
	if _, _, err := s.Put(ctx, key, []byte(`{"v":2}`), store.PutOptions{IfModRevision: -1}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("create-only Put of an existing key: %v, want ErrConflict", err)
	}
	kv2, prev, err := s.Put(ctx, key, []byte(`{"v":2}`), store.PutOptions{IfModRevision: kv.ModRevision})
	if err != nil {
		t.Fatalf("Put at the current revision: %v", err)
	}
	if prev.ModRevision != kv.ModRevision || kv2.CreateRevision != kv.CreateRevision {
		t.Fatalf("CAS Put: kv %+v prev %+v", kv2, prev)
	}
	_, _, err = s.Put(ctx, key, []byte(`{"v":3}`), store.PutOptions{IfModRevision: kv.ModRevision})
	if !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Put at a stale revision: %v, want ErrConflict", err)
	}
	if got, _ := s.Get(ctx, key); string(got.Value) != `{"v":2}` {
		t.Fatalf("after the refused Put: %s", got.Value)
	}
	if _, err := s.Delete(ctx, key, kv.ModRevision); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("Delete at a stale revision: %v, want ErrConflict", err)
	}
	if _, err := s.Delete(ctx, key, kv2.ModRevision); err != nil {
		t.Fatalf("Delete at the current revision: %v", err)
	}
	if _, err := s.Delete(ctx, key, kv2.ModRevision); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("CAS Delete of an absent key: %v, want ErrNotFound", err)
	}
}

func testTTL(t *testing.T, s *Store) {
	ctx := ctxT(t)
	key := s.Prefix() + "/routes/ttl"
	if _, _, err := s.Put(ctx, key, []byte(`{}`), store.PutOptions{TTL: 1}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get(ctx, key); err != nil {
		t.Fatalf("Get before expiry: %v", err)
	}
	// etcd rounds a lease up to its minimum TTL (2 s by default).
	deadline := time.Now().Add(20 * time.Second)
	for {
		_, err := s.Get(ctx, key)
		if errors.Is(err, store.ErrNotFound) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if time.Now().After(deadline) {
			t.Fatal("key with TTL 1 still there after 20 s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func testGenID(t *testing.T, s *Store) {
	ctx := ctxT(t)
	re := regexp.MustCompile(`^[0-9]{20}$`)
	last := ""
	for range 5 {
		id, err := s.GenID(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !re.MatchString(id) || id == "00000000000000000000" {
			t.Fatalf("GenID %q: want %%020d of a revision", id)
		}
		if id <= last {
			t.Fatalf("GenID %q after %q: not increasing", id, last)
		}
		last = id
	}
	if _, err := s.Get(ctx, s.Prefix()+"/gen_id"); err != nil {
		t.Fatalf("gen_id key: %v", err)
	}
}

func testList(t *testing.T, s *Store) {
	ctx := ctxT(t)
	dir := s.Prefix() + "/routes/"
	// APISIX's init_etcd directory placeholder is not an object.
	if _, _, err := s.Put(ctx, dir, []byte("init_dir"), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	kvs, rev0, err := s.List(ctx, dir)
	if err != nil || len(kvs) != 0 || rev0 == 0 {
		t.Fatalf("List of an empty dir: %v %d %v", kvs, rev0, err)
	}
	for _, id := range []string{"b", "a", "c"} {
		if _, _, err := s.Put(ctx, dir+id, []byte(`{"id":"`+id+`"}`), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// A rewrite keeps a key's place: the order is by creation.
	last, _, err := s.Put(ctx, dir+"b", []byte(`{"id":"b","x":1}`), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(ctx, s.Prefix()+"/upstreams/1", []byte(`{}`), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	kvs, rev, err := s.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, kv := range kvs {
		ids = append(ids, kv.Key[len(dir):])
	}
	if fmt.Sprint(ids) != "[b a c]" {
		t.Fatalf("List order %v, want [b a c] (by create revision)", ids)
	}
	if string(kvs[0].Value) != `{"id":"b","x":1}` || kvs[0].ModRevision != last.ModRevision {
		t.Fatalf("List: %+v", kvs[0])
	}
	if rev <= last.ModRevision {
		t.Fatalf("List revision %d, want the store's (after %d)", rev, last.ModRevision)
	}
	all, _, err := s.List(ctx, s.Prefix()+"/")
	if err != nil {
		t.Fatal(err)
	}
	if len(all) != 5 { // the placeholder, b, a, c, upstreams/1
		t.Fatalf("List of the prefix: %d keys, want 5", len(all))
	}
}

// recv takes the next watch response within a bound.
func recv(t *testing.T, ch <-chan store.WatchResponse, within time.Duration) (store.WatchResponse, bool) {
	t.Helper()
	select {
	case wr, ok := <-ch:
		return wr, ok
	case <-time.After(within):
		t.Fatalf("no watch response within %v", within)
		return store.WatchResponse{}, false
	}
}

func testWatch(t *testing.T, s *Store) {
	ctx := ctxT(t)
	dir := s.Prefix() + "/"
	if _, _, err := s.Put(ctx, dir+"routes/old", []byte(`{}`), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	_, rev, err := s.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithCancel(ctx)
	ch := s.Watch(wctx, dir, rev+1)
	kv1, _, err := s.Put(ctx, dir+"routes/1", []byte(`{"uri":"/1"}`), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Put(ctx, dir+"services/s", []byte(`{}`), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	del, err := s.Delete(ctx, dir+"routes/old", 0)
	if err != nil {
		t.Fatal(err)
	}
	var evs []store.Event
	var lastRev int64
	for len(evs) < 3 {
		wr, ok := recv(t, ch, 20*time.Second)
		if !ok || wr.Err != nil {
			t.Fatalf("watch ended: %v", wr.Err)
		}
		if wr.Revision < lastRev {
			t.Fatalf("watch revision went back: %d after %d", wr.Revision, lastRev)
		}
		lastRev = wr.Revision
		evs = append(evs, wr.Events...)
	}
	if evs[0].Type != store.EventPut || evs[0].KV.Key != dir+"routes/1" || string(evs[0].KV.Value) != `{"uri":"/1"}` || evs[0].KV.ModRevision != kv1.ModRevision {
		t.Fatalf("event 0: %+v", evs[0])
	}
	if evs[1].Type != store.EventPut || evs[1].KV.Key != dir+"services/s" {
		t.Fatalf("event 1: %+v", evs[1])
	}
	if evs[2].Type != store.EventDelete || evs[2].KV.Key != dir+"routes/old" || evs[2].KV.Value != nil || evs[2].KV.ModRevision <= del.ModRevision {
		t.Fatalf("event 2: %+v", evs[2])
	}
	if lastRev < evs[2].KV.ModRevision {
		t.Fatalf("response revision %d before its last event %d", lastRev, evs[2].KV.ModRevision)
	}
	// Quiet: a watch on a live etcd stays open (its keep-alive answered).
	select {
	case wr := <-ch:
		t.Fatalf("quiet watch answered %+v", wr)
	case <-time.After(4 * s.opts.KeepAlive):
	}
	cancel()
	for range ch { // closes once ctx is done
	}
}

// testWatchIdle: a watch from the revision after a List's, on an etcd
// that nobody writes to, stays open: etcd 3.7 sends no progress
// notification to a watch whose start revision it has not reached, and
// its keep-alive must not take that silence for an etcd gone. A write
// then arrives on it.
func testWatchIdle(t *testing.T, s *Store) {
	ctx := ctxT(t)
	dir := s.Prefix() + "/"
	_, rev, err := s.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, dir, rev+1)
	select {
	case wr := <-ch:
		t.Fatalf("idle watch answered %+v", wr)
	case <-time.After(8 * s.opts.KeepAlive):
	}
	if _, _, err := s.Put(ctx, dir+"routes/1", []byte(`{}`), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	wr, ok := recv(t, ch, 20*time.Second)
	if !ok || wr.Err != nil || len(wr.Events) != 1 || wr.Events[0].KV.Key != dir+"routes/1" {
		t.Fatalf("the write after the quiet: %+v", wr)
	}
	// Past the start revision, progress notifications keep it open.
	select {
	case wr := <-ch:
		t.Fatalf("quiet watch answered %+v", wr)
	case <-time.After(8 * s.opts.KeepAlive):
	}
}

func testCompacted(t *testing.T, s *Store) {
	ctx := ctxT(t)
	dir := s.Prefix() + "/"
	var first int64
	for i := range 5 {
		kv, _, err := s.Put(ctx, fmt.Sprintf("%sroutes/%d", dir, i), []byte(`{}`), store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if first == 0 {
			first = kv.ModRevision
		}
	}
	_, rev, err := s.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, dir, first)
	wr, ok := recv(t, ch, 20*time.Second)
	if !ok || !errors.Is(wr.Err, store.ErrCompacted) {
		t.Fatalf("watch from a compacted revision: %+v, want ErrCompacted", wr)
	}
	if _, ok := recv(t, ch, 5*time.Second); ok {
		t.Fatal("watch channel still open after ErrCompacted")
	}
	// A watch from beyond the store's revision is what a node sees when
	// its etcd was wiped or restored from a backup: start over too.
	wr, ok = recv(t, s.Watch(ctx, dir, rev+1000), 20*time.Second)
	if !ok || !errors.Is(wr.Err, store.ErrCompacted) {
		t.Fatalf("watch from revision %d of a store at %d: %+v, want ErrCompacted", rev+1000, rev, wr)
	}
	// From the List's revision on, the watch works again.
	ch2 := s.Watch(ctx, dir, rev+1)
	if _, _, err := s.Put(ctx, dir+"routes/after", []byte(`{}`), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	wr, ok = recv(t, ch2, 20*time.Second)
	if !ok || wr.Err != nil || len(wr.Events) != 1 || wr.Events[0].KV.Key != dir+"routes/after" {
		t.Fatalf("watch after resync: %+v", wr)
	}
}
