package worker

import (
	"os"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// threadNice reads the nice value of thread tid of this process.
func threadNice(t *testing.T, tid int) int {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// fields after the command's closing parenthesis; nice is field 19
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	n, err := strconv.Atoi(f[19-3])
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestBackground: f runs on a thread at BackgroundNice, not the caller's,
// and every call on the same one: a build does not start a thread.
func TestBackground(t *testing.T) {
	var tids []int
	for range 3 {
		Background(func(func()) {
			tid := unix.Gettid()
			tids = append(tids, tid)
			if nice := threadNice(t, tid); nice != BackgroundNice {
				t.Errorf("f ran at nice %d, want %d", nice, BackgroundNice)
			}
		})
	}
	if tids[0] == unix.Gettid() {
		t.Errorf("f ran on the caller's thread")
	}
	if tids[1] != tids[0] || tids[2] != tids[0] {
		t.Errorf("f ran on threads %v, want one", tids)
	}
}
