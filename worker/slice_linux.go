package worker

import (
	"os"
	"strconv"
	"time"

	"golang.org/x/sys/unix"
)

// Slice is the time slice a worker process asks the kernel for on each of
// its threads (sched_attr.sched_runtime under SCHED_OTHER: EEVDF's custom
// slice, Linux 6.12 and later). It changes no thread's share of the CPU
// (that is its nice value's weight) but how soon it runs once woken: a
// task with a shorter slice has an earlier virtual deadline and preempts
// a running task whose slice is longer (the kernel's PREEMPT_SHORT), where
// with equal slices the woken one waits for the running one's slice to
// end, 0.7-3 ms by default. An event loop woken by a request needs the CPU
// for tens of microseconds; the threads it shares the CPU with at those
// times (the supervisor encoding a configuration, an embedded etcd
// committing it, the load generator of a benchmark) want it for
// milliseconds. A worker's other threads (its build thread at
// BackgroundNice, the collector's mark workers) get the slice too: the
// loop is not locked to a thread, and they share its CPU with it anyway.
const Slice = 100 * time.Microsecond

// SetSlice asks for Slice on every thread of this process; the threads
// made later inherit it from the one that makes them. It reports the
// first error (a kernel without custom slices ignores the field: no
// error, no effect).
func SetSlice() error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	var first error
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err == nil {
			a.Size = unix.SizeofSchedAttr
			a.Runtime = uint64(Slice)
			err = unix.SchedSetAttr(tid, a, 0)
		}
		if err != nil && err != unix.ESRCH && first == nil {
			first = err
		}
	}
	return first
}
