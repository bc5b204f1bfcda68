package etcdstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"coregate/admin/store"
)

// filledDir is the data directory of an embedded etcd that held enough to
// make its database a tree of several levels, with overflow pages and
// compacted history, stopped.
func filledDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "etcd")
	e := startEmbedded(t, dir)
	s := newStore(t, e.Endpoints)
	// 2000 puts, each a write etcd syncs to disk: beside other packages'
	// tests on a 2-core machine they can take longer than ctxT's 30 s.
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	small := strings.Repeat("x", 400)
	var rev int64
	for i := range 2000 {
		kv, _, err := s.Put(ctx, fmt.Sprintf("%s/routes/%d", s.Prefix(), i), []byte(small), store.PutOptions{})
		if err != nil {
			t.Fatal(err)
		}
		rev = kv.ModRevision
	}
	big := strings.Repeat("y", 64<<10) // larger than a page: overflow pages
	for i := range 4 {
		if _, _, err := s.Put(ctx, fmt.Sprintf("%s/upstreams/big%d", s.Prefix(), i), []byte(big), store.PutOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Compact(ctx, rev); err != nil {
		t.Fatal(err)
	}
	for i := range 500 {
		if _, err := s.Delete(ctx, fmt.Sprintf("%s/routes/%d", s.Prefix(), i), 0); err != nil {
			t.Fatal(err)
		}
	}
	e.Stop()
	return dir
}

// copyDir copies a data directory to a new one.
func copyDir(t *testing.T, dir string) string {
	t.Helper()
	to := filepath.Join(t.TempDir(), "etcd")
	if out, err := exec.Command("cp", "-a", dir, to).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	return to
}

// TestEmbeddedDamagedDB: a database that would crash etcd as it opens it
// (a Go panic, or SIGBUS for a file cut short, naming no file) is refused
// before etcd sees it, with a DamagedError naming the file; a sound one,
// of a tree several levels deep with overflow pages and freed pages,
// passes and starts.
func TestEmbeddedDamagedDB(t *testing.T) {
	dir := filledDir(t)
	db := dbPath(dir)
	info, err := os.Stat(db)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if err := checkDB(dir); err != nil {
		t.Fatalf("a sound database: %v", err)
	}
	t.Logf("checked %d KiB in %v", info.Size()>>10, time.Since(start))

	b, err := os.ReadFile(db)
	if err != nil {
		t.Fatal(err)
	}
	// The meta of the later transaction: the root bucket's root page and
	// the pages in use (bbolt grows the file ahead of them).
	f, err := os.Open(db)
	if err != nil {
		t.Fatal(err)
	}
	m, _ := readMeta(f, 0)
	if m1, _ := readMeta(f, int64(m.pageSize)); m1.txid > m.txid {
		m = m1
	}
	f.Close()
	root, ps := m.root, int(m.pageSize)
	t.Logf("%d pages of %d bytes in use, in a file of %d", m.pages, ps, len(b))

	garbage := make([]byte, len(b))
	_, _ = rand.Read(garbage)
	torn := append([]byte(nil), b...)
	clear(torn[int(root)*ps : int(root)*ps+ps]) // a page that never reached the disk
	for _, tc := range []struct {
		name string
		data []byte
		want string
	}{
		{"garbage", garbage, "no valid meta page"},
		{"cut short", b[:int(m.pages)*ps/2], "cut short"},
		{"cut to one page", b[:ps], "shorter than its two meta pages"},
		{"torn", torn, fmt.Sprintf("page %d: its header says page 0", root)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := copyDir(t, dir)
			if err := os.WriteFile(dbPath(d), tc.data, 0o600); err != nil {
				t.Fatal(err)
			}
			e, err := StartEmbedded(d, EmbedOptions{LogLevel: "none"})
			if err == nil {
				e.Stop()
				t.Fatal("started on a damaged database")
			}
			var de *DamagedError
			if !errors.As(err, &de) || de.Path != dbPath(d) || !strings.Contains(err.Error(), dbPath(d)) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("StartEmbedded: %v, want a DamagedError naming %s: %q", err, dbPath(d), tc.want)
			}
		})
	}

	// The sound one starts, with its data; so does an empty file, which
	// etcd fills from its log.
	empty := copyDir(t, dir)
	if err := os.WriteFile(dbPath(empty), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, empty} {
		e := startEmbedded(t, d)
		s := newStore(t, e.Endpoints)
		s.prefix = DefaultPrefix
		kvs, _, err := s.List(ctxT(t), "/")
		if err != nil || len(kvs) != 1504 {
			t.Fatalf("%s: %d keys (%v), want 1504", d, len(kvs), err)
		}
		e.Stop()
	}
}
