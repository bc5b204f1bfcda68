package etcdstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/store"
)

// startEmbedded starts an embedded etcd in dir on free ports (or those
// the dir was last started with), stopped when the test ends.
func startEmbedded(t *testing.T, dir string) *Embedded {
	t.Helper()
	e, err := StartEmbedded(dir, EmbedOptions{LogLevel: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	return e
}

func TestEmbedded(t *testing.T) {
	e := startEmbedded(t, filepath.Join(t.TempDir(), "etcd"))
	runSuite(t, e.Endpoints)
}

// TestEmbeddedInProcess runs the suite on stores that call the embedded
// etcd in process (Options.Embedded), as the node's own store does.
func TestEmbeddedInProcess(t *testing.T) {
	e := startEmbedded(t, filepath.Join(t.TempDir(), "etcd"))
	runSuiteOn(t, func(t *testing.T) *Store { return newLocalStore(t, e) })
}

// TestEmbeddedInProcessShared: a store in process and one over the
// embedded etcd's listener (a data plane's, etcdctl's) see one store:
// the same keys and revisions, each's writes on the other's watch, the
// same cluster id and server version.
func TestEmbeddedInProcessShared(t *testing.T) {
	e := startEmbedded(t, filepath.Join(t.TempDir(), "etcd"))
	ctx := ctxT(t)
	local := newLocalStore(t, e)
	remote := newStore(t, e.Endpoints)
	remote.prefix = local.prefix
	dir := local.Prefix() + "/"

	_, lrev, err := local.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	_, rrev, err := remote.List(ctx, dir)
	if err != nil {
		t.Fatal(err)
	}
	if lrev != rrev || local.ClusterID() == 0 || local.ClusterID() != remote.ClusterID() {
		t.Fatalf("revision %d, cluster %x in process; %d, %x over the listener", lrev, local.ClusterID(), rrev, remote.ClusterID())
	}
	lv, err := local.ServerVersion(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if rv, err := remote.ServerVersion(ctx); err != nil || lv == "" || lv != rv {
		t.Fatalf("server version %q in process, %q %v over the listener", lv, rv, err)
	}

	lch := local.Watch(ctx, dir, lrev+1)
	rch := remote.Watch(ctx, dir, lrev+1)
	kv1, _, err := local.Put(ctx, dir+"routes/1", []byte(`{"uri":"/1"}`), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	kv2, _, err := remote.Put(ctx, dir+"routes/2", []byte(`{"uri":"/2"}`), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		ch   <-chan store.WatchResponse
	}{{"in process", lch}, {"over the listener", rch}} {
		var evs []store.Event
		for len(evs) < 2 {
			wr, ok := recv(t, c.ch, 20*time.Second)
			if !ok || wr.Err != nil {
				t.Fatalf("watch %s ended: %v", c.name, wr.Err)
			}
			evs = append(evs, wr.Events...)
		}
		if evs[0].KV.Key != kv1.Key || evs[0].KV.ModRevision != kv1.ModRevision || string(evs[0].KV.Value) != `{"uri":"/1"}` ||
			evs[1].KV.Key != kv2.Key || evs[1].KV.ModRevision != kv2.ModRevision || string(evs[1].KV.Value) != `{"uri":"/2"}` {
			t.Fatalf("watch %s: %+v", c.name, evs)
		}
	}
	got, err := remote.Get(ctx, kv1.Key)
	if err != nil || got.ModRevision != kv1.ModRevision || got.CreateRevision != kv1.CreateRevision {
		t.Fatalf("over the listener, the key written in process: %+v %v, want %+v", got, err, kv1)
	}
	if got, err = local.Get(ctx, kv2.Key); err != nil || got.ModRevision != kv2.ModRevision {
		t.Fatalf("in process, the key written over the listener: %+v %v, want %+v", got, err, kv2)
	}
	// Get in process is serializable: each write answered over the
	// listener is read back at once, never an earlier value.
	for i := range 50 {
		v := fmt.Appendf(nil, `{"n":%d}`, i)
		kv, _, err := remote.Put(ctx, kv2.Key, v, store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, err := local.Get(ctx, kv2.Key); err != nil || got.ModRevision != kv.ModRevision || string(got.Value) != string(v) {
			t.Fatalf("in process, right after write %d over the listener: %+v %v, want %+v", i, got, err, kv)
		}
	}
	// A compare-and-swap in process loses to a write over the listener.
	if _, err := remote.Delete(ctx, kv1.Key, kv1.ModRevision); err != nil {
		t.Fatal(err)
	}
	if _, _, err := local.Put(ctx, kv1.Key, []byte(`{}`), store.PutOptions{IfModRevision: kv1.ModRevision}); !errors.Is(err, store.ErrConflict) {
		t.Fatalf("CAS on a key deleted over the listener: %v, want ErrConflict", err)
	}
}

// TestEmbeddedInProcessStop: a store in process on an embedded etcd that
// stops answers ErrUnavailable within its timeout, and its watch ends
// with ErrUnavailable in a bounded time, as one over the listener.
func TestEmbeddedInProcessStop(t *testing.T) {
	e, err := StartEmbedded(filepath.Join(t.TempDir(), "etcd"), EmbedOptions{LogLevel: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	s := newLocalStore(t, e)
	ctx, _ := stopUnavailable(t, e, s)
	if _, err := s.GenID(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GenID on a stopped etcd: %v, want ErrUnavailable", err)
	}
}

// stopUnavailable puts a route through s, watches from after it, stops e
// (s's etcd), and checks that the watch ends with ErrUnavailable in a
// bounded time and that Get and Put answer ErrUnavailable within s's
// timeout (2 s here); it returns the test's context and the route put.
func stopUnavailable(t *testing.T, e *Embedded, s *Store) (context.Context, store.KV) {
	t.Helper()
	s.opts.Timeout = 2 * time.Second
	ctx := ctxT(t)
	kv, _, err := s.Put(ctx, s.Prefix()+"/routes/1", []byte(`{"uri":"/1"}`), store.PutOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ch := s.Watch(ctx, s.Prefix()+"/", kv.ModRevision+1)
	e.Stop()

	start := time.Now()
	wr, ok := recv(t, ch, 30*time.Second)
	if !ok || !errors.Is(wr.Err, store.ErrUnavailable) {
		t.Fatalf("watch on a stopped etcd: %+v, want ErrUnavailable", wr)
	}
	t.Logf("watch ended %v after the stop", time.Since(start))
	if _, err := s.Get(ctx, s.Prefix()+"/routes/1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get on a stopped etcd: %v, want ErrUnavailable", err)
	}
	if _, _, err := s.Put(ctx, s.Prefix()+"/routes/2", []byte(`{}`), store.PutOptions{}); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Put on a stopped etcd: %v, want ErrUnavailable", err)
	}
	return ctx, kv
}

// TestEmbeddedInProcessStopRace: calls in process while the embedded
// etcd stops answer a value or ErrUnavailable, and the process lives: a
// read that reached etcd's database after it was closed would crash it.
func TestEmbeddedInProcessStopRace(t *testing.T) {
	for round := range 3 {
		e, err := StartEmbedded(filepath.Join(t.TempDir(), "etcd"), EmbedOptions{LogLevel: "none"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Stop)
		s := newLocalStore(t, e)
		s.opts.Timeout = 5 * time.Second
		ctx := ctxT(t)
		key := s.Prefix() + "/routes/1"
		if _, _, err := s.Put(ctx, key, []byte(`{}`), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
		var wg sync.WaitGroup
		var answered, refused atomic.Int64
		started := make(chan struct{}, 4)
		for g := range 4 {
			wg.Go(func() {
				started <- struct{}{}
				deadline := time.Now().Add(10 * time.Second)
				for i := 0; i < 100000 && time.Now().Before(deadline); i++ {
					var err error
					switch (g + i) % 4 {
					case 0, 1:
						_, err = s.Get(ctx, key)
					case 2:
						_, _, err = s.List(ctx, s.Prefix()+"/")
					default:
						_, err = s.ServerVersion(ctx)
					}
					switch {
					case err == nil:
						answered.Add(1)
					case errors.Is(err, store.ErrUnavailable):
						// Each kind of call, again, after the stop.
						if refused.Add(1) >= 4*50 {
							return
						}
					default:
						t.Errorf("round %d: %v, want a value or ErrUnavailable", round, err)
						return
					}
				}
			})
		}
		for range 4 {
			<-started
		}
		time.Sleep(time.Duration(round+1) * 20 * time.Millisecond)
		e.Stop()
		wg.Wait()
		if refused.Load() < 4*50 {
			t.Fatalf("round %d: %d calls refused after the stop, want %d (%d answers)", round, refused.Load(), 4*50, answered.Load())
		}
		t.Logf("round %d: %d answers before the stop", round, answered.Load())
	}
}

// TestEmbeddedRestart: a watch on a stopped etcd ends with ErrUnavailable
// in a bounded time, calls answer ErrUnavailable within the timeout, and
// the etcd started again on the same directory comes back on the same
// ports with the data.
func TestEmbeddedRestart(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	e, err := StartEmbedded(dir, EmbedOptions{LogLevel: "none"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	s := newStore(t, e.Endpoints)
	ctx, kv := stopUnavailable(t, e, s)

	e2 := startEmbedded(t, dir)
	if e2.Endpoints[0] != e.Endpoints[0] || e2.PeerURL != e.PeerURL {
		t.Fatalf("restart on %v %s, want the same ports as %v %s", e2.Endpoints, e2.PeerURL, e.Endpoints, e.PeerURL)
	}
	// The same Store reconnects by itself.
	var got store.KV
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err = s.Get(ctx, s.Prefix()+"/routes/1")
		if err == nil || time.Now().After(deadline) {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || string(got.Value) != `{"uri":"/1"}` || got.ModRevision != kv.ModRevision {
		t.Fatalf("after restart: %+v %v", got, err)
	}
}

// TestUnreachable: a store whose etcd is not there answers ErrUnavailable
// within its timeout, and so does a watch.
func TestUnreachable(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	s, err := New(Options{Endpoints: []string{"http://" + addr}, Timeout: time.Second, KeepAlive: 200 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := ctxT(t)
	start := time.Now()
	if _, _, err := s.List(ctx, "/apisix/"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("List: %v, want ErrUnavailable", err)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("List took %v with a 1 s timeout", d)
	}
	if _, err := s.GenID(ctx); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("GenID: %v, want ErrUnavailable", err)
	}
	wr, ok := recv(t, s.Watch(ctx, "/apisix/", 1), 20*time.Second)
	if !ok || !errors.Is(wr.Err, store.ErrUnavailable) {
		t.Fatalf("watch: %+v, want ErrUnavailable", wr)
	}
}

func TestEmbeddedDataDirMode(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	startEmbedded(t, dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Fatalf("data dir mode %v, want 0700", fi.Mode().Perm())
	}
}

// TestEmbeddedPortTaken: when a port the data directory was last started
// with is taken by then, the embedded etcd starts on free ones, with its
// data.
func TestEmbeddedPortTaken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	e, err := StartEmbedded(dir, EmbedOptions{LogLevel: "none"})
	if err != nil {
		t.Fatal(err)
	}
	s := newStore(t, e.Endpoints)
	ctx := ctxT(t)
	if _, _, err := s.Put(ctx, s.Prefix()+"/routes/1", []byte(`{}`), store.PutOptions{}); err != nil {
		t.Fatal(err)
	}
	e.Stop()
	l, err := net.Listen("tcp", strings.TrimPrefix(e.Endpoints[0], "http://"))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	e2 := startEmbedded(t, dir)
	if e2.Endpoints[0] == e.Endpoints[0] {
		t.Fatalf("restarted on the taken port %s", e2.Endpoints[0])
	}
	s2 := newStore(t, e2.Endpoints)
	s2.prefix = s.prefix
	if _, err := s2.Get(ctx, s.Prefix()+"/routes/1"); err != nil {
		t.Fatalf("data after a restart on other ports: %v", err)
	}
}

// TestEmbeddedAvoid: the ports of its last start are not taken again when
// the node now listens on one of them itself, and fresh ones keep clear
// of Avoid as well.
func TestEmbeddedAvoid(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	e := startEmbedded(t, dir)
	port := func(u string) int {
		p, err := strconv.Atoi(u[strings.LastIndexByte(u, ':')+1:])
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	client, peer := port(e.Endpoints[0]), port(e.PeerURL)
	e.Stop()
	e2, err := StartEmbedded(dir, EmbedOptions{LogLevel: "none", Avoid: []int{client}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e2.Stop)
	if c, p := port(e2.Endpoints[0]), port(e2.PeerURL); c == client || p == client || c == p {
		t.Fatalf("restart avoiding %d (last %d/%d): client %d, peer %d", client, client, peer, c, p)
	}
	ports, err := freePorts(3, []int{client, peer})
	if err != nil {
		t.Fatal(err)
	}
	if len(ports) != 3 || slices.Contains(ports, client) || slices.Contains(ports, peer) {
		t.Fatalf("freePorts(3, avoid %d %d) = %v", client, peer, ports)
	}
}

// TestAuth: deployment.etcd.user and password reach etcd: with auth on,
// the right user reads and writes, a wrong password is refused (as
// ErrUnavailable, the Admin API's 503), and a watch works for the user.
func TestAuth(t *testing.T) {
	e := startEmbedded(t, filepath.Join(t.TempDir(), "etcd"))
	ctx := ctxT(t)
	root := newStore(t, e.Endpoints)
	cli, err := root.client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserAdd(ctx, "root", "rootpw"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.UserGrantRole(ctx, "root", "root"); err != nil {
		t.Fatal(err)
	}
	if _, err := cli.AuthEnable(ctx); err != nil {
		t.Fatal(err)
	}
	if err := root.Close(); err != nil {
		t.Fatal(err)
	}
	open := func(user, password string) *Store {
		return openConfig(t, nodeconf.EtcdConfig{Host: e.Endpoints, Prefix: "/apisix", Timeout: 5, User: user, Password: password})
	}
	good := open("root", "rootpw")
	_, rev, err := good.List(ctx, "/apisix/")
	if err != nil {
		t.Fatalf("List as root: %v", err)
	}
	ch := good.Watch(ctx, "/apisix/", rev+1)
	if _, _, err := good.Put(ctx, "/apisix/routes/1", []byte(`{}`), store.PutOptions{}); err != nil {
		t.Fatalf("Put as root: %v", err)
	}
	if wr, ok := recv(t, ch, 20*time.Second); !ok || wr.Err != nil || len(wr.Events) != 1 {
		t.Fatalf("watch as root: %+v", wr)
	}
	if _, err := open("root", "wrong").Get(ctx, "/apisix/routes/1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get with a wrong password: %v, want ErrUnavailable", err)
	}
	if _, err := open("", "").Get(ctx, "/apisix/routes/1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get without a user: %v, want ErrUnavailable", err)
	}
	// In process the store presents no credentials, whatever its
	// options say: refused as the store without a user.
	o, err := OptionsFrom(nodeconf.EtcdConfig{Host: e.Endpoints, Prefix: "/apisix", Timeout: 5, User: "root", Password: "rootpw"})
	if err != nil {
		t.Fatal(err)
	}
	o.Embedded = e
	local, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	defer local.Close()
	if _, err := local.Get(ctx, "/apisix/routes/1"); !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Get in process with auth on: %v, want ErrUnavailable", err)
	}
}

// TestEmbeddedSnapshots: the embedded etcd takes a snapshot every
// SnapshotCount writes, so that a start replays the WAL written since
// the last one only, and starts again with the data; without one until
// then.
func TestEmbeddedSnapshots(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "etcd")
	e, err := StartEmbedded(dir, EmbedOptions{LogLevel: "none", SnapshotCount: 50})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(e.Stop)
	s := newStore(t, e.Endpoints)
	ctx := ctxT(t)
	snaps := func() int {
		m, _ := filepath.Glob(filepath.Join(dir, "member", "snap", "*.snap"))
		return len(m)
	}
	if n := snaps(); n != 0 {
		t.Fatalf("%d snapshots before any write", n)
	}
	for i := range 120 {
		if _, _, err := s.Put(ctx, s.Prefix()+"/routes/"+strconv.Itoa(i), []byte(`{"uri":"/x"}`), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for snaps() == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if n := snaps(); n == 0 {
		t.Fatal("no snapshot after 120 writes with SnapshotCount 50")
	}
	e.Stop()
	e2 := startEmbedded(t, dir)
	s2 := newStore(t, e2.Endpoints)
	kvs, _, err := s2.List(ctx, s.Prefix()+"/routes/")
	if err != nil || len(kvs) != 120 {
		t.Fatalf("after a start from the snapshot: %d keys, %v; want 120", len(kvs), err)
	}
}
