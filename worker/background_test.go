package worker

import (
	"os"
	"runtime"
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
