package storesync

import (
	"log/slog"
	"strings"
	"testing"
	"time"

	"coregate/admin/store/etcdstore"
	"coregate/internal/syncbuf"
	"coregate/plugins"
)

// TestWatchTimeoutNotLost: a watch that ends unavailable while etcd
// answers every call is not taken for an outage. Its keep-alive here is a
// microsecond, so that every watch hears nothing for three of them and
// ends ("no answer from etcd") on a real, healthy etcd, as a watch whose
// progress answers come late on a loaded machine does. The probe finds
// the store answering: Reachable and not Lost throughout (the Admin API's
// fast 503 follows Lost), no outage logged, and the changes still arrive
// with the full reads that follow.
func TestWatchTimeoutNotLost(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	hasty, err := etcdstore.New(etcdstore.Options{Endpoints: e.etcd.Endpoints, Timeout: 2 * time.Second, KeepAlive: time.Microsecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { hasty.Close() })
	var log syncbuf.Buffer
	s := New(Options{Store: hasty, CachePath: e.cache, Retry: 200 * time.Millisecond, Plugins: plugins.Default,
		Log: slog.New(slog.NewTextHandler(&log, nil))})
	if s.Lost() {
		t.Fatal("Lost before any call to the store")
	}
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	e.watch(s)
	e.put("routes/2", route("/two"))
	e.next("[1 2]")
	const ended = "config watch ended, the store answers"
	deadline := time.Now().Add(20 * time.Second)
	for strings.Count(log.String(), ended) < 5 && time.Now().Before(deadline) {
		if !s.Reachable() || s.Lost() {
			t.Fatalf("a watch that timed out on a healthy etcd made the store unreachable (Reachable %v, Lost %v):\n%s", s.Reachable(), s.Lost(), log.String())
		}
		time.Sleep(time.Millisecond)
	}
	if n := strings.Count(log.String(), ended); n < 5 {
		t.Fatalf("%d watches ended in 20 s with a keep-alive of 1 µs, want 5:\n%s", n, log.String())
	}
	if strings.Contains(log.String(), "unreachable") {
		t.Errorf("an outage logged with etcd answering:\n%s", log.String())
	}
	e.put("routes/3", route("/three"))
	e.next("[1 2 3]")
}

// TestLostFromFirstRead: a Syncer that never reached its store is not
// Lost before it tried, and is from its first read that failed (Load
// serving the local copy), so that a node started with etcd down refuses
// the Admin API's calls at once; it is not Lost once the store answers.
func TestLostFromFirstRead(t *testing.T) {
	e := newEnv(t)
	e.put("routes/1", route("/one"))
	if _, err := e.syncer().Load(); err != nil { // writes the local copy
		t.Fatal(err)
	}
	e.etcd.Stop()
	s := New(Options{Store: e.newStore(), CachePath: e.cache, Retry: 200 * time.Millisecond, StartTimeout: 500 * time.Millisecond,
		Plugins: plugins.Default, Log: testLog(t)})
	if s.Lost() || s.Reachable() {
		t.Fatalf("before any call: Lost %v, Reachable %v, want neither", s.Lost(), s.Reachable())
	}
	if _, err := s.Load(); err != nil {
		t.Fatal(err)
	}
	if !s.Lost() || s.Reachable() {
		t.Fatalf("after a first read with etcd down: Lost %v, Reachable %v, want Lost", s.Lost(), s.Reachable())
	}
	e.watch(s)
	e.start()
	e.put("routes/2", route("/two"))
	e.next("[1 2]")
	if s.Lost() || !s.Reachable() {
		t.Fatalf("with etcd back: Lost %v, Reachable %v, want Reachable", s.Lost(), s.Reachable())
	}
}
