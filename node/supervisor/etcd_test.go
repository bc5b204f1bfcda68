package supervisor

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/admin/store"
	"coregate/admin/store/etcdstore"
	"coregate/admin/store/storesync"
)

// TestGuardedStoreNeverReached: the Admin API's store on a node started
// with its etcd down (the node serves its local copy) answers 503
// (ErrUnavailable) at once from the first failed read on, reads and
// changes alike, rather than after the store's timeout each (10 s here);
// and lets calls through again once etcd answers.
func TestGuardedStoreNeverReached(t *testing.T) {
	dir := t.TempDir()
	emb, err := etcdstore.StartEmbedded(filepath.Join(dir, "etcd"), etcdstore.EmbedOptions{LogLevel: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer emb.Stop()
	newStore := func() store.Store {
		s, err := etcdstore.New(etcdstore.Options{Endpoints: emb.Endpoints, Timeout: 10 * time.Second})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { s.Close() })
		return s
	}
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	cache := filepath.Join(dir, storesync.CacheFile)
	st := newStore()
	ctx := context.Background()
	if _, _, err := st.Put(ctx, "/apisix/routes/1", []byte(`{"uri":"/one","upstream":{"nodes":{"127.0.0.1:1980":1}}}`), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := storesync.New(storesync.Options{Store: st, CachePath: cache, Log: log}).Load(); err != nil {
		t.Fatal(err) // writes the local copy
	}
	emb.Stop()

	st = newStore()
	sync := storesync.New(storesync.Options{Store: st, CachePath: cache, StartTimeout: 500 * time.Millisecond, Retry: 100 * time.Millisecond, Log: log})
	if _, err := sync.Load(); err != nil {
		t.Fatalf("Load with etcd down and a local copy: %v", err)
	}
	g := guardedStore{st, sync}
	for name, call := range map[string]func() error{
		"GET":  func() error { _, err := g.Get(ctx, "/apisix/routes/1"); return err },
		"LIST": func() error { _, _, err := g.List(ctx, "/apisix/routes/"); return err },
		"PUT": func() error {
			_, _, err := g.Put(ctx, "/apisix/routes/2", []byte(`{"uri":"/two"}`), store.PutOptions{})
			return err
		},
		"DELETE": func() error { _, err := g.Delete(ctx, "/apisix/routes/1", 0); return err },
	} {
		start := time.Now()
		err := call()
		if took := time.Since(start); !errors.Is(err, store.ErrUnavailable) || took > time.Second {
			t.Errorf("%s on a node that never reached etcd: %v after %v, want ErrUnavailable at once", name, err, took)
		}
	}

	// etcd back (on the ports of its last start): the sync reads it, and
	// calls pass.
	emb2, err := etcdstore.StartEmbedded(filepath.Join(dir, "etcd"), etcdstore.EmbedOptions{LogLevel: "none"})
	if err != nil {
		t.Fatal(err)
	}
	defer emb2.Stop()
	if emb2.Endpoints[0] != emb.Endpoints[0] {
		t.Fatalf("etcd came back on %v, not %v", emb2.Endpoints, emb.Endpoints)
	}
	wctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); sync.Watch(wctx, func(*spec.Spec) {}, func(error) {}) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		_, err := g.Get(ctx, "/apisix/routes/1")
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET 30 s after etcd came back: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
