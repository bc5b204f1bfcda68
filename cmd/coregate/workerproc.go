package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	_ "net/http/pprof" // served only when COREGATE_PPROF is set
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"coregate/admin/nodeconf"
	"coregate/admin/spec"
	"coregate/bpf"
	"coregate/node/supervisor"
	"coregate/plugins"
	"coregate/worker"
	"coregate/worker/control"
	"coregate/worker/shm"
)

// Worker processes are started by the supervisor as
//
//	coregate worker --id N --cpu C --selector KIND --bpf-fds K [--counters-fd F] [--metrics-fd M] [--takeover KEY] -c config.yaml
//
// with fd 3 the control socket, fds 4..4+K-1 the selector's objects
// (bpf.Selector.Files order) and fd F, when given, the node's shared
// counter table (shm), fd M the node's metrics segment (shm.MetricsMap),
// whose region N the worker writes. KEY names the node's takeover sockets
// (takeover.go): without it a worker whose supervisor is gone drains.

const controlFD = 3

func runWorker(args []string) error {
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	id := fs.Int("id", 0, "worker slot")
	cpu := fs.Int("cpu", -1, "CPU the worker is pinned to")
	selector := fs.String("selector", "plain", "what steers connections: ebpf, cbpf, kernel-hash, plain")
	bpfFDs := fs.Int("bpf-fds", 0, "number of inherited selector fds after the control socket")
	mode := fs.String("mode", "hash", "selector mode")
	cfgPath := fs.String("c", "conf/config.yaml", "path to config.yaml")
	countersFD := fs.Int("counters-fd", 0, "inherited fd of the node's shared counter table (0: none, counters are this worker's own)")
	metricsFD := fs.Int("metrics-fd", 0, "inherited fd of the node's metrics segment (0: none, metrics and counters are this worker's own)")
	objects := fs.String("objects", "", "the name of the node's shared objects this worker uses (with --takeover)")
	takeoverKey := fs.String("takeover", "", "the node's key: a worker whose supervisor is gone serves on and waits for the next one on a socket named by it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := newLogger().With("worker", *id, "pid", os.Getpid())
	// What packages log on their own (the plugins' Redis client) carries
	// the worker's attributes too.
	slog.SetDefault(log)
	// SIGUSR1 (the supervisor's, on a rotation) reopens the access log;
	// caught from the start, so that it never ends the process.
	reopen := make(chan os.Signal, 1)
	signal.Notify(reopen, syscall.SIGUSR1)
	if *cpu >= 0 {
		// Started pinned by the supervisor; this makes sure of every thread.
		if err := supervisor.PinAllThreads(*cpu); err != nil {
			log.Warn("pinning", "err", err)
		}
	}
	conn, err := control.FromFile(os.NewFile(controlFD, "control"))
	if err != nil {
		return err
	}
	ctrl := new(ctrlRef)
	ctrl.set(conn)
	to := &takeover{key: *takeoverKey, log: log, hello: control.HelloMsg{
		Proto: control.TakeoverProto, ID: *id, PID: os.Getpid(), CPU: *cpu,
		Started: time.Now().UnixNano(), Selector: *selector, Mode: *mode,
		Binary: control.BinaryID("/proc/self/exe"), Objects: *objects,
	}}
	workerGC.start()
	err = serveWorker(ctrl, to, log, *id, *selector, *bpfFDs, *countersFD, *metricsFD, *mode, *cfgPath, reopen)
	if err != nil {
		// The supervisor logs it with the exit status.
		_ = ctrl.Send(control.Fatal, control.FatalMsg{Error: err.Error()})
	}
	return err
}

// serveWorker runs the worker until it has drained, or fails.
func serveWorker(ctrl *ctrlRef, to *takeover, log *slog.Logger, id int, selector string, bpfFDs, countersFD, metricsFD int, mode, cfgPath string, reopen <-chan os.Signal) error {
	nc, _, err := nodeconf.Load(cfgPath)
	if err != nil {
		return err
	}
	setLogLevel(nc)
	to.hello.Settings = settingsOf(nc)

	var member *bpf.Member
	if bpfFDs == bpf.NumFiles {
		files := bpf.InheritedFiles(controlFD + 1)
		if selector == bpf.KindEBPF.String() {
			if member, err = bpf.OpenMember(files, id); err != nil {
				log.Error("selector: cannot join, kernel hash steers this worker", "err", err)
				member = nil
			}
		}
		for _, f := range files {
			to.keep(f.Name(), f)
		}
	}
	bmode, _ := bpf.ParseMode(mode)

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
	cfg.Plugins = plugins.NewLocalEnv()
	cfg.Plugins.Attr = plugins.NewSettings(nc.PluginAttr)
	if nc.NginxConfig.HTTP.EnableAccessLog {
		al, f, err := openAccessLog(nc, log)
		if err != nil {
			return err
		}
		cfg.AccessLog, cfg.AccessLogFormat = al, f
		// Closed once the loop has stopped (Run returned): the last
		// lines are written before the process exits.
		defer al.Close()
		go func() {
			for range reopen {
				al.Reopen()
			}
		}()
	}
	if countersFD > 0 {
		// The mapping stays for the process's life; the fd is kept for a
		// supervisor that takes the worker over.
		f := os.NewFile(uintptr(countersFD), control.FileCounters)
		t, err := shm.Open(f)
		if err != nil {
			return fmt.Errorf("shared counters: %w", err)
		}
		to.keep(control.FileCounters, f)
		cfg.Plugins.Counters = t
	}
	if metricsFD > 0 {
		// This worker slot's region: its series and node counters outlive
		// the process, and a process respawned in the slot continues them.
		f := os.NewFile(uintptr(metricsFD), control.FileMetrics)
		m, err := shm.OpenMetrics(f)
		to.keep(control.FileMetrics, f)
		if err != nil {
			return fmt.Errorf("shared metrics: %w", err)
		}
		r, err := m.Region(id)
		if err != nil {
			return fmt.Errorf("shared metrics: %w", err)
		}
		cfg.Plugins.Metrics = r
		cfg.Node = r.Node()
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
			case selector == bpf.KindCBPF.String():
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
				// built beside the loop, on the same CPU, below its priority
				worker.Background(func(yield func()) { _ = applyConfig(w, conn, t, payload, &held, log, yield) })
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
		<-sigs
		drain(time.Duration(drainTimeout.Load()))
	}()
	if addr := os.Getenv("COREGATE_PPROF"); addr != "" {
		servePprof(addr, id, log)
	}
	go func() {
		<-w.Ready()
		_ = ctrl.Send(control.Ready, control.ReadyMsg{ID: id, PID: os.Getpid(), Selector: selector})
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

// servePprof serves net/http/pprof for worker id on the port after addr's
// by id (worker 0 on addr itself).
func servePprof(addr string, id int, log *slog.Logger) {
	host, port, err := net.SplitHostPort(addr)
	p, perr := strconv.Atoi(port)
	if err != nil || perr != nil {
		log.Error("COREGATE_PPROF: want host:port", "value", addr)
		return
	}
	addr = net.JoinHostPort(host, strconv.Itoa(p+id))
	go func() {
		log.Info("pprof listening", "addr", addr)
		if err := http.ListenAndServe(addr, nil); err != nil {
			log.Error("pprof", "err", err)
		}
	}()
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
	start := time.Now()
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
	_ = ctrl.Send(control.Applied, control.AppliedMsg{Routes: len(s.Routes), BuildUS: time.Since(start).Microseconds()})
	workerGC.applied()
	return true
}

// workerGC paces the worker process's garbage collector (gcpace.go).
var workerGC = newGCPacer()
