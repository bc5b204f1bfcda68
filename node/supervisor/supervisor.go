package supervisor

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"strconv"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sys/unix"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/bpf"
	"coregate/worker"
	"coregate/worker/control"
	"coregate/worker/shm"
)

// Reload is what the supervisor learns from config.yaml on SIGHUP.
type Reload struct {
	// Workers is worker_processes (0: auto, one per CPU: nodeconf.Workers).
	Workers int
	// Settings fingerprints every other setting a worker reads from
	// config.yaml: when it changes, the workers are replaced one by one
	// (the new one joins the slot, then the old one drains), so nothing is
	// refused or reset.
	Settings string
}

// Source is where the configuration comes from (the standalone file, etcd).
// One that has a method Started() is told, from Run's goroutine, once every
// worker of the start is ready (storesync.Syncer.Started).
type Source interface {
	// Load reads the configuration once.
	Load() (*spec.Spec, error)
	// Watch reports changes until ctx is done. onError reports a refused
	// configuration (the previous one stays).
	Watch(ctx context.Context, onChange func(*spec.Spec), onError func(error))
}

// Options configure a Supervisor.
type Options struct {
	// Exe is the binary workers run (`Exe worker --id N ...`); default the
	// running executable.
	Exe string
	// WorkerArgs are appended to each worker's command line (e.g. -c path).
	WorkerArgs []string
	// Workers is the number of worker processes; 0 means auto, one per
	// CPU of CPUs (nodeconf.Workers).
	Workers int
	// CPUs workers are pinned to, worker i on CPUs[i % len]; default the
	// process affinity mask.
	CPUs []int
	// Mode picks the eBPF selector's policy.
	Mode bpf.Mode
	// DrainTimeout bounds a graceful stop (default 10 s).
	DrainTimeout time.Duration
	// StallAfter is how long a running worker may be silent (no heartbeat,
	// control.StatsEvery) before it is taken out of the socket selector
	// (default DefaultStallAfter).
	StallAfter time.Duration
	// StallRestart is how long a worker may be silent before it is killed
	// and restarted (default DefaultStallRestart; at least StallAfter).
	StallRestart time.Duration
	// StartTimeout is how long a worker may take to get ready (its first
	// configuration built, its listener in its slot) before it is killed
	// and restarted (default DefaultStartTimeout).
	StartTimeout time.Duration
	Source       Source
	Log          *slog.Logger
	// Settings is the Reload.Settings of the config.yaml workers start
	// with.
	Settings string
	// Collectors are more of the node's metrics, served beside the
	// supervisor's own (the config store's, apisix_etcd_reachable).
	Collectors []prometheus.Collector
	// Counters is the size, in counters, of the node's shared counter
	// table (limit-count's policy "local"); 0 means shm.DefaultSlots.
	Counters int
	// HealthSlots is the size, in node slots, of the node's upstream
	// health region (shm.CreateHealth): how many nodes of checked
	// upstreams the configuration may hold; 0 means
	// shm.DefaultHealthSlots.
	HealthSlots int
	// Series bounds the metric series of each worker (prometheus's);
	// 0 means shm.DefaultSeries.
	Series int
	// Takeover is the node's key (TakeoverKey): workers whose supervisor
	// is gone wait to be taken over on sockets named by it, and New
	// takes over those a previous supervisor left. "" turns both off
	// (a worker then drains when its supervisor is gone).
	Takeover string
	// TrustedCAs are apisix.ssl.ssl_trusted_certificate's CAs
	// (nodeconf.TrustedCAs), which an https health probe's certificate is
	// verified against; nil: the system's.
	TrustedCAs *x509.CertPool
	// ReopenLog, when set, reopens the supervisor's own log on SIGUSR1,
	// before the workers are told to reopen theirs.
	ReopenLog func() error
}

// Supervisor owns the worker processes.
type Supervisor struct {
	opts    Options
	log     *slog.Logger
	sel     *bpf.Selector
	selKind string
	// counters is the node's counter table, which every worker maps: the
	// supervisor holds it for its whole life, so that counters outlive a
	// worker. nil when it could not be made (workers then count alone).
	counters *shm.Segment
	// series is the node's metrics segment, one region per worker slot,
	// held like counters; nil when it could not be made (workers then
	// count alone, and report their counters over the control socket).
	series *shm.MetricsSegment
	// tickets are the node's TLS session ticket keys, which every worker
	// maps and the supervisor rotates (rotateTickets), held like
	// counters; nil when they could not be made (each worker's are then
	// its own).
	tickets *shm.TicketSegment
	// health are the upstreams' active health checks, reporting into
	// the health region every worker maps (--health-fd); nil when the
	// region could not be made (no node is then checked).
	health *healthChecks
	// objects names the shared objects above (the selector's, the
	// counters', the metrics'): made with them, or taken over with them
	// from the workers a previous supervisor left (adoptObjects).
	objects string
	// orphans are those workers, found by New, put in their slots by Run.
	orphans []*orphan
	spec    *spec.Spec
	// current is spec, published for the Control API's goroutines
	// (ServeControl), which only read it.
	current atomic.Pointer[spec.Spec]
	// config is spec encoded as a Config payload, once, at the first
	// worker that needs it whole (wholeConfig), and sent as the same bytes
	// to every other. Replaced (never modified) with spec.
	config []byte
	// delta is spec as a Delta payload against deltaBase, the Spec the
	// workers were sent before it: encoded once, for the first worker
	// that holds deltaBase, and sent to the others that do.
	delta     []byte
	deltaBase *spec.Spec
	workers   []*proc
	events    chan event
	stopping  bool
	metrics   nodeMetrics
	// A reload pushed to the workers and not yet applied by all of them,
	// and the newest configuration that came meanwhile (pushed when they
	// have, or after maxHold).
	reload *pendingReload
	next   *spec.Spec
	// paced is when the next configuration may be pushed (see BuildGap);
	// pace fires then for one held back meanwhile.
	paced time.Time
	pace  *time.Timer
	// check fires at checkAt, when checkStalls or the held configuration
	// has something to decide (armCheck); checked is when it last fired,
	// checks how often (for tests).
	check            *time.Timer
	checkAt, checked time.Time
	checks           int
	// epoch is the origin of the heartbeat times (monotonic).
	epoch time.Time
	// metricPrefix replaces apisix_ in the served metric names
	// (SetMetricPrefix); nil keeps it.
	metricPrefix atomic.Pointer[string]
	// extra are the plugin families' extra labels (SetExtraLabels).
	extra atomic.Pointer[map[string][]string]
	// allowed is this process's CPU affinity at start; placed, the CPUs
	// its own threads were last confined to (placeSelf).
	allowed []int
	placed  string
	// statusKeys are the SHA-256 of the keys the status pages take on
	// an export address other than loopback (SetStatusKeys).
	statusKeys [][sha256.Size]byte
	// startedTold: the Source was told every worker of the start is
	// ready (Source).
	startedTold bool
}

type pendingReload struct {
	routes  int
	start   time.Time
	build   time.Duration // the slowest worker's decode and compile
	refused int           // workers that answered with an error
	bytes   int           // the largest payload sent (a Delta is small)
	err     string        // the first of those errors
	// buildCPU is the most CPU time a worker's decode and compile took
	// (AppliedMsg.BuildCPUUS), and gcCPU the most collector's CPU time a
	// worker said its garbage costs (AppliedMsg.GCCPUUS): what the pace
	// is made of; 0 when no worker said (one built before it was
	// reported): build then. garbage is the most a worker's build
	// allocated.
	buildCPU time.Duration
	gcCPU    time.Duration
	garbage  uint64
}

// proc is one worker slot and the process currently in it.
type proc struct {
	id  int
	cpu int
	// ps is the current process: one this supervisor started, or one a
	// previous supervisor of the node started and this one took over
	// (adopt). nil while the slot has none.
	ps       *os.Process
	ctrl     *control.Conn
	pid      int
	ready    bool
	retired  bool // removed by a smaller worker_processes; not restarted
	started  time.Time
	diedAt   time.Time
	backoff  time.Duration
	restarts int
	fatal    string // the error the current process reported before exiting
	// beat is when the current process last spoke (Ready or Stats), as
	// time since Supervisor.epoch; its control reader stores it.
	beat *atomic.Int64
	// stalled: the current process missed its heartbeats and is out of
	// the selector since stalledAt (its last beat); killed: it stayed
	// silent past StallRestart and was sent SIGKILL.
	stalled, killed bool
	stalledAt       time.Duration
	// Configurations sent to the current process and its Applied answers
	// (a worker answers each Config and Delta, in order).
	sent, acked int
	// base is the Spec last sent to the current process, which the next
	// one may be sent as a Delta against; nil for a new process, or one
	// that asked for the whole configuration (AppliedMsg.Resync).
	base *spec.Spec
	// prev holds the processes this slot had before rolling restarts:
	// they serve until the newest one is ready, then drain.
	prev []*oldProc
	// rollAgain: config.yaml changed again while the current process was
	// starting; it is replaced in turn once it is ready, so that a slot
	// starts one process at a time however fast reloads come.
	rollAgain bool
}

type oldProc struct {
	ps      *os.Process
	ctrl    *control.Conn
	pid     int
	drained bool
}

type event struct {
	p    *proc
	pid  int
	kind int // evExit, evReady, evApplied, evRestart
	err  error
	msg  []byte
}

const (
	evExit = iota
	evReady
	evApplied
	evRestart
	evFatal
)

// New prepares a supervisor: it loads the selector (or finds the best
// fallback) and the first configuration.
func New(opts Options) (*Supervisor, error) {
	if opts.Log == nil {
		opts.Log = slog.Default()
	}
	if opts.Exe == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, err
		}
		opts.Exe = exe
	}
	allowed, err := AllowedCPUs()
	if err != nil {
		return nil, err
	}
	if len(opts.CPUs) == 0 {
		opts.CPUs = allowed
	}
	opts.Workers = nodeconf.Workers(opts.Workers, len(opts.CPUs))
	if opts.DrainTimeout <= 0 {
		opts.DrainTimeout = 10 * time.Second
	}
	if opts.StallAfter <= 0 {
		opts.StallAfter = DefaultStallAfter
	}
	if opts.StallRestart <= 0 {
		opts.StallRestart = DefaultStallRestart
	}
	opts.StallRestart = max(opts.StallRestart, opts.StallAfter)
	if opts.StartTimeout <= 0 {
		opts.StartTimeout = DefaultStartTimeout
	}
	s := &Supervisor{opts: opts, log: opts.Log, events: make(chan event, 64), epoch: time.Now(), allowed: allowed}
	sp, err := opts.Source.Load()
	if err != nil {
		return nil, err
	}
	if err := s.createHealth(); err != nil {
		return nil, err
	}
	s.setSpec(sp)
	if _, err := s.wholeConfig(); err != nil { // every worker starts with it
		return nil, err
	}
	s.orphans = s.findOrphans()
	if s.adoptObjects(s.orphans) {
		return s, nil
	}
	s.objects = newObjectsID()
	// Room for worker_processes to grow on SIGHUP without a restart.
	slots := max(opts.Workers, len(opts.CPUs), minSlots)
	s.openSelector(slots)
	if s.series, err = shm.CreateMetrics(slots, opts.Series); err != nil {
		if errors.Is(err, shm.ErrSize) {
			return nil, err
		}
		s.log.Error("shared metrics unavailable: each worker counts alone", "err", err)
	}
	if s.counters, err = shm.Create(opts.Counters); err != nil {
		if errors.Is(err, shm.ErrSize) {
			return nil, err
		}
		s.log.Error("shared counters unavailable: each worker counts alone", "err", err)
	}
	s.createTickets()
	return s, nil
}

// createHealth makes the node's health region and its checks. It fails
// only for a size out of range.
func (s *Supervisor) createHealth() error {
	seg, err := shm.CreateHealth(s.opts.HealthSlots)
	if err != nil {
		if errors.Is(err, shm.ErrSize) {
			return err
		}
		s.log.Error("shared upstream health unavailable: upstream checks are not run", "err", err)
		return nil
	}
	s.health = newHealthChecks(seg, s.log)
	s.health.roots = s.opts.TrustedCAs
	return nil
}

// createTickets makes the node's TLS session ticket keys.
func (s *Supervisor) createTickets() {
	var err error
	if s.tickets, err = shm.CreateTicketKeys(); err != nil {
		s.log.Error("shared TLS session ticket keys unavailable: each worker's are its own", "err", err)
	}
}

// rotateTickets rotates the session ticket keys once they are
// shm.TicketKeyRotation old, a predecessor's schedule kept.
func (s *Supervisor) rotateTickets() {
	if s.tickets == nil {
		return
	}
	if rotated, err := s.tickets.RotateDue(time.Now()); err != nil {
		s.log.Error("TLS session ticket keys not rotated", "err", err)
	} else if rotated {
		s.log.Info("TLS session ticket keys rotated", "gen", s.tickets.Gen())
	}
}

// minSlots is the least number of selector slots: a SIGHUP may raise
// worker_processes up to it (or to the number of CPUs, if more).
const minSlots = 64

func (s *Supervisor) openSelector(slots int) {
	sel, err := bpf.NewSelector(s.opts.Mode, slots, s.opts.CPUs)
	if err == nil {
		s.sel = sel
		s.selKind = bpf.KindEBPF.String()
		s.log.Info("socket selector", "kind", s.selKind, "mode", s.opts.Mode.String(), "slots", slots)
		return
	}
	kind, perr := bpf.Probe()
	if perr != nil {
		kind = bpf.KindPlain
	}
	if kind == bpf.KindEBPF {
		// eBPF can be used but the selector could not be made: fall back.
		kind = bpf.KindCBPF
	}
	if kind == bpf.KindKernelHash || kind == bpf.KindPlain {
		if ok, _ := bpf.EnableMigrateSysctl(); ok {
			kind = bpf.KindKernelHash
		}
	}
	s.selKind = kind.String()
	s.log.Warn("eBPF socket selector unavailable, using a fallback", "err", err, "kind", s.selKind)
}

// WatchStopWait bounds how long Run, as it returns, waits for the
// Source's Watch to end (and the store's sync to write its local copy).
const WatchStopWait = 5 * time.Second

// Run starts the workers and supervises them until ctx is done (graceful
// stop) or a SIGQUIT (immediate stop). SIGHUP calls reload. It returns
// once the Source's Watch has too, or after WatchStopWait.
func (s *Supervisor) Run(ctx context.Context, reload func() (Reload, error)) error {
	defer func() {
		if s.sel != nil {
			_ = s.sel.Close()
		}
		if s.counters != nil {
			_ = s.counters.Close() // the workers keep their own mappings
		}
		if s.health != nil {
			s.health.stop() // the region stays mapped: Health may still read it
		}
		// s.series stays mapped: a scrape may still be reading it.
	}()
	sigs := make(chan os.Signal, 4)
	signalNotify(sigs)
	defer signalStop(sigs)

	wctx, cancelWatch := context.WithCancel(context.Background())
	watched := make(chan struct{})
	defer func() {
		// The store's watch writes the local copy of the last
		// configuration as it returns: a node stopped within a second of
		// a change (the copy is written at most once per
		// storesync.CacheEvery) left a copy behind the store, which its
		// next start then could not serve at once.
		cancelWatch()
		t := time.NewTimer(WatchStopWait)
		defer t.Stop()
		select {
		case <-watched:
		case <-t.C:
			s.log.Warn("config watch not ended: stopping without it", "waited", WatchStopWait)
		}
	}()
	specs := make(chan *spec.Spec, 1)
	go func() {
		defer close(watched)
		s.opts.Source.Watch(wctx, func(sp *spec.Spec) {
			select {
			case <-specs:
			default:
			}
			specs <- sp
		}, func(err error) {
			s.log.Error("config refused, the previous one keeps serving", "err", err)
		})
	}()

	s.takeOver(s.orphans)
	s.orphans = nil
	s.resize(s.opts.Workers)
	s.countLive()
	s.check = time.NewTimer(time.Hour)
	s.check.Stop()
	defer s.check.Stop()
	s.pace = time.NewTimer(time.Hour)
	s.pace.Stop()
	defer s.pace.Stop()
	tickets := time.NewTicker(time.Minute)
	defer tickets.Stop()
	for {
		s.armCheck()
		select {
		case <-s.check.C:
			s.checkAt, s.checked = time.Time{}, time.Now()
			s.checks++
			s.checkStalls()
			if s.next != nil && s.reload != nil && time.Since(s.reload.start) >= maxHold {
				s.pushNext()
			}
		case <-s.pace.C:
			if s.next != nil && s.reload == nil {
				s.pushNext()
			}
		case <-tickets.C:
			s.rotateTickets()
		case <-ctx.Done():
			return s.drainAll()
		case sig := <-sigs:
			switch sig {
			case syscall.SIGQUIT:
				s.log.Warn("SIGQUIT: stopping now")
				s.killAll()
				return nil
			case syscall.SIGUSR1:
				if s.opts.ReopenLog != nil {
					if err := s.opts.ReopenLog(); err != nil {
						s.log.Error("SIGUSR1: the error log not reopened", "err", err)
					}
				}
				s.log.Info("SIGUSR1: the workers reopen their logs")
				s.signalAll(syscall.SIGUSR1)
			case syscall.SIGHUP:
				if reload == nil {
					continue
				}
				r, err := reload()
				if err != nil {
					s.log.Error("SIGHUP: config.yaml refused", "err", err)
					continue
				}
				roll := r.Settings != s.opts.Settings
				s.log.Info("SIGHUP: config.yaml reloaded", "workers", r.Workers, "settings_changed", roll)
				s.opts.Settings = r.Settings
				if roll {
					s.roll()
				}
				s.resize(r.Workers)
			}
		case sp := <-specs:
			if sp.Hash != ([32]byte{}) && sp.Hash == s.spec.Hash {
				continue // the watcher's first look: what the workers have
			}
			if s.reload != nil && time.Since(s.reload.start) < maxHold {
				// the workers are still building the last one: the newest
				// waits for them, and one it replaces is never built
				s.next = sp
				continue
			}
			if wait := time.Until(s.paced); s.reload == nil && wait > 0 {
				// they built the last one moments ago: the newest waits
				// for the pace, with whatever else comes meanwhile
				s.next = sp
				s.pace.Reset(wait)
				continue
			}
			s.push(sp)
		case ev := <-s.events:
			s.handle(ev)
		}
		s.countLive()
	}
}

// allReady reports whether every worker slot holds a ready process.
func (s *Supervisor) allReady() bool {
	for _, p := range s.workers {
		if !p.ready {
			return false
		}
	}
	return true
}

// roll replaces every running worker with a new process that reads the
// current config.yaml. The new process joins the same selector slot (taking
// the slot's new connections at once); the old one drains when the new one
// is ready, so capacity never dips and nothing queued is reset.
//
// A slot whose current process is still starting is replaced once that
// process is ready (rollAgain), not at once: reloads that come faster than
// a worker starts would otherwise pile up processes that never get ready,
// each starting on the slot's CPU beside the others, and keep the old
// process serving alone until the reloads stop.
func (s *Supervisor) roll() {
	for _, p := range s.workers {
		if p.ps == nil || p.retired {
			continue // a dead slot's next process reads the new config.yaml
		}
		if !p.ready {
			p.rollAgain = true
			continue
		}
		s.rollSlot(p)
	}
}

// rollSlot replaces the slot's ready process with a new one. The old one
// leaves the slot's current process for prev at once: if the new one
// cannot start (the binary gone in the middle of an upgrade, no file
// descriptors left), the restart path tries again with backoff, as for a
// dead worker, while the old one serves on.
func (s *Supervisor) rollSlot(p *proc) {
	p.prev = append(p.prev, &oldProc{ps: p.ps, ctrl: p.ctrl, pid: p.pid})
	p.ps, p.ctrl, p.pid = nil, nil, 0
	p.diedAt = time.Time{}
	s.spawn(p)
}

// drainOld sends the replaced processes of a slot their Drain.
func (s *Supervisor) drainOld(p *proc) {
	for _, o := range p.prev {
		if !o.drained && o.ctrl != nil {
			o.drained = true
			_ = o.ctrl.Send(control.Drain, control.DrainMsg{TimeoutMS: s.opts.DrainTimeout.Milliseconds()})
		}
	}
}

// oldExited forgets a replaced process that exited; false if pid is none.
func (s *Supervisor) oldExited(p *proc, pid int) (*oldProc, bool) {
	for i, o := range p.prev {
		if o.pid == pid {
			if o.ctrl != nil {
				_ = o.ctrl.Close()
			}
			p.prev = append(p.prev[:i], p.prev[i+1:]...)
			return o, true
		}
	}
	return nil, false
}

// resize starts or retires workers to have n.
func (s *Supervisor) resize(n int) {
	n = nodeconf.Workers(n, len(s.opts.CPUs))
	if s.sel != nil && n > s.sel.Slots() {
		s.log.Error("more workers than selector slots: restart the gateway to apply", "workers", n, "slots", s.sel.Slots())
		n = s.sel.Slots()
	}
	for len(s.workers) < n {
		id := len(s.workers)
		p := &proc{id: id, cpu: s.opts.CPUs[id%len(s.opts.CPUs)]}
		s.workers = append(s.workers, p)
		s.spawn(p)
	}
	for len(s.workers) > n {
		p := s.workers[len(s.workers)-1]
		s.workers = s.workers[:len(s.workers)-1]
		p.retired = true
		s.drain(p)
		s.drainOld(p) // processes it was rolling from, if its new one is not ready yet
	}
	if s.sel != nil {
		if err := s.sel.SetLive(n); err != nil {
			s.log.Error("selector: set live workers", "err", err)
		}
	}
	s.placeSelf()
}

// placeSelf confines the supervisor's own threads (the Admin API, the
// embedded etcd, the configuration watch and its encoding, metrics) to
// the CPUs of its affinity that no worker is pinned to, so that a burst of
// configuration changes does not take CPU time from a worker's event
// loop. When every CPU has a worker, the supervisor keeps them all, as
// nginx's master shares the workers' cores, below the workers' priority
// (Nice, once LowerPriority was called): its threads made since the last
// placing are lowered too.
func (s *Supervisor) placeSelf() {
	if err := relower(); err != nil {
		s.log.Warn("supervisor: cannot lower its threads' priority", "err", err)
	}
	if len(s.allowed) == 0 {
		return
	}
	used := map[int]bool{}
	for _, p := range s.workers {
		used[p.cpu] = true
	}
	var spare []int
	for _, c := range s.allowed {
		if !used[c] {
			spare = append(spare, c)
		}
	}
	if len(spare) == 0 {
		spare = s.allowed
	}
	list := FormatCPUList(spare)
	if err := PinAllThreadsTo(spare); err != nil {
		s.log.Warn("supervisor: cannot confine its threads", "cpus", list, "err", err)
		return
	}
	if list != s.placed {
		s.placed = list
		s.log.Info("supervisor threads placed", "cpus", list)
	}
}

func (s *Supervisor) spawn(p *proc) {
	// A failed start counts as a start for the backoff.
	p.started = time.Now()
	p.rollAgain = false // the new process reads the current config.yaml
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		s.log.Error("worker: control socket", "id", p.id, "err", err)
		s.scheduleRestart(p)
		return
	}
	parent := os.NewFile(uintptr(fds[0]), "control-parent")
	child := os.NewFile(uintptr(fds[1]), "control-child")
	var selFiles []*os.File
	if s.sel != nil {
		selFiles = s.sel.Files()
	}
	args := []string{"worker", "--id", strconv.Itoa(p.id), "--cpu", strconv.Itoa(p.cpu),
		"--selector", s.selKind, "--mode", s.opts.Mode.String(), "--bpf-fds", strconv.Itoa(len(selFiles))}
	files := append([]*os.File{child}, selFiles...)
	if s.opts.Takeover != "" {
		args = append(args, "--takeover", s.opts.Takeover, "--objects", s.objects)
	}
	if s.counters != nil {
		// The child's fd: ExtraFiles start at 3.
		args = append(args, "--counters-fd", strconv.Itoa(3+len(files)))
		files = append(files, s.counters.File())
	}
	if s.series != nil && p.id < s.series.Regions() {
		args = append(args, "--metrics-fd", strconv.Itoa(3+len(files)))
		files = append(files, s.series.File())
	}
	if s.tickets != nil {
		args = append(args, "--tickets-fd", strconv.Itoa(3+len(files)))
		files = append(files, s.tickets.File())
	}
	if s.health != nil {
		args = append(args, "--health-fd", strconv.Itoa(3+len(files)))
		files = append(files, s.health.seg.File())
	}
	cmd := exec.Command(s.opts.Exe, append(args, s.opts.WorkerArgs...)...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	cmd.ExtraFiles = files
	cmd.Env = append(os.Environ(), "GOMAXPROCS="+strconv.Itoa(worker.Procs))
	// No Pdeathsig: a worker outlives its supervisor, serving with the
	// configuration it holds until the next one takes it over (adopt).
	err = startWorker(p.cpu, cmd.Start)
	// a thread the runtime made while the starting one was pinned to
	// p.cpu inherited that mask
	s.placeSelf()
	_ = child.Close()
	if err != nil {
		_ = parent.Close()
		s.log.Error("worker: start", "id", p.id, "err", err)
		s.scheduleRestart(p)
		return
	}
	nc, err := net.FileConn(parent)
	_ = parent.Close()
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		s.log.Error("worker: control socket", "id", p.id, "err", err)
		s.scheduleRestart(p)
		return
	}
	p.ps, p.pid, p.ready, p.started = cmd.Process, cmd.Process.Pid, false, time.Now()
	p.ctrl, p.fatal, p.sent, p.acked, p.base = control.New(nc), "", 0, 0, nil
	p.beat, p.stalled, p.killed = new(atomic.Int64), false, false
	p.beat.Store(int64(time.Since(s.epoch)))
	s.metrics.setState(p.id, stateStarting)
	s.metrics.setProc(p.id, p.pid, p.beat)
	s.sendConfig(p)
	s.watch(p, p.ctrl, p.pid, p.beat, cmd.Wait)
}

// watch reads the control socket ctrl of the process pid of slot p and
// reports its exit, which wait waits for.
func (s *Supervisor) watch(p *proc, ctrl *control.Conn, pid int, beat *atomic.Int64, wait func() error) {
	readDone := make(chan struct{})
	go s.readControl(p, ctrl, pid, beat, readDone)
	go func(pid int) {
		err := wait()
		// The worker's last frames (Fatal) come before its exit.
		select {
		case <-readDone:
		case <-time.After(time.Second):
		}
		s.events <- event{p: p, pid: pid, kind: evExit, err: err}
	}(pid)
}

func (s *Supervisor) readControl(p *proc, c *control.Conn, pid int, beat *atomic.Int64, done chan<- struct{}) {
	defer close(done)
	defer s.metrics.exited(pid)
	for {
		t, payload, err := c.Recv()
		if err != nil {
			return
		}
		if t == control.Stats || t == control.Ready {
			beat.Store(int64(time.Since(s.epoch)))
		}
		switch t {
		case control.Stats:
			var m control.StatsMsg
			if json.Unmarshal(payload, &m) == nil {
				s.metrics.report(p.id, pid, m)
			}
		case control.Ready:
			s.events <- event{p: p, pid: pid, kind: evReady, msg: payload}
		case control.Applied:
			s.events <- event{p: p, pid: pid, kind: evApplied, msg: payload}
		case control.Fatal:
			s.events <- event{p: p, pid: pid, kind: evFatal, msg: payload}
		}
	}
}

// BuildGap and BuildBurst pace the configurations pushed in a burst of
// changes. Each build the workers report (the most CPU time one of them
// spent on it, and the most CPU time its garbage costs a worker's
// collector: a route changed at 50 000 routes, 5 ms and 12 ms for 3 MB)
// moves the earliest time of
// the next push on by BuildGap times its length, from no earlier than
// BuildBurst ago. A worker builds
// beside its event loop on the same CPU, so a long burst (a bulk load
// through the Admin API) takes at most about a fifth of that CPU for
// builds, whatever the configuration's size, while changes that come one
// at a time, or a short burst of them, go out at once: a change after a
// quiet BuildBurst waits only if the one before it cost more than
// BuildBurst/BuildGap of CPU. The pace is made of CPU time, not of the
// build's wall clock, which on a busy machine is mostly time the build
// thread waited for the CPU (BackgroundNice): paced by it, a change of
// one route at 50 000 held the next one back for up to a second.
// BuildBurst is short for the same reason as storesync's credit: a longer
// one lets a bulk load through the Admin API push more builds, not a
// lone change go sooner.
const (
	BuildGap   = 4
	BuildBurst = 60 * time.Millisecond
)

// paceBy is the build the pace moves on by: its CPU time and the
// collector's CPU time its garbage costs, or its wall clock from workers
// that did not report those.
func (r *pendingReload) paceBy() time.Duration {
	if r.buildCPU > 0 {
		return r.buildCPU + r.gcCPU
	}
	return r.build
}

// nextPace is when the next configuration may be pushed after a build of
// b applied at now, the earliest having been paced.
func nextPace(paced, now time.Time, b time.Duration) time.Time {
	if floor := now.Add(-BuildBurst); paced.Before(floor) {
		paced = floor
	}
	return paced.Add(BuildGap * b)
}

// maxHold bounds how long a new configuration waits for the workers to
// answer the previous one (a worker that stopped answering does not hold
// the others' configuration back for longer).
const maxHold = 2 * time.Second

// push sends sp to every worker, encoded once per form. A configuration
// held back for the pace or for the workers' answers (s.next) is older
// than sp and is dropped: pushed after it, it would take back the changes
// sp carries.
func (s *Supervisor) push(sp *spec.Spec) {
	s.next = nil
	s.setSpec(sp)
	r := &pendingReload{routes: len(sp.Routes), start: time.Now()}
	for _, p := range s.workers {
		r.bytes = max(r.bytes, s.sendConfig(p))
	}
	s.reload = r
	s.checkReload()
}

// pushNext pushes the configuration held back while the workers built the
// previous one.
func (s *Supervisor) pushNext() {
	sp := s.next
	s.next = nil
	if sp.Hash != ([32]byte{}) && sp.Hash == s.spec.Hash {
		return
	}
	s.push(sp)
}

// checkReload logs a pending reload once every running worker has answered
// every configuration sent to it, and pushes the one held back meanwhile.
func (s *Supervisor) checkReload() {
	r := s.reload
	if r == nil {
		return
	}
	n := 0
	for _, p := range s.workers {
		if p.ps == nil || p.ctrl == nil {
			continue
		}
		if p.acked < p.sent {
			return
		}
		n++
	}
	s.reload = nil
	s.paced = nextPace(s.paced, time.Now(), r.paceBy())
	took := time.Since(r.start).Round(time.Microsecond).String()
	if r.refused > 0 {
		s.log.Error("config reload refused by workers", "routes", r.routes, "workers", n, "refused", r.refused, "took", took, "err", r.err)
	} else {
		s.log.Info("config reloaded", "routes", r.routes, "workers", n, "took", took, "build", r.build.String(), "bytes", r.bytes,
			"build_cpu", r.buildCPU.String(), "gc_cpu", r.gcCPU.String(), "garbage", r.garbage)
	}
	if s.next != nil {
		if wait := time.Until(s.paced); wait > 0 {
			s.pace.Reset(wait)
		} else {
			s.pushNext()
		}
	}
}

// setSpec makes sp the configuration sent to workers.
func (s *Supervisor) setSpec(sp *spec.Spec) {
	s.spec, s.config, s.delta, s.deltaBase = sp, nil, nil, nil
	s.current.Store(sp)
	if s.health != nil {
		s.health.update(sp)
	}
}

// wholeConfig returns the configuration as a Config payload, encoding it
// the first time. Workers that hold the previous one get a Delta, so
// during a burst of changes the whole configuration (some 8 ms of
// encoding for 5 000 routes) is encoded only for a worker that starts.
func (s *Supervisor) wholeConfig() ([]byte, error) {
	if s.config == nil {
		b, err := control.EncodeSpec(s.spec)
		if err != nil {
			return nil, err
		}
		s.config = b
	}
	return s.config, nil
}

// sendConfig sends the configuration to p: as a Delta against the last
// one p was sent when that pays (control.EncodeDelta), whole otherwise.
// It returns the payload's size (0 if nothing was sent).
func (s *Supervisor) sendConfig(p *proc) int {
	if p.ctrl == nil {
		return 0
	}
	t, payload := control.Config, []byte(nil)
	if p.base != nil {
		if p.base != s.deltaBase {
			d, ok, err := control.EncodeDelta(p.base, s.spec)
			if err != nil {
				s.log.Warn("worker: config delta, sending it whole", "err", err)
			}
			if !ok {
				d = nil
			}
			s.delta, s.deltaBase = d, p.base
		}
		if s.delta != nil {
			t, payload = control.Delta, s.delta
		}
	}
	if payload == nil {
		var err error
		if payload, err = s.wholeConfig(); err != nil {
			s.log.Error("worker: config refused, its previous one keeps serving", "id", p.id, "pid", p.pid, "err", err)
			return 0
		}
	}
	if err := p.ctrl.SendPayload(t, payload); err != nil {
		s.log.Warn("worker: send config", "id", p.id, "pid", p.pid, "err", err)
		p.base = nil
		return 0
	}
	p.base = s.spec
	p.sent++
	return len(payload)
}

func (s *Supervisor) handle(ev event) {
	p := ev.p
	switch ev.kind {
	case evReady:
		if ev.pid != p.pid {
			return
		}
		p.ready = true
		s.metrics.setState(p.id, stateRunning)
		switch {
		case len(p.prev) > 0:
			s.log.Info("worker replaced", "id", p.id, "pid", p.pid, "cpu", p.cpu)
			s.drainOld(p)
		case !p.diedAt.IsZero():
			s.log.Info("worker respawned", "id", p.id, "pid", p.pid, "cpu", p.cpu,
				"respawn_ms", float64(time.Since(p.diedAt).Microseconds())/1000)
			p.diedAt = time.Time{}
		default:
			s.log.Info("worker ready", "id", p.id, "pid", p.pid, "cpu", p.cpu)
		}
		if !s.startedTold && s.allReady() {
			s.startedTold = true
			if st, ok := s.opts.Source.(interface{ Started() }); ok {
				st.Started()
			}
		}
		if p.rollAgain && !s.stopping && !p.retired {
			// config.yaml changed while it started
			s.rollSlot(p)
		}
	case evApplied:
		if ev.pid != p.pid {
			return
		}
		p.acked++
		var m control.AppliedMsg
		if json.Unmarshal(ev.msg, &m) == nil && s.reload != nil {
			s.reload.build = max(s.reload.build, time.Duration(m.BuildUS)*time.Microsecond)
			s.reload.buildCPU = max(s.reload.buildCPU, time.Duration(m.BuildCPUUS)*time.Microsecond)
			s.reload.gcCPU = max(s.reload.gcCPU, time.Duration(m.GCCPUUS)*time.Microsecond)
			s.reload.garbage = max(s.reload.garbage, m.AllocBytes)
		}
		if m.Resync {
			// It does not hold the configuration a Delta was made
			// against: it gets the current one whole, which the
			// pending reload then waits for.
			s.log.Warn("worker asked for the whole configuration", "id", p.id, "pid", p.pid, "err", m.Error)
			p.base = nil
			s.sendConfig(p)
			s.checkReload()
			return
		}
		if m.Error != "" {
			s.log.Error("worker refused configuration", "id", p.id, "pid", p.pid, "msg", string(ev.msg))
			if r := s.reload; r != nil {
				r.refused++
				if r.err == "" {
					r.err = m.Error
				}
			}
		}
		s.checkReload()
	case evFatal:
		var m control.FatalMsg
		if ev.pid == p.pid && json.Unmarshal(ev.msg, &m) == nil {
			p.fatal = m.Error
		}
	case evExit:
		if o, ok := s.oldExited(p, ev.pid); ok {
			// The replaced process finished draining (or died: its
			// successor holds the slot either way).
			s.log.Info("replaced worker exited", "id", p.id, "pid", o.pid, "exit", exitReason(ev.err))
			return
		}
		if ev.pid != p.pid {
			return // an older process of this slot
		}
		if p.ctrl != nil {
			_ = p.ctrl.Close()
			p.ctrl = nil
		}
		p.ps = nil
		s.metrics.setProc(p.id, 0, nil)
		s.checkReload() // it will not answer; its successor gets the new config
		if s.sel != nil && !p.retired {
			// The next process in this slot starts with no connections.
			_ = s.sel.ResetConns(p.id)
		}
		if p.retired {
			s.log.Info("worker retired", "id", p.id, "pid", p.pid, "cpu", p.cpu, "exit", exitReason(ev.err))
			s.metrics.forget(p.id)
			return
		}
		s.metrics.setState(p.id, stateDown)
		if s.stopping {
			return
		}
		attrs := []any{"id", p.id, "pid", p.pid, "cpu", p.cpu, "why", exitReason(ev.err),
			"uptime", time.Since(p.started).Round(time.Millisecond).String()}
		if p.fatal != "" {
			attrs = append(attrs, "err", p.fatal)
		}
		s.log.Error("worker died", attrs...)
		s.metrics.restarted(p.id)
		p.diedAt = time.Now()
		s.scheduleRestart(p)
	case evRestart:
		if s.stopping || p.retired || p.ps != nil {
			return
		}
		s.spawn(p)
	}
}

// Restart backoff: the first restart is immediate, the next ones wait
// minBackoff, doubling up to maxBackoff, until a worker runs for
// healthyRun.
const (
	minBackoff = 100 * time.Millisecond
	maxBackoff = 30 * time.Second
	healthyRun = 30 * time.Second
)

// scheduleRestart restarts a dead worker: at once the first time (or after a
// long healthy run), then with doubling backoff up to maxBackoff, so a
// worker that crashes at start cannot take the node down in a restart
// storm. A start that fails synchronously comes back here with a delay.
func (s *Supervisor) scheduleRestart(p *proc) {
	if time.Since(p.started) > healthyRun {
		p.backoff = 0
	}
	d := p.backoff
	if p.backoff == 0 {
		p.backoff = minBackoff
	} else {
		p.backoff = min(2*p.backoff, maxBackoff)
	}
	p.restarts++
	if d == 0 {
		s.spawn(p)
		return
	}
	s.log.Warn("worker restart delayed", "id", p.id, "after", d.String())
	time.AfterFunc(d, func() { s.events <- event{p: p, kind: evRestart} })
}

func (s *Supervisor) drain(p *proc) {
	if p.ctrl == nil {
		return
	}
	_ = p.ctrl.Send(control.Drain, control.DrainMsg{TimeoutMS: s.opts.DrainTimeout.Milliseconds()})
}

// drainAll stops gracefully: every worker stops taking connections, finishes
// what it serves and exits; stragglers are killed after the deadline.
func (s *Supervisor) drainAll() error {
	s.stopping = true
	s.log.Info("stopping: draining workers", "timeout", s.opts.DrainTimeout.String())
	if s.sel != nil {
		// No live slot: the selector refuses new connections from now on,
		// as closed listeners would, instead of queueing them to a worker
		// that is about to close its listener (and reset them then).
		if err := s.sel.SetLive(0); err != nil {
			s.log.Error("selector: refuse new connections", "err", err)
		}
	}
	live := 0
	for _, p := range s.workers {
		if p.ps != nil {
			s.drain(p)
			live++
		}
		s.drainOld(p)
		live += len(p.prev)
	}
	deadline := time.After(s.opts.DrainTimeout + 2*time.Second)
	for live > 0 {
		select {
		case ev := <-s.events:
			if ev.kind != evExit {
				continue
			}
			switch p := ev.p; {
			case ev.pid == p.pid && p.ps != nil:
				p.ps = nil
				live--
			default:
				if _, ok := s.oldExited(p, ev.pid); ok {
					live--
				}
			}
		case <-deadline:
			s.log.Warn("stopping: drain deadline passed, killing workers", "left", live)
			s.killAll()
			return nil
		}
	}
	s.log.Info("stopped")
	return nil
}

// signalAll sends sig to every worker process that is ready, those still
// draining included (nginx's reopen: each opens its log files again). One
// still starting may not handle the signal yet; it opens its files after
// the rotation anyway.
func (s *Supervisor) signalAll(sig os.Signal) {
	for _, p := range s.workers {
		if p.ready && p.ps != nil {
			_ = p.ps.Signal(sig)
		}
		for _, o := range p.prev {
			_ = o.ps.Signal(sig)
		}
	}
}

func (s *Supervisor) killAll() {
	s.stopping = true
	for _, p := range s.workers {
		if p.ps != nil {
			_ = p.ps.Kill()
		}
		for _, o := range p.prev {
			_ = o.ps.Kill()
		}
	}
}

func exitReason(err error) string {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return "signal: " + ws.Signal().String()
		}
		return fmt.Sprintf("exit status %d", ee.ExitCode())
	}
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}
