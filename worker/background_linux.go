package worker

import (
	"runtime"
	"sync"
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
// worker's Ps (Procs): when it comes back from epoll_wait and
// its P was taken, it waits in the run queue. A build of 5 000 routes
// holds a P for about 60 ms, and the runtime preempts a goroutine only
// after 10 ms, so without the yields a request could wait that long;
// with them it waits at most about this long.
const YieldEvery = 500 * time.Microsecond

// Background runs f on the worker's build thread, an OS thread of its own
// at BackgroundNice, and returns when f does. It is for the work a worker
// does beside its loop on the loop's CPU: decoding a configuration and
// compiling its snapshot. f calls yield after each unit of work (an object
// decoded, a route compiled): once YieldEvery has passed since the last
// pass, yield lets the goroutines waiting for a P, the event loop first
// among them, run. Calls are served one at a time, in order.
//
// The build thread is started at the first call and kept: its goroutine
// is locked to it for good, so that no other goroutine ever runs at its
// priority, and a build does not start (and end) a thread of its own,
// which at the reload rate of a bulk load was dozens of threads a second.
func Background(f func(yield func())) {
	builder.once.Do(startBuilder)
	done := make(chan struct{})
	builder.work <- func() {
		defer close(done)
		f(yielder())
	}
	<-done
}

// yieldClock is how many calls of a yield pass between two reads of the
// clock: yield is called for each route, most of them taken over from the
// snapshot before in a few nanoseconds, where reading the clock for each
// was a sixth of the CPU of a change of one route at 50 000.
const yieldClock = 64

// yielder returns the yield of Background's and Foreground's f.
func yielder() func() {
	next, n := time.Now().Add(YieldEvery), 0
	return func() {
		if n++; n < yieldClock {
			return
		}
		n = 0
		if time.Now().After(next) {
			runtime.Gosched()
			next = time.Now().Add(YieldEvery)
		}
	}
}

// Foreground runs f as Background does, yield included, but on the
// calling goroutine, at the event loop's priority. It is for a build so
// small that waiting for the CPU at BackgroundNice would be most of its
// time: a change of a few objects costs a worker a few milliseconds of
// CPU, which a build thread ranked ten to one below every other process
// of a busy machine took hundreds of milliseconds of wall clock to get
// (a route changed at 50 000 routes: 50-360 ms, at a load of 8 on two
// cores). nginx and Envoy apply a configuration at their workers' own
// priority too. The yields still let the event loop have its P back
// within YieldEvery; the kernel shares the CPU between the two threads,
// the loop's preempting on its wake-up. f runs with its goroutine locked
// to its thread, so that internal/threadcpu measures it.
func Foreground(f func(yield func())) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	f(yielder())
}

// builder is the build thread's queue (see Background).
var builder struct {
	once sync.Once
	work chan func()
}

func startBuilder() {
	builder.work = make(chan func())
	go func() {
		runtime.LockOSThread() // never unlocked: the thread runs builds only
		// setpriority(PRIO_PROCESS, 0) is the calling thread on Linux.
		_ = unix.Setpriority(unix.PRIO_PROCESS, 0, BackgroundNice)
		for job := range builder.work {
			job()
		}
	}()
}
