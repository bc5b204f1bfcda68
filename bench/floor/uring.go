package floor

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// RingServer is the I/O floor on io_uring: the same proxy as Server, one
// request upstream at a time per client connection, with every receive and
// send an operation on one ring and one io_uring_enter per wake-up where
// Server makes an epoll_wait, a read and a write per event. Beside Server
// in the same rounds it shows how much of the floor is the system calls
// themselves, and so what a worker loop on io_uring could save on the
// machine measured.
type RingServer struct {
	Addr string

	lfd, efd int
	r        *ring
	up       unix.SockaddrInet4
	conns    []*rconn // by id; an id is never reused
	efdBuf   [8]byte
	sends    uint32 // sends filled since the last enter
	// urgent is set when a completion of a send filled since the last
	// enter leads to more work that no other completion would bring: a
	// reply whose connection holds its next request already.
	urgent   bool
	done     chan struct{}
	stopOnce sync.Once
	err      error
}

// rconn is a client connection and its upstream connection on the ring.
// in and out are what conn's are. An operation in flight names a part of
// one that the loop leaves alone until its completion is reaped: the
// client's receive writes in[nin:], a send upstream reads in[start:], the
// upstream's receive writes out[nout:], the reply reads out[:want].
type rconn struct {
	id       uint64
	cfd, ufd int
	in       [bufSize]byte
	start    int // in[start:nin] is not yet sent upstream
	nin      int
	sent     int // bytes of in[start:] in flight upstream; 0 when none
	out      [bufSize]byte
	nout     int
	want     int
	upBusy   bool // a request is upstream, until its response is relayed
	replying bool // out[:want] is in flight to the client
	recvC    bool // a receive from the client is in flight
	recvU    bool // a receive from the upstream is in flight
	ops      int  // operations in flight
	dead     bool
}

// Kinds of operation, in the low byte of an SQE's user data; the
// connection's id is above it.
const (
	kAccept = iota
	kStop
	kRecvClient
	kRecvUp
	kSendClient
	kSendUp
)

// Run starts the floor on epoll (Start), or on io_uring when ring is set
// (StartRing), and returns the address it listens on and its Stop.
func Run(listen, upstream string, ring bool) (addr string, stop func() error, err error) {
	if ring {
		s, err := StartRing(listen, upstream)
		if err != nil {
			return "", nil, err
		}
		return s.Addr, s.Stop, nil
	}
	s, err := Start(listen, upstream)
	if err != nil {
		return "", nil, err
	}
	return s.Addr, s.Stop, nil
}

// StartRing is Start on io_uring.
func StartRing(listen, upstream string) (*RingServer, error) {
	la, up, err := resolve(listen, upstream)
	if err != nil {
		return nil, err
	}
	s := &RingServer{lfd: -1, efd: -1, up: up, conns: make([]*rconn, 0, 64), done: make(chan struct{})}
	if err := s.open(la); err != nil {
		s.closeAll()
		return nil, err
	}
	ready := make(chan error, 1)
	go s.loop(ready)
	if err := <-ready; err != nil {
		<-s.done
		return nil, err
	}
	return s, nil
}

// open makes the listening socket, blocking: the ring's accept waits in
// the kernel, not in the loop.
func (s *RingServer) open(la *net.TCPAddr) error {
	var err error
	if s.lfd, s.Addr, err = listenTCP(la, 0); err != nil {
		return err
	}
	if s.efd, err = unix.Eventfd(0, unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("floor: eventfd: %w", err)
	}
	return nil
}

// Stop ends the loop, closes every connection and returns the loop's error.
func (s *RingServer) Stop() error {
	s.stopOnce.Do(func() {
		one := [8]byte{1}
		_, _ = unix.Write(s.efd, one[:])
	})
	<-s.done
	return s.err
}

// loop runs on one locked thread: the ring is created there, as
// IORING_SETUP_SINGLE_ISSUER wants of every later call.
func (s *RingServer) loop(ready chan<- error) {
	runtime.LockOSThread()
	defer close(s.done)
	defer s.closeAll()
	r, err := newRing(1024)
	if err != nil {
		ready <- err
		return
	}
	s.r = r
	s.post(opAccept, s.lfd, nil, kAccept, nil)
	s.post(opRead, s.efd, s.efdBuf[:], kStop, nil)
	ready <- nil
	stop := false
	handle := func(c *cqe) {
		if c.userData&0xff == kStop {
			stop = true
			return
		}
		s.complete(c)
	}
	for !stop {
		// Wait for one completion beyond the sends just filled, which
		// finish inside the call when the socket has room: one call per
		// wake-up, as one epoll_wait is. Unless a send's completion is
		// itself what the loop must act on next.
		wait := 1 + s.sends
		if s.urgent {
			wait = 1
		}
		s.sends, s.urgent = 0, false
		if err := r.enter(wait); err != nil {
			s.err = err
			return
		}
		r.reap(handle)
		if s.err != nil {
			return
		}
	}
}

// post fills an SQE for op on fd over b, for connection c (nil for the
// listener and the stop event). A queue full of unsubmitted SQEs is
// submitted first; a failure of that ends the loop.
func (s *RingServer) post(op uint8, fd int, b []byte, kind uint64, c *rconn) {
	e := s.r.get()
	if e == nil {
		if err := s.r.enter(0); err != nil {
			s.err = err
			return
		}
		s.sends = 0
		if e = s.r.get(); e == nil {
			s.err = errRingFull
			return
		}
	}
	e.opcode = op
	e.fd = int32(fd)
	if len(b) > 0 {
		e.addr = uint64(uintptr(unsafe.Pointer(&b[0])))
		e.len = uint32(len(b))
	}
	switch op {
	case opAccept:
		e.opFlags = unix.SOCK_CLOEXEC
	case opRecv:
		e.ioprio = recvPollFirst
	case opSend:
		e.opFlags = unix.MSG_NOSIGNAL
		s.sends++
	}
	e.userData = kind
	if c != nil {
		e.userData |= c.id << 8
		c.ops++
	}
}

func (s *RingServer) complete(q *cqe) {
	kind := q.userData & 0xff
	if kind == kAccept {
		s.accepted(int(q.res))
		return
	}
	id := q.userData >> 8
	if id >= uint64(len(s.conns)) || s.conns[id] == nil {
		return
	}
	c := s.conns[id]
	c.ops--
	if c.dead {
		if c.ops == 0 {
			s.conns[id] = nil // the kernel holds nothing of it now
		}
		return
	}
	res := int(q.res)
	switch kind {
	case kRecvClient:
		c.recvC = false
		if res <= 0 {
			s.drop(c)
			return
		}
		c.nin += res
		s.forward(c)
		s.armClient(c)
	case kSendUp:
		if res != c.sent {
			s.drop(c)
			return
		}
		c.start += c.sent
		c.sent = 0
		s.armClient(c)
	case kRecvUp:
		c.recvU = false
		if res <= 0 || !c.upBusy {
			s.drop(c) // closed, or bytes with no request upstream
			return
		}
		c.nout += res
		if c.want == 0 {
			n, ok := responseLength(c.out[:c.nout])
			if !ok {
				s.drop(c)
				return
			}
			c.want = n
		}
		if c.want == 0 || c.nout < c.want {
			s.armUp(c)
			return
		}
		if c.nout > c.want {
			s.drop(c) // bytes past the response
			return
		}
		c.replying = true
		s.post(opSend, c.cfd, c.out[:c.want], kSendClient, c)
		if bytes.Contains(c.in[c.start+c.sent:c.nin], blankLine) {
			s.urgent = true // its completion forwards the next request
		}
	case kSendClient:
		if res != c.want {
			s.drop(c) // a client that stopped reading
			return
		}
		c.nout, c.want, c.replying, c.upBusy = 0, 0, false, false
		s.armUp(c)
		s.forward(c) // a pipelined request already read
		s.armClient(c)
	}
}

// forward sends the client's next whole request upstream, unless one is
// there.
func (s *RingServer) forward(c *rconn) {
	if c.upBusy || c.dead {
		return
	}
	end := bytes.Index(c.in[c.start:c.nin], blankLine)
	if end < 0 {
		return
	}
	c.sent = end + len(blankLine)
	c.upBusy = true
	s.post(opSend, c.ufd, c.in[c.start:c.start+c.sent], kSendUp, c)
}

// armClient posts the next receive from the client, first moving the
// bytes not yet sent to the front of in. It waits while a send upstream is
// in flight, which the move would disturb.
func (s *RingServer) armClient(c *rconn) {
	if c.dead || c.recvC || c.sent > 0 {
		return
	}
	if c.start > 0 {
		c.nin = copy(c.in[:], c.in[c.start:c.nin])
		c.start = 0
	}
	if c.nin == len(c.in) {
		s.drop(c) // a request larger than the buffer: not the bench's
		return
	}
	c.recvC = true
	s.post(opRecv, c.cfd, c.in[c.nin:], kRecvClient, c)
}

// armUp posts the next receive from the upstream, unless one is in flight
// or out is being relayed.
func (s *RingServer) armUp(c *rconn) {
	if c.dead || c.recvU || c.replying {
		return
	}
	if c.nout == len(c.out) {
		s.drop(c)
		return
	}
	c.recvU = true
	s.post(opRecv, c.ufd, c.out[c.nout:], kRecvUp, c)
}

func (s *RingServer) accepted(cfd int) {
	if cfd == -int(unix.ECANCELED) {
		return
	}
	s.post(opAccept, s.lfd, nil, kAccept, nil)
	if cfd < 0 {
		return // an error the next accept repeats or gets past
	}
	_ = unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	ufd, err := dialUpstream(&s.up)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		unix.Close(cfd)
		return
	}
	c := &rconn{id: uint64(len(s.conns)), cfd: cfd, ufd: ufd}
	s.conns = append(s.conns, c)
	s.armClient(c)
	s.armUp(c)
}

// drop shuts both sockets down, which ends the operations in flight on
// them, and closes them; the conn stays in s.conns until the last of
// those completes.
func (s *RingServer) drop(c *rconn) {
	if c.dead {
		return
	}
	c.dead = true
	for _, fd := range []int{c.cfd, c.ufd} {
		_ = unix.Shutdown(fd, unix.SHUT_RDWR)
		unix.Close(fd)
	}
	if c.ops == 0 {
		s.conns[c.id] = nil
	}
}

func (s *RingServer) closeAll() {
	for _, c := range s.conns {
		if c != nil {
			s.drop(c)
		}
	}
	if s.lfd >= 0 {
		// The accept in flight holds the socket open past close; shutting
		// it down stops the listening.
		_ = unix.Shutdown(s.lfd, unix.SHUT_RDWR)
	}
	if s.r != nil {
		s.r.close()
	}
	for _, fd := range []int{s.lfd, s.efd} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
