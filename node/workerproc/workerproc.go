package workerproc

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/bpf"
	"coregate/internal/threadcpu"
	"coregate/node"
	"coregate/node/supervisor"
	"coregate/plugins"
	"coregate/worker"
	"coregate/worker/accesslog"
	"coregate/worker/control"
	"coregate/worker/shm"
)

// ControlFD is the worker process's control socket, inherited from the
// supervisor (the selector's objects follow it).
const ControlFD = 3

// Options are a worker process's, from its command line (see the package
// comment) and what it inherits.
type Options struct {
	// ID is the worker's slot (--id).
	ID int
	// CPU is the CPU the supervisor pinned the process to (--cpu); every
	// thread is pinned to it again. -1: not pinned.
	CPU int
	// Selector is what steers connections to the worker (--selector):
	// ebpf, cbpf, kernel-hash or plain.
	Selector string
	// BPFFDs is the number of the selector's inherited fds after the
	// control socket (--bpf-fds); only bpf.NumFiles is used.
	BPFFDs int
	// Mode is the selector's mode (--mode).
	Mode string
	// Config is config.yaml's path (-c).
	Config string
	// CountersFD is the inherited fd of the node's shared counter table
	// (--counters-fd); 0: none, counters are the worker's own.
	CountersFD int
	// MetricsFD is the inherited fd of the node's metrics segment
	// (--metrics-fd); 0: none, metrics and counters are the worker's own.
	MetricsFD int
	// TicketsFD is the inherited fd of the node's TLS session ticket keys
	// (--tickets-fd); 0: none, the worker's keys are its own.
	TicketsFD int
	// HealthFD is the inherited fd of the node's upstream health region
	// (--health-fd); 0: none, every node is taken as healthy.
	HealthFD int
	// Objects names the node's shared objects the worker uses
	// (--objects, with Takeover).
	Objects string
	// Takeover is the node's key (--takeover): a worker whose supervisor
	// is gone serves on and waits for the next one on a socket named by
	// it. "": it drains.
	Takeover string
	// Control is the worker's end of its control socket (ControlFD for a
	// process the supervisor started), a connected stream socket; Run
	// owns it.
	Control *os.File
	// Log is the worker's log; nil: the process's (node.NewLogger, with
	// the worker's slot and pid), made the slog default, so that what
	// packages log on their own (the plugins' Redis client) carries the
	// worker's attributes too.
	Log *slog.Logger
}

// Run is the worker process: it reads config.yaml, waits for its first
// configuration on o.Control, listens once that is built, and serves until
// it has drained (told to by the supervisor, on SIGTERM or SIGINT, when
// ctx is done once configured, or when its supervisor is gone and no other
// takes it over), or fails. An error is reported to the supervisor
// (control.Fatal) before Run returns it.
//
// Run is called once per process: it handles the process's signals
// (SIGUSR1 reopens the access log) and paces its garbage collector.
func Run(ctx context.Context, o Options) error {
	log := o.Log
	if log == nil {
		log = node.NewLogger().With("worker", o.ID, "pid", os.Getpid())
		slog.SetDefault(log)
	}
	// SIGUSR1 (the supervisor's, on a rotation) reopens the access log;
	// caught from the start, so that it never ends the process.
	reopen := make(chan os.Signal, 1)
	signal.Notify(reopen, syscall.SIGUSR1)
	if o.CPU >= 0 {
		// Started pinned by the supervisor; this makes sure of every thread.
		if err := supervisor.PinAllThreads(o.CPU); err != nil {
			log.Warn("pinning", "err", err)
		}
	}
	if err := worker.SetSlice(); err != nil {
		log.Warn("time slice", "err", err)
	}
	conn, err := control.FromFile(o.Control)
	if err != nil {
		return err
	}
	ctrl := new(ctrlRef)
	ctrl.set(conn)
	to := &takeover{key: o.Takeover, log: log, hello: control.HelloMsg{
		Proto: control.TakeoverProto, ID: o.ID, PID: os.Getpid(), CPU: o.CPU,
		Started: time.Now().UnixNano(), Selector: o.Selector, Mode: o.Mode,
		Binary: control.BinaryID("/proc/self/exe"), Objects: o.Objects,
	}}
	workerGC.start()
	err = serve(ctx, ctrl, to, log, o, reopen)
	if err != nil {
		// The supervisor logs it with the exit status.
		_ = ctrl.Send(control.Fatal, control.FatalMsg{Error: err.Error()})
	}
	return err
}

// serve runs the worker until it has drained, or fails.
func serve(ctx context.Context, ctrl *ctrlRef, to *takeover, log *slog.Logger, o Options, reopen <-chan os.Signal) error {
	nc, _, err := nodeconf.Load(o.Config)
	if err != nil {
		return err
	}
	node.SetLogLevel(nc)
	to.hello.Settings = node.Settings(nc)
	// apisix.data_encryption: the plugins' encrypt_fields are decrypted
	// before they are built, as the supervisor decrypted them to check
	// them. The SSL objects' private keys decrypt with
	// nc.APISIX.DataEncryption.Keyring.DecryptPrivateKey (a nil keyring
	// keeps them as stored), the decrypt function the TLS configuration is
	// built with.
	plugins.Default.SetKeyring(nc.APISIX.DataEncryption.FieldsKeyring(nc.Provider()))
	// $secret:// references are read, when a snapshot is built (off the
	// event loop), with the Spec's secret objects.
	plugins.Default.SetSecrets(node.SecretResolver(nc))

	var member *bpf.Member
	if o.BPFFDs == bpf.NumFiles {
		files := bpf.InheritedFiles(ControlFD + 1)
		if o.Selector == bpf.KindEBPF.String() {
			if member, err = bpf.OpenMember(files, o.ID); err != nil {
				log.Error("selector: cannot join, kernel hash steers this worker", "err", err)
				member = nil
			}
		}
		for _, f := range files {
			to.keep(f.Name(), f)
		}
	}
	bmode, _ := bpf.ParseMode(o.Mode)

	// rejoin keeps a duplicate of the listener that joined the selector,
	// to put it back when the supervisor took this worker out while it was
	// silent. It lives from the listener's start until the drain (it must
	// not keep a draining listener open: the queue of a listener that
	// closes migrates to the live workers).
	var rejoin struct {
		sync.Mutex
		fd int
	}
	rejoin.fd = -1
	cfg := workerConfig(nc, log)
	// The CAs https upstreams with tls.verify are checked against.
	cas, err := nodeconf.TrustedCAs(nc.APISIX.SSLTrustedCertificate)
	if err != nil {
		return err
	}
	cfg.UpstreamCAs = cas
	cfg.Plugins = plugins.NewLocalEnv()
	cfg.Plugins.Attr = plugins.NewSettings(nc.PluginAttr)
	if nc.APISIX.SSL.Enable && len(nc.APISIX.SSL.Listen) > 0 {
		cfg.Plugins.HTTPSPort = nc.APISIX.SSL.Listen[0].Port
	}
	var al *accesslog.Log
	if nc.NginxConfig.HTTP.EnableAccessLog {
		var f *accesslog.Format
		if al, f, err = openAccessLog(nc, log); err != nil {
			return err
		}
		cfg.AccessLog, cfg.AccessLogFormat = al, f
		// Closed once the loop has stopped (Run returned): the last
		// lines are written before the process exits.
		defer al.Close()
	}
	// The error log (nginx_config.error_log) is the standard error the
	// supervisor handed on: opened again at its path, as the access log.
	if errorLog := nc.NginxConfig.ErrorLogPath(nc.Dir); al != nil || errorLog != "" {
		go func() {
			for range reopen {
				if errorLog != "" {
					if err := node.OpenErrorLog(errorLog); err != nil {
						log.Error("SIGUSR1: the error log not reopened", "err", err)
					}
				}
				if al != nil {
					al.Reopen()
				}
				log.Info("SIGUSR1: logs reopened")
			}
		}()
	}
	if o.CountersFD > 0 {
		// The mapping stays for the process's life; the fd is kept for a
		// supervisor that takes the worker over.
		f := os.NewFile(uintptr(o.CountersFD), control.FileCounters)
		t, err := shm.Open(f)
		if err != nil {
			return fmt.Errorf("shared counters: %w", err)
		}
		to.keep(control.FileCounters, f)
		cfg.Plugins.Counters = t
	}
	if o.MetricsFD > 0 {
		// This worker slot's region: its series and node counters outlive
		// the process, and a process respawned in the slot continues them.
		f := os.NewFile(uintptr(o.MetricsFD), control.FileMetrics)
		m, err := shm.OpenMetrics(f)
		to.keep(control.FileMetrics, f)
		if err != nil {
			return fmt.Errorf("shared metrics: %w", err)
		}
		r, err := m.Region(o.ID)
		if err != nil {
			return fmt.Errorf("shared metrics: %w", err)
		}
		cfg.Plugins.Metrics = r
		cfg.Node = r.Node()
	}
	if o.TicketsFD > 0 {
		// Mapped read-only for the process's life; the fd is kept for a
		// supervisor that takes the worker over.
		f := os.NewFile(uintptr(o.TicketsFD), control.FileTickets)
		t, err := shm.OpenTicketKeys(f)
		to.keep(control.FileTickets, f)
		if err != nil {
			return fmt.Errorf("ticket keys: %w", err)
		}
		cfg.TicketKeys = t
	}
	if o.HealthFD > 0 {
		// Mapped read-write for the process's life: the worker reads the
		// states and counts its traffic into them (passive checks).
		f := os.NewFile(uintptr(o.HealthFD), "health")
		h, err := shm.OpenHealth(f)
		_ = f.Close()
		if err != nil {
			return fmt.Errorf("upstream health: %w", err)
		}
		cfg.Health = h
	}
	cfg.OnListen = func(fds []int) {
		for _, fd := range fds {
			switch {
			case member != nil:
				if err := member.Join(fd); err != nil {
					log.Error("selector: join", "err", err)
					break
				}
				rejoin.Lock()
				if rejoin.fd < 0 {
					rejoin.fd, fd = fd, -1
				}
				rejoin.Unlock()
			case o.Selector == bpf.KindCBPF.String():
				if err := bpf.AttachCBPF(fd, bmode); err != nil {
					log.Error("selector: classic BPF", "err", err)
				}
			}
			if fd >= 0 {
				closeFD(fd)
			}
		}
	}
	dropRejoin := func() {
		rejoin.Lock()
		if rejoin.fd >= 0 {
			closeFD(rejoin.fd)
			rejoin.fd = -1
		}
		rejoin.Unlock()
	}
	defer dropRejoin()
	if member != nil {
		cfg.OnConns = member.AddConns
	}
	w := worker.New(cfg)

	// No traffic before the first complete configuration: the worker listens
	// only once one applied. held is the configuration of the last Config
	// or Delta received, which the next Delta is made against; the control
	// reader alone uses it, one frame at a time.
	var held *spec.Spec
	for configured := false; !configured; {
		t, payload, err := ctrl.get().Recv()
		if err != nil {
			return fmt.Errorf("control: %w", err)
		}
		switch t {
		case control.Config, control.Delta:
			configured = applyConfig(w, ctrl.get(), t, payload, &held, log, nil)
		case control.Drain:
			return nil // nothing served yet
		}
	}

	var drainTimeout atomic.Int64
	drainTimeout.Store(int64(10 * time.Second))
	var drainOnce sync.Once
	var drainStart time.Time
	drain := func(d time.Duration) {
		drainOnce.Do(func() {
			drainStart = time.Now()
			log.Info("draining", "timeout", d.String())
			to.close()
			if member != nil {
				_ = member.Leave()
			}
			dropRejoin()
			w.Drain(d)
		})
	}
	isReady := func() bool {
		select {
		case <-w.Ready():
			return true
		default:
			return false
		}
	}
	go func() {
		for {
			conn := ctrl.get()
			t, payload, err := conn.Recv()
			if err != nil {
				_ = conn.Close()
				next, terr := to.await(isReady)
				if terr == nil {
					// The new supervisor sends the configuration whole.
					ctrl.set(next)
					continue
				}
				switch {
				case !errors.Is(terr, errNoTakeover):
					log.Error("supervisor gone, and no takeover socket: draining", "err", terr)
				case to.key == "":
					log.Warn("control socket closed: draining")
				}
				// else draining already
				drain(time.Duration(drainTimeout.Load()))
				return
			}
			switch t {
			case control.Config, control.Delta:
				// built beside the loop, on the same CPU: below its
				// priority, but for a change of a few objects, which
				// waiting for the CPU at that priority delays many times
				// what building it costs
				build := worker.Background
				if t == control.Delta && len(payload) <= SmallDelta {
					build = worker.Foreground
				}
				build(func(yield func()) { _ = applyConfig(w, conn, t, payload, &held, log, yield) })
			case control.Drain:
				var m control.DrainMsg
				_ = json.Unmarshal(payload, &m)
				if m.TimeoutMS > 0 {
					drainTimeout.Store(int64(time.Duration(m.TimeoutMS) * time.Millisecond))
				}
				drain(time.Duration(drainTimeout.Load()))
			case control.Rejoin:
				rejoin.Lock()
				if member != nil && rejoin.fd >= 0 {
					if ok, err := member.Rejoin(rejoin.fd); err != nil {
						log.Error("selector: rejoin", "err", err)
					} else if ok {
						log.Info("selector: back in after a silence")
					}
				}
				rejoin.Unlock()
			}
		}
	}()
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		select {
		case <-sigs:
		case <-ctx.Done():
		}
		drain(time.Duration(drainTimeout.Load()))
	}()
	if addr := os.Getenv("COREGATE_PPROF"); addr != "" {
		node.ServePprof(addr, o.ID, log)
	}
	go func() {
		<-w.Ready()
		_ = ctrl.Send(control.Ready, control.ReadyMsg{ID: o.ID, PID: os.Getpid(), Selector: o.Selector})
		sendStats(ctrl, w)
	}()
	err = w.Run(context.Background())
	if member != nil {
		_ = member.Close()
	}
	drainOnce.Do(func() {}) // drainStart is settled from here on
	if !drainStart.IsZero() {
		log.Info("drained", "took", time.Since(drainStart).Round(time.Millisecond).String())
	}
	if err != nil && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// sendStats reports the worker's counters to the supervisor every
// control.StatsEvery, on the control socket the worker has at the time
// (one that failed is replaced when a supervisor takes the worker over),
// for the life of the process. The reports are the
// worker's heartbeat, and they come from the loop's progress: one is sent
// only when the loop has ticked since the last (or has not ticked yet), so
// that a loop stuck in one event falls silent like a stopped process,
// while a busy one, which still ticks every 50 ms, keeps reporting.
func sendStats(ctrl *ctrlRef, w *worker.Worker) {
	t := time.NewTicker(control.StatsEvery)
	defer t.Stop()
	var last uint64
	for range t.C {
		ticks := w.Ticks()
		if !loopTurned(last, ticks) {
			continue
		}
		last = ticks
		_ = ctrl.Send(control.Stats, w.Stats())
	}
}

// loopTurned says whether a heartbeat is due: the loop's tick count moved
// from last to now, or the loop has not ticked yet (a loop that has not
// started ticking is not stuck: its first tick may wait for its first
// connection).
func loopTurned(last, now uint64) bool {
	return now == 0 || now != last
}

// applyConfig installs the configuration of a Config or Delta frame (type
// t) and acknowledges it; it reports whether the configuration was
// installed. *held is the configuration of the last frame, which a Delta
// is made against; applyConfig replaces it with this frame's once decoded,
// installed or not, as the supervisor counts it sent. A Delta that does
// not apply to *held is answered with Resync. yield, if not nil, is called
// after every object decoded and every route compiled
// (worker.Background).
func applyConfig(w *worker.Worker, ctrl *control.Conn, t control.Type, payload []byte, held **spec.Spec, log *slog.Logger, yield func()) bool {
	runtime.LockOSThread() // for threadcpu.Now; Background's and Foreground's f run so already
	defer runtime.UnlockOSThread()
	start, cpu, allocs := time.Now(), threadcpu.Now(), workerGCCost.allocated()
	var s *spec.Spec
	var err error
	if t == control.Delta {
		s, err = control.DecodeDelta(payload, *held, yield)
		if err != nil {
			*held = nil
			log.Warn("configuration delta refused, asking for the whole configuration", "err", err)
			_ = ctrl.Send(control.Applied, control.AppliedMsg{Error: err.Error(), Resync: true})
			return false
		}
	} else {
		s, err = control.DecodeSpec(payload, yield)
	}
	*held = s // nil when it did not decode
	if err == nil {
		err = w.SetSpec(s, yield)
	}
	if err != nil {
		log.Error("configuration refused, the previous one keeps serving", "err", err)
		_ = ctrl.Send(control.Applied, control.AppliedMsg{Error: err.Error()})
		return false
	}
	built, builtCPU := time.Since(start), threadcpu.Now()-cpu
	garbage, gcCPU := workerGCCost.of(allocs)
	_ = ctrl.Send(control.Applied, control.AppliedMsg{Routes: len(s.Routes), BuildUS: built.Microseconds(),
		BuildCPUUS: builtCPU.Microseconds(), AllocBytes: garbage, GCCPUUS: gcCPU.Microseconds()})
	workerGC.applied()
	workerRelease.applied()
	return true
}

// SmallDelta is the largest Delta payload a worker builds at its event
// loop's priority (worker.Foreground) rather than on its build thread
// below it (worker.Background): some 100 routes of two plugins each
// changed, a few milliseconds of CPU at 50 000 routes. A larger one, a bulk load's, and
// a whole Config take the build thread, whose lower priority keeps their
// longer builds out of request latency.
const SmallDelta = 32 << 10

// workerGC paces the worker process's garbage collector (gcpace.go).
var workerGC = newGCPacer()

// workerGCCost estimates the collector's cost of each build (gccost.go).
var workerGCCost = newGCCost()

// workerRelease hands a worker's unused heap back once its
// configurations stop coming (release.go).
var workerRelease = &memRelease{quiet: releaseQuiet, min: releaseMin}
