package worker

import (
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

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

// TestBackground: f runs on a thread at BackgroundNice, and that thread
// does not outlive f to run other goroutines at that priority.
func TestBackground(t *testing.T) {
	var tid, nice int
	Background(func(func()) {
		tid = unix.Gettid()
		nice = threadNice(t, tid)
	})
	if nice != BackgroundNice {
		t.Errorf("f ran at nice %d, want %d", nice, BackgroundNice)
	}
	if tid == unix.Gettid() {
		t.Errorf("f ran on the caller's thread")
	}
	if tid == os.Getpid() {
		// the main thread: the runtime parks it for good instead of
		// ending it, so it runs nothing else either
		return
	}
	if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err == nil {
		// the runtime ends a locked thread when its goroutine exits, soon after
		for range 200 {
			if _, err := os.Stat("/proc/self/task/" + strconv.Itoa(tid)); err != nil {
				return
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Errorf("thread %d outlived f", tid)
	}
}
