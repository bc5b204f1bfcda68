// Package soak runs the gateway for a long time, or through faults, and
// judges what it saw: the code behind `make soak` and `make chaos`.
//
// Both start the real bin/coregate as a child process with their own
// temporary config.yaml and apisix.yaml on free loopback ports, their own
// upstream (Upstream, run as a separate process so that it can be killed and
// restarted) and their own load: a fixed set of client slots, each a
// goroutine with a kept-alive connection, running a fixed mix of requests
// (Mix): kept-alive GETs, a GET on a fresh connection, four pipelined GETs,
// a GET of an unknown path (404), a 1 MiB upload and a 1 MiB download. The
// load first runs as a closed loop to find the maximum rate of that mix, then
// at a fixed share of it; latency is counted from when a request was due, so
// a stall is not hidden by the requests it delays (as wrk2 does).
//
// Soak: reloads (SIGHUP with a changed config.yaml) every 10 s, RSS and open
// file descriptors of the gateway's processes sampled every second, and a
// verdict (JudgeSoak) on RSS drift after warm-up, fd growth, 5xx answers and
// requests never answered, and p99 drift.
//
// Chaos: under steady load, one fault at a time (kill -9 of a worker,
// SIGSTOP of a worker for 5 s, 50 reloads in 10 s, the upstream killed and
// restarted, the upstream answering 503 for 5 s), every request kept as a
// Record; a Fault's Explains rule says which failed requests the fault
// accounts for, and Tabulate renders the table.
//
// Every process started is stopped by its PID when the run ends, fails or is
// interrupted (harness.StopAll); every loop is bounded in time.
package soak
