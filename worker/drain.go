package worker

import (
	"context"
	"net"
	"os"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"coregate/bpf"
)

// Graceful stop. Drain, run on the loop:
//  1. closes the listening sockets' accept queues to newcomers: a socket
//     filter that drops every packet makes the kernel drop new SYNs and the
//     last ACK of handshakes in progress (the client retransmits; by then the
//     listener is gone and another worker, or a refusal, answers), so that
//     nothing can slip into the queue after it has been emptied (some
//     kernels refuse that filter on a listening TCP socket; at a full stop
//     the supervisor's eBPF selector refuses new connections anyway, with
//     no live slot);
//  2. takes the listeners out of the loop's epoll set, accepts what is
//     already queued (those clients are served, not reset), and shuts the
//     listeners down (SHUT_RD stops listening; with the eBPF selector
//     attached as SELECT_OR_MIGRATE, half-open connections move to a live
//     worker);
//  3. answers every request still to come with Connection: close, and the
//     one in progress too when its answer has not started: a kept-alive
//     connection finishes one more exchange and closes after it;
//  4. closes a connection that has no request in progress only once it
//     has been quiet for drainIdle, with nothing in gnet's buffer nor in
//     the kernel's receive queue, by the same lingering close as any other
//     (startLinger): a client that keeps sending finds its next request
//     answered, never a close crossing it;
//  5. stops the engine once no client connection is left, or at the
//     deadline (nginx's worker_shutdown_timeout; --shutdown-timeout), where
//     whatever is left is closed.
//
// How long it takes: the requests in progress (bounded by the upstream and
// client timeouts), then one exchange per kept-alive connection, or
// drainIdle of quiet and up to lingeringTimeout for the client's own close;
// never more than the deadline.
//
// What is left to chance: closing a connection between two requests always
// races a request the client may be sending at that moment (HTTP/1.1 lets
// clients retry such a request when it is idempotent, RFC 9112 §9.3.1). The
// drain closes only connections quiet for drainIdle and checks the receive
// queue first, so the race is down to a request that leaves the client
// within one network transit of the FIN, after drainIdle of silence; and
// to the connections still open at the deadline.

// drainIdle is how long a connection with no request in progress must have
// been quiet, since its last answer was flushed (as seen on a tick) or since
// it was accepted, before the drain closes it: long enough that a client
// sending request after request is never closed between two of them, short
// enough that idle clients do not hold a replaced worker for long.
const drainIdle = int64(2 * time.Second)

// Drain starts a graceful stop; Run returns when it is done. It is safe to
// call from any goroutine, more than once, before or after Run started.
func (w *Worker) Drain(timeout time.Duration) {
	if h := w.loopRef.Load(); h != nil {
		_ = h.el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			w.startDrain(timeout)
			return nil
		}))
		return
	}
	go func() {
		<-w.running
		if err := w.probeLoop(timeout); err != nil {
			w.log.Warn("drain: cannot reach the event loop, stopping at once", "err", err)
			_ = w.Stop(context.Background())
		}
	}()
}

// drainProbe is the context of a connection the worker enrolls on its own
// loop to learn the loop and drain there, when no client connection has
// shown it yet: its accept queue may hold clients all the same.
type drainProbe struct{ timeout time.Duration }

// probeLoop enrolls one end of a loopback TCP pair with a drainProbe
// context; OnOpen runs startDrain on the loop and closes it.
func (w *Worker) probeLoop(timeout time.Duration) error {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer l.Close()
	c, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		return err
	}
	peer, err := l.Accept()
	if err != nil {
		_ = c.Close()
		return err
	}
	defer peer.Close()
	ctx := gnet.NewNetConnContext(gnet.NewContext(context.Background(), &drainProbe{timeout: timeout}), c)
	ch, err := w.engine.Register(ctx)
	if err != nil {
		_ = c.Close()
		return err
	}
	if r := <-ch; r.Err != nil {
		return r.Err
	}
	return nil
}

func (w *Worker) startDrain(timeout time.Duration) {
	if w.draining {
		return
	}
	w.draining = true
	w.drainDeadline = w.now + int64(timeout)
	for _, fd := range gnet.ListenerFDs(w.loop, nil) {
		_ = bpf.AttachDropAll(fd)
		if w.epfd >= 0 {
			_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		}
		w.rescueQueued(fd)
		_ = unix.Shutdown(fd, unix.SHUT_RD)
	}
	for _, cc := range w.live.Items() {
		if (cc.state == csHold || cc.state == csBody || cc.state == csProxy || cc.state == csDelay || cc.state == csAwait) && !cc.respStarted && !cc.pipelined() {
			// The answer is still to come: it says Connection: close,
			// unless the next request is already here.
			cc.keepAlive = false
		}
	}
	w.sweepIdle()
	w.checkDrained()
}

// sweepIdle closes the connections that have no request in progress and
// have been quiet for drainIdle. A connection still flushing its last
// answer, or with input waiting in gnet's buffer or the kernel's, is not
// quiet.
func (w *Worker) sweepIdle() {
	for i := w.live.Len() - 1; i >= 0; i-- {
		if i >= w.live.Len() {
			continue
		}
		cc := w.live.At(i)
		if cc.state != csIdle {
			continue
		}
		if cc.io.InboundBuffered() > 0 || cc.c.OutboundBuffered() > 0 {
			cc.idleSince = w.now
			continue
		}
		if w.now-cc.idleSince < drainIdle || unreadInput(cc.c.Fd()) {
			continue // input the loop has not read yet starts a request
		}
		cc.closing(true)
	}
}

// unreadInput reports whether the kernel holds input for fd that the loop
// has not read yet.
func unreadInput(fd int) bool {
	n, err := unix.IoctlGetInt(fd, unix.SIOCINQ)
	return err == nil && n > 0
}

// rescueQueued accepts the connections already in a listener's queue and
// enrolls them on the loop.
func (w *Worker) rescueQueued(lfd int) {
	for {
		nfd, _, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return
		}
		f := os.NewFile(uintptr(nfd), "rescued")
		c, err := net.FileConn(f)
		_ = f.Close()
		if err != nil {
			continue
		}
		w.pendingRescue++
		el := w.loop
		go func() {
			ch, err := el.Enroll(context.Background(), c)
			if err == nil {
				<-ch
			} else {
				_ = c.Close()
			}
			_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				w.pendingRescue--
				w.checkDrained()
				return nil
			}))
		}()
	}
}

// checkDrained stops the engine when draining is over.
func (w *Worker) checkDrained() {
	if !w.draining || w.stopping {
		return
	}
	if (w.live.Len() == 0 && w.pendingRescue == 0) || w.now >= w.drainDeadline {
		w.stopping = true
		go func() { _ = w.engine.Stop(context.Background()) }()
	}
}

// trackOpen and trackClose keep the list of live client connections (for
// draining) and report the count to the selector's load array.
func (w *Worker) trackOpen(cc *clientConn) {
	cc.idleSince = w.now
	w.live.Add(cc)
	w.accepted++
	w.cfg.Node.Accepted.Add(1)
	w.cfg.Node.Handled.Add(1)
	if w.cfg.OnConns != nil {
		w.cfg.OnConns(1)
	}
}

func (w *Worker) trackClose(cc *clientConn) {
	if !w.live.Remove(cc) {
		return
	}
	if w.cfg.OnConns != nil {
		w.cfg.OnConns(-1)
	}
	if w.draining {
		w.checkDrained()
	}
}
