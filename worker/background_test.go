package worker

import (
	"context"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"coregate/internal/threadcpu"
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

// TestForeground: f runs on the caller's goroutine at the nice value it
// had, locked to its thread, which threadcpu.Now measures: a spin of 20 ms of
// CPU counts as at least that, and the yields pass.
func TestForeground(t *testing.T) {
	nice := threadNice(t, unix.Gettid())
	ran := false
	Foreground(func(yield func()) {
		ran = true
		tid := unix.Gettid()
		if n := threadNice(t, tid); n != nice || n == BackgroundNice {
			t.Errorf("f ran at nice %d, want the caller's %d", n, nice)
		}
		start := threadcpu.Now()
		deadline := time.Now().Add(10 * time.Second)
		for threadcpu.Now()-start < 20*time.Millisecond && time.Now().Before(deadline) {
			yield()
			if unix.Gettid() != tid {
				t.Fatal("f moved to another thread")
			}
		}
		if used := threadcpu.Now() - start; used < 20*time.Millisecond {
			t.Errorf("threadcpu.Now counted %v in 10 s of spinning", used)
		}
	})
	if !ran {
		t.Fatal("f did not run")
	}
}

// TestYieldLetsOthersRun: a goroutine waiting for the only P runs while f
// spins calling yield, within a few YieldEvery of f's CPU time, well
// before the runtime would preempt f (10 ms): yield reads the clock only
// every yieldClock calls, and still passes through the scheduler on time.
func TestYieldLetsOthersRun(t *testing.T) {
	prev := runtime.GOMAXPROCS(1)
	defer runtime.GOMAXPROCS(prev)
	for name, run := range map[string]func(func(func())){"Background": Background, "Foreground": Foreground} {
		var after time.Duration
		run(func(yield func()) {
			var ran atomic.Bool
			start := threadcpu.Now()
			go ran.Store(true)
			for !ran.Load() && threadcpu.Now()-start < time.Second {
				yield()
			}
			after = threadcpu.Now() - start
		})
		if after > 8*YieldEvery {
			t.Errorf("%s: a goroutine waiting for the P ran after %v of f's CPU time, want at most %v", name, after, 8*YieldEvery)
		}
	}
}

// threadsAt returns the threads of this process at nice value nice.
func threadsAt(t *testing.T, nice int) []int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	var tids []int
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/self/task/" + e.Name() + "/stat")
		if err != nil {
			continue // ended meanwhile
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
		if n, err := strconv.Atoi(f[19-3]); err == nil && n == nice {
			tids = append(tids, tid)
		}
	}
	return tids
}

// othersAt is threadsAt less the process's main thread, which a locked
// goroutine that ends on it leaves asleep for good (the runtime cannot end
// it), at whatever nice value it had.
func othersAt(t *testing.T, nice int) []int {
	t.Helper()
	var tids []int
	for _, tid := range threadsAt(t, nice) {
		if tid != os.Getpid() {
			tids = append(tids, tid)
		}
	}
	return tids
}

// TestLoopNice: a worker with a LoopNice runs its loop on one thread of
// its own at that nice value, which serves requests from it and ends with
// the loop (or, the main thread, sleeps for good), so that no other
// goroutine is left running at the loop's priority. The test asks for a
// value above its own (lower priority), which needs no privilege, and not
// BackgroundNice, the build thread's.
func TestLoopNice(t *testing.T) {
	nice := threadNice(t, unix.Gettid()) + 3
	if nice == BackgroundNice {
		nice++
	}
	if nice > 19 {
		t.Skipf("the test runs at nice %d: no value above it to ask for", nice-3)
	}
	if got := othersAt(t, nice); len(got) != 0 {
		t.Fatalf("threads %v already at nice %d", got, nice)
	}
	left := threadsAt(t, nice) // the main thread, where a loop before ended
	w, done := runWorker(t, Config{LoopNice: nice}, testSpec(t, nil))
	get := func(n int) {
		for i := range n {
			resp, err := http.Get("http://" + w.Addr().String() + "/none")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusNotFound {
				t.Fatalf("request %d: status %d, want 404 (no route)", i, resp.StatusCode)
			}
		}
	}
	get(1) // a loop's first tick may wait for its first connection
	select {
	case <-w.running:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not tick within 5 s")
	}
	loop := -1
	for _, tid := range threadsAt(t, nice) {
		if slices.Contains(left, tid) {
			continue
		}
		if loop >= 0 {
			t.Fatalf("threads %d and %d at nice %d, want the loop's alone", loop, tid, nice)
		}
		loop = tid
	}
	if loop < 0 {
		t.Fatalf("no thread at nice %d once the loop ticked", nice)
	}
	get(20)
	if got := threadsAt(t, nice); len(got) != len(left)+1 || !slices.Contains(got, loop) {
		t.Errorf("after 20 requests threads %v at nice %d, want the loop's %d (and %v)", got, nice, loop, left)
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the worker did not stop within 5 s")
	}
	deadline := time.Now().Add(5 * time.Second)
	for len(othersAt(t, nice)) != 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if got := othersAt(t, nice); len(got) != 0 {
		t.Errorf("threads %v still at nice %d after the loop ended, want none", got, nice)
	}
}
