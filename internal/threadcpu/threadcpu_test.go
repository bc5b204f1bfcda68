package threadcpu

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// TestNowCountsTheThread: a spin of 20 ms of CPU on a locked thread
// counts as at least that, and another thread's spin while this one
// sleeps does not count: the clock is the thread's, not the process's.
func TestNowCountsTheThread(t *testing.T) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()

	start := Now()
	if start <= 0 {
		t.Fatalf("Now() = %v, want the thread's CPU time so far", start)
	}
	deadline := time.Now().Add(10 * time.Second)
	for Now()-start < 20*time.Millisecond && time.Now().Before(deadline) {
	}
	if used := Now() - start; used < 20*time.Millisecond {
		t.Fatalf("Now counted %v in 10 s of spinning", used)
	}

	// Another goroutine spins on another thread for 100 ms of wall clock
	// while this one sleeps.
	var stop atomic.Bool
	done := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		s := Now()
		for !stop.Load() {
		}
		done <- Now() - s
	}()
	start = Now()
	time.Sleep(100 * time.Millisecond)
	stop.Store(true)
	other := <-done
	if used := Now() - start; used > 20*time.Millisecond {
		t.Errorf("a sleeping thread counted %v while another spun for %v", used, other)
	}
	if other <= 0 {
		t.Errorf("the spinning thread counted %v", other)
	}
}
