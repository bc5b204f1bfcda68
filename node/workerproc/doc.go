// Package workerproc is a worker process of the node: one event loop
// (package worker) on the shared SO_REUSEPORT port, fed its configuration
// by the supervisor over a control socket (package control).
//
// The supervisor (package supervisor) starts a worker process as
//
//	coregate worker --id N --cpu C --selector KIND --bpf-fds K [--counters-fd F] [--metrics-fd M] [--tickets-fd T] [--takeover KEY] -c config.yaml
//
// with fd 3 the control socket (ControlFD), fds 4..4+K-1 the selector's
// objects (bpf.Selector.Files order) and fd F, when given, the node's
// shared counter table (shm), fd M the node's metrics segment
// (shm.MetricsMap), whose region N the worker writes. KEY names the node's
// takeover sockets (takeover.go): without it a worker whose supervisor is
// gone drains. cmd/coregate parses that command line into Options and
// calls Run.
//
// The worker listens only once its first configuration is built, says
// Ready, then reports its counters every control.StatsEvery for as long
// as its event loop turns (the supervisor's heartbeat), applies each
// Config or Delta beside the loop (worker.Background; a Delta of up to
// SmallDelta at the loop's priority, worker.Foreground) and acknowledges
// it with the build's time and CPU time, and drains on Drain, SIGTERM or
// SIGINT. Once configurations stop coming for 5 s, it hands the heap
// its builds left unused back to the system, when that is 32 MiB or more
// (memRelease: a large configuration's).
package workerproc
