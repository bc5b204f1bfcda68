package worker

// Procs is the GOMAXPROCS of a worker process, which the supervisor
// starts it with: one P for its event loop, one for everything else
// (control socket, upstream dials, ticker, the configuration's builds),
// and two so that the garbage collector's mark worker has a P of its own.
//
// All of a worker's threads share its CPU, so the Ps add no parallelism;
// what they change is how the runtime treats the loop. With
// a single P, sysmon takes the P from the loop whenever epoll_wait blocks
// across two of its ticks (20 µs and up) and hands it to another thread,
// and a goroutine woken by the netpoller waits for the loop to yield. With
// an idle second P, sysmon leaves a blocked loop its P, and a dial that
// completes is picked up at once. The loop yields every 5 ms
// (third_party/gnet) so that sysmon never sees it as a goroutine that
// hogs its P. Measured with two workers on two cores under load: 9-12 %
// less CPU per request than with GOMAXPROCS=1; with one worker, the same.
//
// The collector's background marking is 25 % of GOMAXPROCS. At 2 that is
// half a P, which the runtime serves with a fractional mark worker: it
// takes the next P that schedules, the loop's at one of its yields among
// them, and keeps it until it has had its share of the cycle so far. In a
// trace of a 5 000-route bulk load it held the loop's P for 4.5 ms, and
// with the mark termination after it the loop waited 6.3 ms; every slow
// request of the bulk load waited across a reload, that is, a build and
// its collection (bench admin: 13 of 13, 15 of 15, 18 of 18). At 4 it is
// one dedicated mark worker on a P of its own, the loop keeps its P
// (it still stops, as every goroutine does, while the collector scans its
// stack and for the cycle's two stop-the-world phases), and the kernel
// shares the CPU between their threads, the loop's preempting on its
// wake-up: in the same runs the slow requests left fell outside
// reloads, as many as nginx's beside the same load. The extra Ps stay
// idle between collections; the request path still makes no futex call.
//
// During a cycle the two Ps left idle are not: the collector wakes them
// for idle mark workers, so that up to three threads mark beside the
// loop's on its CPU (at 50 000 routes, a 150 MB heap, four mark workers
// ran at once in bench admin's trace of a bulk load, for cycles of 107
// and 129 ms). The loop's thread locked and at nice -5, above them, was
// tried: two workers on two CPUs beside their load generator (bench run
// -scenarios scaling, 3 rounds) served 70.1k requests a second at 9.4 µs
// of CPU each with it against 83.5k at 8.5 µs without, the loops taking
// the CPU the load generator needed, and the fewer slow requests it
// bought across a bulk load's reloads were not shown apart from the
// machine's noise. The other way round was tried too: the loop's thread
// locked (runtime.LockOSThread at its first tick) and left at the
// process's priority, every other thread of the worker under SCHED_IDLE,
// so that the build and the mark workers would use only the CPU the loop
// leaves, taking nothing from other processes. A locked loop gets its P
// back through another thread, at each yield, each preemption and each
// poll during a collection, and that thread was then a SCHED_IDLE one
// queued behind the build and the mark workers. bench admin (2 workers,
// 50 000 routes, a 400-route bulk at 2 000 req/s), worker 0's Go trace,
// the loop goroutine from runnable to running: 178 and 28 ms in all
// (longest 28 and 9.5 ms) with the others lowered, 31 and 25 ms (longest
// 3.3 and 6.6 ms) with the loop locked alone, 0.8 ms (longest 28 µs) with
// the loop neither locked nor raised, as it is.
const Procs = 4
