// Package supervisor runs the gateway's worker processes: one per configured
// CPU, each pinned to its CPU before exec, fed its configuration over a
// control socket, restarted with backoff when it dies, drained on SIGTERM.
//
// # Processes
//
// Supervisor.Run starts worker i as `EXE worker --id i --cpu C --selector
// KIND --mode M --bpf-fds K ARGS...` from a thread whose affinity is set to C
// for the fork, so every thread of the worker, the Go runtime's included,
// runs on C from its first instruction, with GOMAXPROCS=worker.Procs; the
// thread is the one the supervisor keeps at the nice value coregate started
// with (LowerPriority), its others run Nice below. The
// worker inherits fd 3, its end of a control socket (package control), and
// fds 4..4+K-1, the eBPF selector's objects in bpf.Selector.Files order. It
// gets a configuration before it listens, and says Ready once it does.
//
// The supervisor holds no listening socket of the SO_REUSEPORT group (a
// listener it never accepts on would cost CPU on every new connection, and
// it would tie the group to its UID): workers bind their own sockets; the
// eBPF selector the supervisor loads is what steers connections between
// them, and what moves a dying worker's queued connections to a live one.
//
// # Restarts
//
// A worker that exits while it should run is logged ("worker died", with
// its exit status and the error it reported over the control socket) and
// started again: at once the first time, then after 100 ms, doubling up to
// 30 s while it keeps dying within 30 s of its start, so that a worker that
// cannot start does not turn into a restart storm. The supervisor itself
// stays up. "worker respawned" logs respawn_ms, from the death to the new
// worker's Ready.
//
// # Stalled workers
//
// A worker's Stats frames (control.StatsEvery, 250 ms) are its heartbeat.
// They are sent by a goroutine of their own, not by the event loop (a
// write on the control socket is a blocking call the loop must not make),
// but only when the loop has ticked since the last one: a tick is a task
// the loop runs between two batches of events every 50 ms, so a loop that
// is merely busy keeps ticking and the worker keeps beating, while a
// stopped process (SIGSTOP, a frozen cgroup) sends nothing, and a loop
// stuck inside one event stops ticking and so stops the beats too.
//
// A ready worker silent for Options.StallAfter (1 s, four missed beats) is
// logged at WARN ("worker stalled: out of the selector"), shown as stalled
// in coregate_worker_state, counted in coregate_worker_stalls_total, and
// its socket is taken out of the eBPF selector's REUSEPORT_SOCKARRAY
// (bpf.Selector.Remove): from then on the program steers the connections
// it would have handed it to the next live worker, so a stopped worker
// black-holes new connections for about a second (its silence, plus up
// to 100 ms until the supervisor looks). When it speaks again it is sent
// Rejoin, puts the same socket back (bpf.Member.Rejoin) and is logged at
// WARN ("worker resumed: back in the selector"). A worker silent for
// Options.StallRestart (10 s, --stall-restart) is killed with SIGKILL and
// goes through the restart path above; so is a worker not ready within
// Options.StartTimeout (a minute, --start-timeout) of its start.
//
// Rolling restarts (SIGHUP with a changed config.yaml) replace a slot's
// ready process with a new one, which takes the slot when ready, the old
// one draining then. A slot whose new process is still starting is not
// given another: it is replaced in turn once ready, so that a burst of
// reloads starts one process at a time per slot.
//
// What the stopped worker already held cannot be moved while it is
// stopped: its established connections, and those that reached its accept
// queue before it left the selector, wait; a queue migrates only when its
// listener closes. They are served if it runs again, and when it is
// killed the kernel closes its listener and the SELECT_OR_MIGRATE program
// moves the queued connections to a live worker (its established ones are
// reset). Without the eBPF selector (classic BPF or the kernel's hash) a
// stalled worker cannot be taken out: it is logged and restarted after
// StallRestart only. A process that is replaced by a rolling restart
// while stalled has left its slot to its successor and is no longer
// watched.
//
// # When the supervisor dies
//
// Workers outlive their supervisor, as nginx's outlive their master: the
// supervisor holds the embedded etcd and is the node's largest process,
// the OOM killer's pick, and a SIGKILL or crash of it must not stop the
// traffic. A worker is started without a parent-death signal; when its
// control socket reaches end of file without a Drain it serves on with
// the configuration it holds, its counters and metrics in the same shared
// memory, its listener in the same eBPF selector, and waits to be taken
// over on an abstract Unix socket named by Options.Takeover (TakeoverKey:
// the config.yaml's path names the node), its slot and its pid.
//
// New looks for such workers (control.FindTakeover) before it makes
// anything: it connects to each (only to a socket of its own user), reads
// its Hello and the node's shared objects passed beside it, and takes the
// objects over (bpf.AdoptSelector, shm.Adopt, shm.AdoptMetrics) from the
// newest worker, all of them or none, so that counters, metrics and the
// selector go on where they were (limit-count admits its count across the
// restart, not twice it). Run then puts each worker in its slot, its
// configuration sent whole; one that runs another binary, read another
// config.yaml or is pinned to another CPU is replaced as a SIGHUP would
// replace it (it serves until its successor is ready, then drains), as is
// every worker when the objects could not be taken over (another selector
// mode, say), or one of other objects than those taken over. A slot whose
// worker died meanwhile is started again. Such a worker is not the new
// supervisor's child: its exit is seen on a pidfd, its status unknown, and
// its signals go through a pidfd too. No request is refused across a
// SIGKILL of the supervisor and its restart (TestSupervisorKilledUnderLoad).
//
// The TLS session ticket keys (shm.TicketSegment) are a third region: the
// supervisor makes TicketKeyCount random keys at start, rotates them every
// shm.TicketKeyRotation (checked each minute: a new key first, the oldest
// dropped), and every worker maps them read-only (--tickets-fd), so that a
// ticket one worker issued resumes on another and on one respawned. A
// supervisor that takes the workers over adopts the keys, and their
// rotation's schedule, with the other objects (shm.AdoptTicketKeys); where
// the workers have none, it makes new ones.
//
// Upstream health (APISIX's checks) is a fourth region (shm.Health): the
// supervisor runs one active prober per node of every upstream with
// checks (health.go: an HTTP(S) GET of http_path, or a TCP connect, every
// healthy.interval or unhealthy.interval, at most checks.active.concurrency
// of an upstream's probes at once), not one per worker, and keeps
// each node's state and lua-resty-healthcheck's counters there; every
// worker maps it read-write (--health-fd), skips the unhealthy nodes when
// it picks one (all of them are tried when none is healthy) and counts its
// traffic into the same counters (passive checks). A node's state flips
// are logged ("upstream node unhealthy", "upstream node healthy"), exported
// as apisix_upstream_status{name,ip,port}, and listed by Supervisor.Health
// in the shape of APISIX's Control API (/v1/healthcheck). A configuration
// that changes an upstream's checks starts its nodes again healthy. The
// supervisor alone claims and frees the region's slots (--health-slots of
// them, shm.DefaultHealthSlots unless set): a slot is claimed before the
// configuration that names its node is sent, and freed one configuration
// after the one that dropped the node, so that upstreams may come and go
// without end; workers only look their nodes up. Each push finds the
// checked upstreams from the last configuration's at the cost of what
// changed (checked.go: lists shared or compared as memory), not by a
// walk of every upstream, route and service. The
// region is not taken over by a later supervisor: workers it adopts keep
// their mapping, and their states stop changing until they are replaced.
//
// # Signals
//
// The context given to Run ending (SIGTERM, SIGINT in the command) drains
// every worker: each stops taking connections, serves what it accepted and
// what was queued, answers the next request on each kept-alive connection
// with Connection: close, closes connections quiet for 2 s cleanly and
// exits; at Options.DrainTimeout (plus 2 s) stragglers are killed. A
// replaced or retired worker drains the same way, and stops by itself at
// Options.DrainTimeout. SIGQUIT kills the
// workers at once (`coregate -s quit` sends SIGTERM and `-s stop` SIGQUIT:
// nginx's meanings of the names, on coregate's signals). SIGHUP calls the reload function given to Run, and starts
// or retires (gracefully) workers to match the worker count it returns.
// SIGUSR1 reopens the supervisor's error log (Options.ReopenLog, when
// nginx_config.error_log names a file) and is sent on to every ready
// worker, which reopens its access log and error log (nginx's reopen,
// after a rotation renamed the files).
//
// # Metrics
//
// The supervisor owns two shared-memory segments for its whole life, so
// that what the workers count outlives them: the counter table
// (limit-count's, shm.Segment) and the metrics segment
// (shm.MetricsSegment), one region per worker slot. A worker writes its
// slot's region: its plugins' series (plugins.Env.Metrics) and the node's
// counters (accepted and handled connections, requests) as it counts them.
// The export server (ServeMetrics) reads every region at scrape time and
// sums each series over them (series.go): a worker killed with SIGKILL
// loses nothing it counted, and the process respawned in its slot
// continues from its region. The connections open now still come from the
// running workers' reports over the control socket, since those of a dead
// worker are gone with it. The families are served under
// plugin_attr.prometheus's metric_prefix (SetMetricPrefix, which renames
// every apisix_ family at scrape time) with its extra labels
// (SetExtraLabels).
//
// # The status page
//
// The export server also serves /status (one HTML page, embedded, no
// external assets: its script fetches /status.json every second and
// redraws the tables, which the server renders too, for a browser without
// JavaScript) and /status.json (Status, stable field names). A goroutine
// of the supervisor's (statusSampler, status.go) samples, every
// StatusEvery while the pages are read, what the collectors read: each
// worker slot's counters in the metrics segment (requests, accepted
// connections: the selector's share), the open connections and
// heartbeats of the workers' reports, their processes' CPU time from
// /proc/<pid>/stat, the routes' series of the prometheus plugin (status
// by class, the request latency histogram: p99 over the last 10 s) and
// the health region's nodes; the rates are those between its last two
// samples, and a request serves the last Status made. A minute after the
// last read the sampler stops (a sample costs a microsecond or two per
// series); the next read takes a sample then, whose rates start again
// (interval_s 0 until the next). The workers do nothing for it. On an
// export address other than loopback both pages take one of the Admin
// API's keys (SetStatusKeys) as the Admin API takes a key, and answer 401
// without it.
//
// # The supervisor process
//
// Main is the supervisor process, `coregate` as cmd/coregate parses its
// command line (Command): it reads config.yaml, opens the configuration's
// source (a data plane's apisix.yaml, fileSource; or etcd, the node's
// embedded one unless deployment.etcd.host names a cluster, openEtcd, with
// the Admin API over it, serveAdmin), starts the export server and runs a
// Supervisor until SIGTERM or SIGINT; its reload function re-reads
// config.yaml. The Admin API's store (guardedStore) refuses changes while
// the node does not serve from etcd, and answers every call 503 at once
// while the node's watch has lost etcd (down, or a cluster without its
// quorum), where each would wait out deployment.etcd.timeout. First, before etcd or a port is opened, it takes the pid
// file (apisix.pid_file, node.CreatePIDFile): a second supervisor on the
// same configuration stops there; the file is removed at exit. Check is
// `coregate -t`: config.yaml, then a data plane's apisix.yaml or every
// object in etcd (checkEtcd, through storesync's Check: the embedded etcd
// the running node serves, or one started on its data directory for the
// check when the node is down). The worker processes it starts are
// package workerproc's.
//
// # Concurrency
//
// A Supervisor is driven by the goroutine that calls Run; New and Run must
// not be called concurrently. ServeMetrics reads only atomics (of the
// supervisor and of the shared segments) and state behind the supervisor's
// own mutexes, and may run beside Run; SetStatusKeys is called before it.
package supervisor
