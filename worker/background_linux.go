package worker

import (
	"runtime"
	"time"

	"golang.org/x/sys/unix"
)

// BackgroundNice is the nice value of the thread Background runs on: the
// event loop (nice 0) outweighs it about ten to one when both are
// runnable, and preempts it on waking, so a configuration build does not
// show in request latency; under full load the build still progresses.
const BackgroundNice = 10

// YieldEvery is the longest Background's f holds a P between two passes
// through the Go scheduler, where it calls yield. The nice value ranks
// threads for the kernel, but the event loop also needs one of the
// worker's Ps (GOMAXPROCS is 2): when it comes back from epoll_wait and
// its P was taken, it waits in the run queue. A build of 5 000 routes
// holds a P for about 60 ms, and the runtime preempts a goroutine only
// after 10 ms, so without the yields a request could wait that long;
// with them it waits at most about this long.
const YieldEvery = 500 * time.Microsecond

// Background runs f on an OS thread of its own at BackgroundNice and
// returns when f does. It is for the work a worker does beside its loop on
// the loop's CPU: decoding a configuration and compiling its snapshot. f
// calls yield after each unit of work (an object decoded, a route
// compiled): once YieldEvery has passed since the last pass, yield lets
// the goroutines waiting for a P, the event loop first among them, run.
// The thread is not reused: the goroutine keeps it locked and the runtime
// ends it with the goroutine (or, for the main thread, parks it for good),
// so no other goroutine inherits its priority.
func Background(f func(yield func())) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread() // never unlocked: the thread ends with f
		// setpriority(PRIO_PROCESS, 0) is the calling thread on Linux.
		_ = unix.Setpriority(unix.PRIO_PROCESS, 0, BackgroundNice)
		next := time.Now().Add(YieldEvery)
		f(func() {
			if time.Now().After(next) {
				runtime.Gosched()
				next = time.Now().Add(YieldEvery)
			}
		})
	}()
	<-done
}
