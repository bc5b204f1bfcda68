package worker

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"testing"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"

	"coregate/admin/spec"
)

// fakeConn is an in-memory gnet.Conn for driving the worker's handlers
// directly: inbound bytes are what the peer sent, out collects what the
// worker wrote. Methods the worker does not use panic (nil embedded Conn).
//
// It has no socket, and its Fd says so: -1, which no descriptor is. The
// worker makes system calls on a client connection's Fd (startLinger's
// shutdown, sweepIdle's SIOCINQ, serverAddr's getsockname), and any other
// number is a descriptor of the test process, open or not as the other
// tests leave it. The fakeConns that said 10 had startLinger shut down
// (SHUT_WR), some 10 000 times in a run of TestFramingInMemory, whatever
// socket the parallel tests had at 10: the kept-alive client connection of
// TestDNSDroppedName (its next answer: "unexpected EOF"), or the UDP socket
// of another test's name server, whose answers then all failed with EPIPE
// (a shutdown of an unconnected UDP socket returns ENOTCONN, and stops its
// sends all the same). On -1 those calls fail with EBADF, as on a closed
// connection, and the worker takes its paths for that: startLinger closes
// at once instead of lingering (cmd/coregate's TestLingeringClose checks
// the lingering close over sockets).
type fakeConn struct {
	gnet.Conn
	in      []byte
	out     []byte
	ctx     any
	laddr   net.Addr
	raddr   net.Addr
	loop    *fakeLoop
	closed  bool
	iovSeen int
	// failWrites makes every write fail as one to a peer that reset does
	// with gnet: the connection is closed (OnClose runs) inside the write.
	failWrites bool
	// reset: SetLinger(0) made the connection's close a reset.
	reset bool
	// peekCopies makes Peek hand back the inbound bytes copied into one
	// of two buffers in turn, as gnet assembles a head that spans two
	// reads anew at each Peek, in memory that Discard gives back to be
	// reused (here: overwritten).
	peekCopies bool
	peekBufs   [2][]byte
	peekNext   int
}

func (c *fakeConn) Peek(n int) ([]byte, error) {
	b := c.in
	if n > 0 && n <= len(c.in) {
		b = c.in[:n]
	}
	if c.peekCopies {
		k := c.peekNext
		c.peekNext = 1 - k
		c.peekBufs[k] = append(c.peekBufs[k][:0], b...)
		return c.peekBufs[k], nil
	}
	return b, nil
}

func (c *fakeConn) Discard(n int) (int, error) {
	for _, b := range c.peekBufs {
		for i := range b {
			b[i] = 'X' // gnet's pool hands the memory to the next Peek
		}
	}
	if n <= 0 || n >= len(c.in) {
		m := len(c.in)
		c.in = c.in[:0]
		return m, nil
	}
	c.in = c.in[:copy(c.in, c.in[n:])]
	return n, nil
}

// errPeerReset is what a write to a fakeConn with failWrites returns.
var errPeerReset = errors.New("connection reset by peer")

func (c *fakeConn) Write(p []byte) (int, error) {
	if c.failWrites {
		_ = c.loop.Close(c)
		return 0, errPeerReset
	}
	c.out = append(c.out, p...)
	return len(p), nil
}

func (c *fakeConn) Writev(bs [][]byte) (int, error) {
	if c.failWrites {
		_ = c.loop.Close(c)
		return 0, errPeerReset
	}
	n := 0
	for _, b := range bs {
		c.out = append(c.out, b...)
		n += len(b)
	}
	c.iovSeen++
	return n, nil
}

func (c *fakeConn) InboundBuffered() int      { return len(c.in) }
func (c *fakeConn) OutboundBuffered() int     { return 0 }
func (c *fakeConn) Context() any              { return c.ctx }
func (c *fakeConn) SetContext(x any)          { c.ctx = x }
func (c *fakeConn) LocalAddr() net.Addr       { return c.laddr }
func (c *fakeConn) RemoteAddr() net.Addr      { return c.raddr }
func (c *fakeConn) Fd() int                   { return -1 }
func (c *fakeConn) SetLinger(sec int) error   { c.reset = sec == 0; return nil }
func (c *fakeConn) EventLoop() gnet.EventLoop { return c.loop }

type fakeLoop struct {
	gnet.EventLoop
	w      *Worker
	queued []gnet.Runnable
}

// Execute queues r for runQueued: the work another goroutine hands to the
// loop.
func (l *fakeLoop) Execute(_ context.Context, r gnet.Runnable) error {
	l.queued = append(l.queued, r)
	return nil
}

// runQueued runs what Execute queued, as the loop would, and what that
// queued in turn.
func (l *fakeLoop) runQueued() {
	for len(l.queued) > 0 {
		r := l.queued[0]
		l.queued = l.queued[1:]
		_ = r.Run(context.Background())
	}
}

func (l *fakeLoop) Close(c gnet.Conn) error {
	l.closeWith(c, nil)
	return nil
}

// peerClosed is the peer's FIN, as gnet reports it: the read that found
// the end of the stream closes the connection with io.EOF.
func (l *fakeLoop) peerClosed(c gnet.Conn) {
	l.closeWith(c, os.NewSyscallError("read", io.EOF))
}

func (l *fakeLoop) closeWith(c gnet.Conn, err error) {
	fc := c.(*fakeConn)
	if fc.closed {
		return
	}
	fc.closed = true
	l.w.OnClose(c, err)
}

// harness is a worker driven in memory, with one client connection and one
// upstream connection already kept alive in the node's pool.
type harness struct {
	w    *Worker
	loop *fakeLoop
	cl   *fakeConn
	up   *fakeConn
}

func newHarness(t testing.TB, s *spec.Spec) *harness {
	t.Helper()
	return newHarnessConfig(t, s, Config{})
}

// newHarnessConfig is newHarness for a worker made with cfg.
func newHarnessConfig(t testing.TB, s *spec.Spec, cfg Config) *harness {
	t.Helper()
	cfg.Listen = []string{"127.0.0.1:0"}
	w := New(cfg)
	if err := w.SetSpec(s, nil); err != nil {
		t.Fatal(err)
	}
	h := &harness{w: w, loop: &fakeLoop{w: w}}
	h.cl = h.newClient()
	h.seedPools()
	return h
}

// newClient opens another client connection to the worker.
func (h *harness) newClient() *fakeConn {
	cl := &fakeConn{loop: h.loop,
		laddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 9080},
		raddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2), Port: 40000}}
	h.w.OnOpen(cl)
	return cl
}

// seedPools parks one kept-alive upstream connection in each node's pool
// that has none; h.up is the last one parked.
func (h *harness) seedPools() {
	snap := h.w.snap.Load()
	for _, rt := range snap.routes.flat() {
		if rt.up == nil {
			continue
		}
		for _, nd := range rt.up.nodes {
			p := h.w.poolFor(rt.up, nd, nil)
			if len(p.idle) > 0 {
				continue
			}
			up := &fakeConn{loop: h.loop,
				laddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 50000},
				raddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: 1980}}
			uc := p.newConn()
			uc.c, uc.io = up, up
			up.ctx = uc
			uc.state = usBusy
			p.put(uc)
			h.up = up
		}
	}
}

// roundTrip sends req from the client, answers resp from the upstream and
// returns what the upstream received and what the client received.
func (h *harness) roundTrip(req, resp []byte) (toUp, toClient []byte) {
	h.cl.out = h.cl.out[:0]
	h.up.out = h.up.out[:0]
	h.cl.in = append(h.cl.in, req...)
	h.w.OnTraffic(h.cl)
	if len(resp) > 0 {
		h.up.in = append(h.up.in, resp...)
		h.w.OnTraffic(h.up)
	}
	return h.up.out, h.cl.out
}

// TestFakeConnNoDescriptor: the harness's connections name no descriptor
// of the test process, and the worker's system calls on them reach none.
// Every number below 64 is open while it runs (the free ones as dups of a
// connected socket of its own), so a fakeConn that named one, as they named
// 10, 20 and 21, fails here whatever the rest of the process has open: its
// number is open, or the refused request's lingering close shuts the
// test's socket down and keeps the fake connection open.
func TestFakeConnNoDescriptor(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	peer, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	rc, err := c.(*net.TCPConn).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var dups []int
	defer func() {
		for _, fd := range dups {
			_ = unix.Close(fd)
		}
	}()
	_ = rc.Control(func(fd uintptr) {
		for {
			d, err := unix.Dup(int(fd))
			if err != nil {
				t.Fatal(err)
			}
			dups = append(dups, d)
			if d >= 63 {
				return
			}
		}
	})

	h := newHarness(t, helloSpec(t, 1))
	for _, fc := range []*fakeConn{h.cl, h.up, h.newClient()} {
		if fd := fc.Fd(); fd >= 0 {
			if _, err := unix.FcntlInt(uintptr(fd), unix.F_GETFD, 0); err == nil {
				t.Errorf("a fake connection names descriptor %d, open in the test process", fd)
			}
		}
	}
	// Answered 400, then closed: the worker's shutdown fails on a
	// connection with no socket, and it closes at once.
	h.cl.in = append(h.cl.in, "GET /hello HTTP/1.1\r\nHost: a\r\nContent-Length: x\r\n\r\n"...)
	h.traffic(h.cl)
	if !h.cl.closed {
		t.Error("the refused connection is open: the worker's shutdown reached a socket")
	}
	_ = rc.Control(func(fd uintptr) {
		info, err := unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		if err != nil {
			t.Fatal(err)
		}
		if info.State != unix.BPF_TCP_ESTABLISHED {
			t.Errorf("the test's own connection is in TCP state %d, not established: a fake connection's system call reached it", info.State)
		}
	})
}
