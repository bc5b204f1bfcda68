// Package threadcpu reads the CPU time of the calling OS thread. It is
// what the supervisor's storesync and a worker's configuration build
// measure their own work by: between two calls from a goroutine locked
// to its thread (runtime.LockOSThread), the difference is what that
// goroutine used, time spent waiting for a CPU left out. On a busy
// machine the wall clock of the same work is several times that.
//
// It imports only the standard library and golang.org/x/sys/unix; Now is
// safe for concurrent use and does not allocate.
package threadcpu

import (
	"time"

	"golang.org/x/sys/unix"
)

// Now is the CPU time the calling thread has used since it started, 0
// where the clock cannot be read. Only the difference between two calls
// on the same thread means anything.
func Now() time.Duration {
	var ts unix.Timespec
	if err := unix.ClockGettime(unix.CLOCK_THREAD_CPUTIME_ID, &ts); err != nil {
		return 0
	}
	return time.Duration(ts.Nano())
}
