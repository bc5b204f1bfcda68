package supervisor

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"coregate/bpf"
	"coregate/worker/control"
	"coregate/worker/shm"
)

// TakeoverKey names a node for the takeover of its workers: the same
// config.yaml (its absolute path) is the same node. Two nodes on one
// machine differ in it; a supervisor started again for the node finds the
// workers its predecessor left.
func TakeoverKey(configPath string) string {
	abs, err := filepath.Abs(configPath)
	if err != nil {
		abs = configPath
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:8])
}

// orphan is a worker a previous supervisor of the node left serving, found
// waiting to be taken over, and the Hello it sent.
type orphan struct {
	hello control.HelloMsg
	conn  *net.UnixConn
	files map[string]*os.File
}

func (o *orphan) closeFiles() {
	for _, f := range o.files {
		_ = f.Close()
	}
	o.files = nil
}

// helloTimeout bounds the wait for a found worker's Hello.
const helloTimeout = 2 * time.Second

// findOrphans connects to every worker of the node waiting to be taken over
// and reads its Hello. A socket that does not answer as a worker of the
// node would is logged and left.
func (s *Supervisor) findOrphans() []*orphan {
	if s.opts.Takeover == "" {
		return nil
	}
	socks, err := control.FindTakeover(s.opts.Takeover)
	if err != nil {
		s.log.Warn("takeover: cannot list the workers left by a previous supervisor", "err", err)
		return nil
	}
	var found []*orphan
	for _, ts := range socks {
		o, err := dialOrphan(ts)
		if err != nil {
			s.log.Warn("takeover: a worker left by a previous supervisor did not answer", "socket", ts.Addr, "err", err)
			continue
		}
		found = append(found, o)
	}
	// The newest first: of two processes of one slot, the newer is the
	// one a rolling restart was bringing in.
	slices.SortFunc(found, func(a, b *orphan) int { return int(b.hello.Started - a.hello.Started) })
	return found
}

func dialOrphan(ts control.TakeoverSocket) (*orphan, error) {
	c, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: ts.Addr, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// Anyone may name an abstract socket: only one of this user's, made
	// by the process it names, is a worker of the node.
	pid, uid, err := control.PeerCred(c)
	if err == nil && (pid != ts.PID || uid != os.Getuid() || ts.Slot >= bpf.MaxSlots) {
		err = errors.New("not a worker of this node")
	}
	var t control.Type
	var payload []byte
	var files []*os.File
	if err == nil {
		_ = c.SetDeadline(time.Now().Add(helloTimeout))
		t, payload, files, err = control.RecvFiles(c)
		_ = c.SetDeadline(time.Time{})
	}
	o := &orphan{conn: c, files: map[string]*os.File{}}
	if err == nil && t != control.Hello {
		err = errors.New("no hello")
	}
	if err == nil {
		err = json.Unmarshal(payload, &o.hello)
	}
	if err == nil && (o.hello.PID != pid || o.hello.ID != ts.Slot || len(o.hello.Files) != len(files)) {
		err = errors.New("hello does not match its socket")
	}
	for i, f := range files {
		if err == nil {
			o.files[o.hello.Files[i]] = f
		} else {
			_ = f.Close()
		}
	}
	if err != nil {
		o.closeFiles()
		_ = c.Close()
		return nil, err
	}
	return o, nil
}

// newObjectsID names the node's shared objects when they are made: every
// worker is told it, and a supervisor that takes over the objects takes
// their name, so that a worker of other objects (left by an earlier
// supervisor that did not take over) is told apart.
func newObjectsID() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// adoptObjects takes over the node's shared objects (the eBPF selector,
// the counter table, the metrics segment) from the newest of the orphans
// that speaks this supervisor's protocol, all or none: the workers that
// use them keep serving in their slots, and what they counted goes on.
// It reports whether it did; if not, the supervisor makes new objects and
// replaces every orphan.
func (s *Supervisor) adoptObjects(orphans []*orphan) bool {
	for _, o := range orphans {
		h := o.hello
		if h.Proto != control.TakeoverProto || h.Objects == "" {
			continue
		}
		mode, err := bpf.ParseMode(h.Mode)
		if err != nil || mode != s.opts.Mode {
			s.log.Warn("takeover: the running workers' selector mode differs: replacing them", "running", h.Mode, "configured", s.opts.Mode.String())
			return false
		}
		var sel *bpf.Selector
		if h.Selector == bpf.KindEBPF.String() {
			var files []*os.File
			for i := range bpf.NumFiles {
				files = append(files, o.files[bpf.FileName(i)])
			}
			if slices.Contains(files, nil) {
				continue
			}
			if sel, err = bpf.AdoptSelector(files, mode); err != nil {
				s.log.Warn("takeover: the running workers' selector cannot be taken over", "err", err)
				continue
			}
		}
		counters, err := adoptFile(o, control.FileCounters, shm.Adopt)
		if err != nil {
			s.log.Warn("takeover: the running workers' counters cannot be taken over", "err", err)
			_ = closeSelector(sel)
			continue
		}
		series, err := adoptFile(o, control.FileMetrics, shm.AdoptMetrics)
		if err != nil {
			s.log.Warn("takeover: the running workers' metrics cannot be taken over", "err", err)
			_ = closeSelector(sel)
			if counters != nil {
				_ = counters.Close()
			}
			continue
		}
		// The ticket keys stay the workers' (tickets they issued resume);
		// made anew when the previous supervisor had none.
		tickets, err := adoptFile(o, control.FileTickets, shm.AdoptTicketKeys)
		if err != nil {
			s.log.Warn("takeover: the running workers' TLS session ticket keys cannot be taken over", "err", err)
		}
		s.sel, s.selKind, s.counters, s.series, s.objects = sel, h.Selector, counters, series, h.Objects
		if s.tickets = tickets; tickets == nil {
			s.createTickets()
		} else {
			s.log.Info("TLS session ticket keys taken over", "gen", tickets.Gen())
		}
		if sel != nil {
			// --cpus may have changed (the workers on other CPUs are
			// replaced: this is where they will be).
			if err := sel.SetCPUs(s.opts.CPUs[:min(len(s.opts.CPUs), sel.Slots())]); err != nil {
				s.log.Warn("takeover: selector cpus", "err", err)
			}
			s.log.Info("socket selector", "kind", s.selKind, "mode", mode.String(), "slots", sel.Slots(), "taken_over", true)
		}
		return true
	}
	return false
}

func closeSelector(sel *bpf.Selector) error {
	if sel == nil {
		return nil
	}
	return sel.Close()
}

// adoptFile takes over the orphan's named file with adopt, the file then
// belonging to what adopt returns; nil, nil when the orphan holds none (its
// supervisor had none).
func adoptFile[T any](o *orphan, name string, adopt func(*os.File) (*T, error)) (*T, error) {
	f := o.files[name]
	if f == nil {
		return nil, nil
	}
	v, err := adopt(f)
	if err == nil {
		delete(o.files, name)
	}
	return v, err
}

// takeOver puts the orphans in their slots, before the first resize: one
// that shares the node's objects, runs this binary and read the same
// config.yaml serves on as its slot's process, the configuration sent to it
// whole; the others are replaced as a rolling restart replaces a process
// (they serve until their slot's new process is ready, then drain). Slots
// below the configured count left empty between them are started.
func (s *Supervisor) takeOver(orphans []*orphan) {
	if len(orphans) == 0 {
		return
	}
	bin := control.BinaryID(s.opts.Exe)
	n := s.opts.Workers
	if s.sel != nil {
		n = min(n, s.sel.Slots())
	}
	slot := func(id int) *proc {
		for len(s.workers) <= id {
			k := len(s.workers)
			s.workers = append(s.workers, &proc{id: k, cpu: s.opts.CPUs[k%len(s.opts.CPUs)]})
		}
		return s.workers[id]
	}
	taken, replaced := 0, 0
	for _, o := range orphans {
		h := o.hello
		o.closeFiles()
		ps, wait, err := openOrphan(h.PID)
		if err != nil {
			s.log.Warn("takeover: worker gone", "id", h.ID, "pid", h.PID, "err", err)
			_ = o.conn.Close()
			continue
		}
		p := slot(h.ID)
		ctrl := control.New(o.conn)
		keep := h.Proto == control.TakeoverProto && h.Objects == s.objects && h.Selector == s.selKind
		if !keep || p.ps != nil {
			// Another generation's, or an older process of a slot
			// whose newer one is kept: it drains once the slot has a
			// ready process of this supervisor's.
			p.prev = append(p.prev, &oldProc{ps: ps, ctrl: ctrl, pid: h.PID})
			// Read as a replaced process of this supervisor's is: what
			// it sends is not the slot's.
			s.watch(p, ctrl, h.PID, new(atomic.Int64), wait)
			replaced++
			continue
		}
		p.ps, p.pid, p.ctrl, p.base = ps, h.PID, ctrl, nil
		p.ready, p.started = h.Ready, time.Unix(0, h.Started)
		p.beat, p.stalled, p.killed, p.sent, p.acked, p.fatal = new(atomic.Int64), false, false, 0, 0, ""
		p.beat.Store(int64(time.Since(s.epoch)))
		s.metrics.setProc(p.id, p.pid, p.beat)
		if p.ready {
			s.metrics.setState(p.id, stateRunning)
		} else {
			s.metrics.setState(p.id, stateStarting)
		}
		s.sendConfig(p)
		s.watch(p, p.ctrl, p.pid, p.beat, wait)
		taken++
		if h.ID < n && (h.Settings != s.opts.Settings || h.Binary != bin || h.CPU != p.cpu) {
			// config.yaml or the binary changed while the node had
			// no supervisor: replaced as a SIGHUP would replace it.
			if p.ready {
				s.rollSlot(p)
			} else {
				p.rollAgain = true
			}
		}
	}
	for _, p := range s.workers {
		switch {
		case p.ps == nil && p.id < n:
			s.spawn(p) // died while the node had no supervisor
		case p.ready && len(p.prev) > 0:
			s.drainOld(p)
		}
	}
	s.log.Warn("took over the workers a previous supervisor left", "kept", taken, "replaced", replaced)
}

// errOrphanExit is the exit of a process this supervisor took over: it is
// not its child, so its exit status cannot be known.
var errOrphanExit = errors.New("exited (taken over, status unknown)")

// openOrphan opens pid, a worker taken over, for signals (os.FindProcess
// holds a pidfd, so a signal never reaches a process that reused the pid)
// and returns how to wait for its exit (a pidfd of its own, which becomes
// readable then).
func openOrphan(pid int) (*os.Process, func() error, error) {
	fd, err := unix.PidfdOpen(pid, 0)
	if err != nil {
		return nil, nil, err
	}
	ps, err := os.FindProcess(pid)
	if err != nil {
		_ = unix.Close(fd)
		return nil, nil, err
	}
	return ps, func() error {
		defer unix.Close(fd)
		for {
			fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
			if _, err := unix.Poll(fds, -1); err != unix.EINTR {
				return errOrphanExit
			}
		}
	}, nil
}
