package worker

import (
	"context"
	"net"
	"os"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Graceful stop. Drain, run on the loop:
//  1. closes the listening sockets' accept queues to newcomers: a socket
//     filter that drops every packet makes the kernel drop new SYNs and the
//     last ACK of handshakes in progress (the client retransmits; by then the
//     listener is gone and another worker, or a refusal, answers), so that
//     nothing can slip into the queue after it has been emptied;
//  2. takes the listeners out of the loop's epoll set, accepts what is
//     already queued (those clients are served, not reset), and shuts the
//     listeners down (SHUT_RD stops listening; with the eBPF selector
//     attached as SELECT_OR_MIGRATE, half-open connections move to a live
//     worker);
//  3. answers every request still to come with Connection: close, and the
//     one in progress too when its answer has not started;
//  4. on every tick, closes the connections that are idle between two
//     requests, cleanly: it sends FIN (shutdown SHUT_WR) once the last
//     answer is flushed and waits up to lingerTimeout for the client's own
//     close, discarding anything it sends, so that a request that crossed
//     the FIN gets no RST and the client sees an ordinary keep-alive close;
//     a connection that has not sent its first request yet is given
//     freshGrace to send it;
//  5. stops the engine once no client connection is left, or at the
//     deadline.

const (
	// lingerTimeout bounds how long a drained idle connection waits for the
	// client to close its side.
	lingerTimeout = int64(2 * time.Second)
	// freshGrace bounds how long a connection that has sent nothing yet may
	// wait for its first request once draining started (net/http's
	// Server.Shutdown waits 5 s).
	freshGrace = int64(2 * time.Second)
)

// dropAll is a classic BPF program that drops every packet.
var dropAll = [1]unix.SockFilter{{Code: unix.BPF_RET | unix.BPF_K, K: 0}}

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
		_ = unix.SetsockoptSockFprog(fd, unix.SOL_SOCKET, unix.SO_ATTACH_FILTER,
			&unix.SockFprog{Len: uint16(len(dropAll)), Filter: &dropAll[0]})
		if w.epfd >= 0 {
			_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_DEL, fd, nil)
		}
		w.rescueQueued(fd)
		_ = unix.Shutdown(fd, unix.SHUT_RD)
	}
	for _, cc := range w.live {
		if cc.state == csProxy && !cc.respStarted {
			// The answer is still to come: it says Connection: close.
			cc.keepAlive = false
		}
	}
	w.sweepIdle()
	w.checkDrained()
}

// sweepIdle closes, cleanly, the connections idle between two requests, and
// shortens the wait of those that have not sent a request yet.
func (w *Worker) sweepIdle() {
	for i := len(w.live) - 1; i >= 0; i-- {
		if i >= len(w.live) {
			continue
		}
		cc := w.live[i]
		if cc.state != csHead || cc.hdrTimer || cc.c.InboundBuffered() > 0 {
			continue
		}
		if !cc.served {
			if cc.deadline == 0 || cc.deadline-w.now > freshGrace {
				w.setDeadline(cc, freshGrace)
			}
			continue
		}
		if cc.c.OutboundBuffered() > 0 {
			continue // the next tick looks again
		}
		cc.state = csClosing
		if unix.Shutdown(cc.c.Fd(), unix.SHUT_WR) != nil {
			w.closeConn(cc.c)
			continue
		}
		w.setDeadline(cc, lingerTimeout)
	}
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
	if (len(w.live) == 0 && w.pendingRescue == 0) || w.now >= w.drainDeadline {
		w.stopping = true
		go func() { _ = w.engine.Stop(context.Background()) }()
	}
}

// trackOpen and trackClose keep the list of live client connections (for
// draining) and report the count to the selector's load array.
func (w *Worker) trackOpen(cc *clientConn) {
	cc.liveIdx = int32(len(w.live))
	w.live = append(w.live, cc)
	w.accepted++
	if w.cfg.OnConns != nil {
		w.cfg.OnConns(1)
	}
}

func (w *Worker) trackClose(cc *clientConn) {
	i := cc.liveIdx
	if i < 0 || int(i) >= len(w.live) || w.live[i] != cc {
		return
	}
	last := len(w.live) - 1
	w.live[i] = w.live[last]
	w.live[i].liveIdx = i
	w.live[last] = nil
	w.live = w.live[:last]
	cc.liveIdx = -1
	if w.cfg.OnConns != nil {
		w.cfg.OnConns(-1)
	}
	if w.draining {
		w.checkDrained()
	}
}
