package workerproc

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"coregate/worker/control"
)

// A worker outlives its supervisor, as nginx's workers outlive their
// master: when its control socket reaches end of file without a Drain (the
// supervisor was killed, or crashed), the worker goes on serving with the
// configuration it holds, and waits on an abstract Unix socket
// (control.TakeoverAddr: the node's key, its slot, its pid) for the
// supervisor that is started next. That supervisor finds the socket in
// /proc/net/unix, connects, and is sent Hello with the node's shared
// objects (the counter table, the metrics segment, the eBPF selector's
// maps and program) passed beside it; the connection is the worker's
// control socket from then on. Only a peer of the worker's own user, or
// root, is answered (SO_PEERCRED). A worker told to drain, or draining on
// a signal, stops waiting: it is not taken over.

// ctrlRef is the worker's current control socket, replaced when a new
// supervisor takes the worker over. Safe for concurrent use.
type ctrlRef struct{ p atomic.Pointer[control.Conn] }

func (c *ctrlRef) get() *control.Conn { return c.p.Load() }

func (c *ctrlRef) set(conn *control.Conn) { c.p.Store(conn) }

// Send sends on the current control socket.
func (c *ctrlRef) Send(t control.Type, v any) error { return c.get().Send(t, v) }

// nodeFile is one of the node's shared objects a worker holds for the
// supervisor that may take it over.
type nodeFile struct {
	name string
	f    *os.File
}

// takeover is a worker's side of being taken over.
type takeover struct {
	key   string // the node's (supervisor's --takeover); "" when none
	log   *slog.Logger
	hello control.HelloMsg
	files []nodeFile

	mu     sync.Mutex
	ln     *net.UnixListener
	closed bool // draining: not to be taken over
}

// keep holds f (the worker's own descriptor, kept open for its life) to
// pass to a supervisor that takes the worker over.
func (t *takeover) keep(name string, f *os.File) {
	t.files = append(t.files, nodeFile{name, f})
}

// close stops waiting for a supervisor (the worker drains): a supervisor
// that finds the worker after this does not take it over.
func (t *takeover) close() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.closed = true
	if t.ln != nil {
		_ = t.ln.Close()
		t.ln = nil
	}
}

// errNoTakeover says the worker will not be taken over: it has no key, or
// it drains.
var errNoTakeover = errors.New("not waiting for a supervisor")

// await waits until a supervisor of the node connects, sends it Hello with
// the node's objects and returns the connection as the new control socket.
// ready says whether the worker listens (its Ready was sent to the
// previous supervisor, or is due).
func (t *takeover) await(ready func() bool) (*control.Conn, error) {
	if t.key == "" {
		return nil, errNoTakeover
	}
	addr := control.TakeoverAddr(t.key, t.hello.ID, os.Getpid())
	t.mu.Lock()
	if t.closed {
		t.mu.Unlock()
		return nil, errNoTakeover
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: addr, Net: "unix"})
	if err != nil {
		t.mu.Unlock()
		return nil, fmt.Errorf("takeover socket: %w", err)
	}
	t.ln = ln
	t.mu.Unlock()
	defer t.close()
	t.log.Warn("supervisor gone: serving the last configuration until a supervisor takes this worker over", "socket", addr)
	uid := os.Getuid()
	for {
		uc, err := ln.AcceptUnix()
		if err != nil {
			t.mu.Lock()
			closed := t.closed
			t.mu.Unlock()
			if closed {
				return nil, errNoTakeover
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			// EMFILE and the like: try again shortly rather than
			// give up on being taken over.
			t.log.Warn("takeover socket: accept", "err", err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		pid, peer, err := control.PeerCred(uc)
		if err != nil || (peer != uid && peer != 0) {
			t.log.Warn("takeover socket: a peer of another user refused", "pid", pid, "uid", peer, "err", err)
			_ = uc.Close()
			continue
		}
		hello := t.hello
		hello.Ready = ready()
		files := make([]*os.File, len(t.files))
		hello.Files = make([]string, len(t.files))
		for i, nf := range t.files {
			files[i], hello.Files[i] = nf.f, nf.name
		}
		if err := control.SendFiles(uc, control.Hello, hello, files); err != nil {
			t.log.Warn("takeover socket: hello", "pid", pid, "err", err)
			_ = uc.Close()
			continue
		}
		t.log.Warn("taken over by a new supervisor", "supervisor_pid", pid)
		return control.New(uc), nil
	}
}
