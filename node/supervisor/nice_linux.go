package supervisor

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"sync"

	"golang.org/x/sys/unix"
)

// Nice is how many steps of nice value the supervisor's threads run below
// its workers (the kernel's weights: about ten to one when both want the
// same CPU), once LowerPriority is called, as a worker's build thread runs
// below its event loop (worker.BackgroundNice). When every CPU has a
// worker (placeSelf), the supervisor's work shares their CPUs: the Admin
// API, the embedded etcd committing a change, the store's watch decoding
// it and encoding the workers' deltas, the collector marking a heap of
// hundreds of MB at 50 000 routes. A bulk load of 400 routes cost it some
// 0.5 ms of CPU a route (0.2-0.4 ms since its store calls the embedded
// etcd in process and a build that only adds routes costs what it adds),
// more than the two CPUs of a small machine have idle while they serve,
// and at the workers' priority it took the CPU from
// their event loops and from the clients beside them for a slice at a
// time (bench admin at 50 000 routes, steady traffic's p99 during the
// load: 0.94-1.4 ms, median 1.2, against 0.53-1.00, median 0.58, with
// the supervisor's threads at Nice, runs of each in turn; nginx serving
// the same traffic beside the load: 0.83-2.1 against 0.80-0.91 ms). What
// is left of the tail comes from the kernel: on one without preemption
// (Dynamic Preempt: none) a thread in a system call keeps the CPU until
// it returns, whatever its nice value (bench/HISTORY.md).
// It still gets the CPU the workers leave, and a tenth of it under full
// load: an Admin API write then answers in milliseconds, a health check
// runs on time.
const Nice = 10

// spawner is the supervisor's one thread left at the workers' nice value
// when LowerPriority lowers the others: a worker process inherits the
// nice value of the thread that forks it, and a thread may raise its nice
// value but not lower it again without CAP_SYS_NICE. Every worker is
// started from it (startWorker). Its goroutine is locked to it for good,
// so that no other goroutine runs there; the threads the runtime makes
// for it while it waits in a system call are made by the runtime's
// template thread (a locked thread's state is never cloned), which is
// lowered with the others.
type spawner struct {
	work chan func()
	tid  int
}

var lowered struct {
	sync.Mutex
	sp   *spawner
	nice int // the supervisor's threads' nice value; the workers keep the process's
}

// LowerPriority sets every thread of this process but a spawner's to its
// nice value plus Nice (at most 19), and has workers started from the
// spawner at the nice value the process had. The runtime's threads made
// later inherit the nice value of the thread that makes them; the
// supervisor lowers again whatever thread it finds at another each time it
// places its threads (placeSelf). For the coregate process only: a test
// in the same process as its supervisor leaves it alone.
func LowerPriority() error {
	lowered.Lock()
	defer lowered.Unlock()
	if lowered.sp != nil {
		return nil
	}
	base, err := unix.Getpriority(unix.PRIO_PROCESS, unix.Gettid())
	if err != nil {
		return fmt.Errorf("supervisor: getpriority: %w", err)
	}
	base = 20 - base // the system call's answer is 20 - nice
	sp := &spawner{work: make(chan func())}
	ready := make(chan struct{})
	go func() {
		runtime.LockOSThread() // never unlocked: the thread is the spawner's
		sp.tid = unix.Gettid()
		close(ready)
		for f := range sp.work {
			f()
		}
	}()
	<-ready
	lowered.sp, lowered.nice = sp, min(base+Nice, 19)
	return lowerThreads(lowered.nice, sp.tid)
}

// relower sets the threads LowerPriority lowered, and those made since, to
// its nice value again; nothing when LowerPriority was not called.
func relower() error {
	lowered.Lock()
	defer lowered.Unlock()
	if lowered.sp == nil {
		return nil
	}
	return lowerThreads(lowered.nice, lowered.sp.tid)
}

// lowerThreads sets every thread of this process but keep to nice.
func lowerThreads(nice, keep int) error {
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		return err
	}
	for _, t := range tasks {
		tid, err := strconv.Atoi(t.Name())
		if err != nil || tid == keep {
			continue
		}
		if err := unix.Setpriority(unix.PRIO_PROCESS, tid, nice); err != nil && err != unix.ESRCH {
			return fmt.Errorf("supervisor: nice %d on thread %d: %w", nice, tid, err)
		}
	}
	return nil
}

// startWorker runs start (an exec.Cmd's Start) pinned to cpu (startPinned),
// on the spawner's thread when LowerPriority made one, so that the worker
// runs at the nice value the process had; on the calling goroutine's
// otherwise.
func startWorker(cpu int, start func() error) error {
	lowered.Lock()
	sp := lowered.sp
	lowered.Unlock()
	if sp == nil {
		return startPinned(cpu, start)
	}
	errc := make(chan error, 1)
	sp.work <- func() { errc <- startPinned(cpu, start) }
	return <-errc
}
