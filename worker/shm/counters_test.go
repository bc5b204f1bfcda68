package shm

import (
	"os"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"coregate/plugins"
)

var _ plugins.Counters = (*Table)(nil)

// dupOf duplicates f as another holder of its object would hold it (a
// worker's descriptor, passed to a new supervisor).
func dupOf(t *testing.T, f *os.File) *os.File {
	t.Helper()
	fd, err := unix.Dup(int(f.Fd()))
	if err != nil {
		t.Fatal(err)
	}
	return os.NewFile(uintptr(fd), f.Name())
}

// TestAdopt: a supervisor that takes the segments over from a worker,
// after the one that made them is gone, sees and hands on the same
// counters and series.
func TestAdopt(t *testing.T) {
	seg, err := Create(64)
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now().UnixNano()
	c, _ := seg.Counter([]byte("route 1"), now, now+int64(time.Minute))
	c.Add(3)
	held := dupOf(t, seg.File())
	_ = seg.Close()
	adopted, err := Adopt(held)
	if err != nil {
		t.Fatal(err)
	}
	defer adopted.Close()
	if c, _ := adopted.Counter([]byte("route 1"), now, now+int64(time.Minute)); c == nil || c.Load() != 3 {
		t.Fatalf("the adopted table's counter: %v, want 3", c)
	}
	if adopted.File() != held {
		t.Error("the adopted segment does not hand on the file it was given")
	}

	ms, err := CreateMetrics(2, 16)
	if err != nil {
		t.Fatal(err)
	}
	r, _ := ms.Region(1)
	r.Slot("apisix_http_status", "200", "r1", "").Add(7)
	heldM := dupOf(t, ms.File())
	_ = ms.Close()
	am, err := AdoptMetrics(heldM)
	if err != nil {
		t.Fatal(err)
	}
	defer am.Close()
	if got := sums(am.MetricsMap); got["apisix_http_status[200 r1 ]"] != 7 || len(got) != 1 {
		t.Errorf("the adopted metrics: %v, want the series counted before", got)
	}

	junk, err := os.CreateTemp(t.TempDir(), "junk")
	if err != nil {
		t.Fatal(err)
	}
	defer junk.Close()
	if _, err := Adopt(junk); err == nil {
		t.Error("Adopt of an empty file: no error")
	}
}
