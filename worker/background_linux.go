package worker

import (
	"runtime"

	"golang.org/x/sys/unix"
)

// BackgroundNice is the nice value of the thread Background runs on: the
// event loop (nice 0) outweighs it about ten to one when both are
// runnable, and preempts it on waking, so a configuration build does not
// show in request latency; under full load the build still progresses.
const BackgroundNice = 10

// Background runs f on an OS thread of its own at BackgroundNice and
// returns when f does. It is for the work a worker does beside its loop on
// the loop's CPU: decoding a configuration and compiling its snapshot.
// The thread is not reused: the goroutine keeps it locked and the runtime
// ends it with the goroutine (or, for the main thread, parks it for good),
// so no other goroutine inherits its priority.
func Background(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with f
		// setpriority(PRIO_PROCESS, 0) is the calling thread on Linux.
		_ = unix.Setpriority(unix.PRIO_PROCESS, 0, BackgroundNice)
		f()
	}()
	<-done
}
