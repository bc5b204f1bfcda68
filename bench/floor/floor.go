// Package floor is the benchmark's I/O floor: the least work a reverse proxy
// does per request on a machine, with nothing of HTTP but where each message
// ends. One event loop waits in epoll_wait, reads a client's request, writes
// it to that client's upstream connection, waits, reads the response and
// writes it back: the system calls of coregate's worker and of nginx's, and
// no parsing, routing, header rewriting or timers. Measured beside both in
// the same rounds, it shows how much of their cost per request is their own
// and how much the machine charges any proxy for the same I/O.
//
// It is an instrument, never a gateway: it forwards the client's bytes as
// they came, takes requests without a body only (a request ends at its first
// empty line), and needs a Content-Length on every response, as the bench
// upstream sends. Anything else closes the connection.
package floor

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"runtime"
	"strconv"
	"sync"
	"unsafe"

	"coregate/bench/upstream"

	"golang.org/x/sys/unix"
)

// bufSize bounds one request and one response. The bench's requests are a
// few hundred bytes and its responses 1 KiB and a header.
const bufSize = 8192

// conn is one client connection and the upstream connection that serves it
// for the client connection's life (what nginx's keep-alive pool amounts to
// under a fixed set of client connections).
type conn struct {
	cfd, ufd int
	// in holds the client's bytes not yet sent upstream; busy is set while
	// a request is upstream, so pipelined requests wait in in.
	in   [bufSize]byte
	nin  int
	busy bool
	// out holds the response being read; want is its total length once its
	// header is complete, else 0.
	out  [bufSize]byte
	nout int
	want int
}

// Server is a running floor loop.
type Server struct {
	Addr string // the address it listens on

	lfd, epfd, efd int
	up             unix.SockaddrInet4
	conns          []*conn // by descriptor, client's and upstream's
	done           chan struct{}
	stopOnce       sync.Once
	err            error
}

// Start listens on listen (host:port, IPv4) and serves with one event loop
// on its own locked OS thread, each client connection through its own
// connection to upstream.
func Start(listen, upstream string) (*Server, error) {
	la, up, err := resolve(listen, upstream)
	if err != nil {
		return nil, err
	}
	s := &Server{lfd: -1, epfd: -1, efd: -1, up: up, conns: make([]*conn, 1024), done: make(chan struct{})}
	if err := s.open(la); err != nil {
		s.closeAll()
		return nil, err
	}
	go s.loop()
	return s, nil
}

// resolve reads a floor's listen and upstream addresses (host:port, IPv4).
func resolve(listen, upstream string) (*net.TCPAddr, unix.SockaddrInet4, error) {
	var up unix.SockaddrInet4
	ua, err := net.ResolveTCPAddr("tcp4", upstream)
	if err != nil {
		return nil, up, fmt.Errorf("floor: upstream: %w", err)
	}
	la, err := net.ResolveTCPAddr("tcp4", listen)
	if err != nil {
		return nil, up, fmt.Errorf("floor: listen: %w", err)
	}
	up.Port = ua.Port
	copy(up.Addr[:], ua.IP.To4())
	return la, up, nil
}

// listenTCP opens a listening socket on la, with flags added to its type
// (SOCK_NONBLOCK for the epoll loop), and returns it and the address it
// got. On an error it returns -1, the socket closed.
func listenTCP(la *net.TCPAddr, flags int) (int, string, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|flags, 0)
	if err != nil {
		return -1, "", fmt.Errorf("floor: socket: %w", err)
	}
	fail := func(err error) (int, string, error) {
		unix.Close(fd)
		return -1, "", err
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	sa := &unix.SockaddrInet4{Port: la.Port}
	copy(sa.Addr[:], la.IP.To4())
	if err := unix.Bind(fd, sa); err != nil {
		return fail(fmt.Errorf("floor: bind %s: %w", la, err))
	}
	if err := unix.Listen(fd, 1024); err != nil {
		return fail(fmt.Errorf("floor: listen: %w", err))
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		return fail(fmt.Errorf("floor: getsockname: %w", err))
	}
	g := got.(*unix.SockaddrInet4)
	return fd, net.JoinHostPort(net.IP(g.Addr[:]).String(), strconv.Itoa(g.Port)), nil
}

func (s *Server) open(la *net.TCPAddr) error {
	var err error
	if s.lfd, s.Addr, err = listenTCP(la, unix.SOCK_NONBLOCK); err != nil {
		return err
	}
	if s.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return fmt.Errorf("floor: epoll_create1: %w", err)
	}
	if s.efd, err = unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC); err != nil {
		return fmt.Errorf("floor: eventfd: %w", err)
	}
	for _, fd := range []int{s.lfd, s.efd} {
		if err := s.watch(fd); err != nil {
			return err
		}
	}
	return nil
}

func (s *Server) watch(fd int) error {
	if err := unix.EpollCtl(s.epfd, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(fd)}); err != nil {
		return fmt.Errorf("floor: epoll_ctl: %w", err)
	}
	return nil
}

// Stop ends the loop, closes every connection and returns the loop's error.
func (s *Server) Stop() error {
	s.stopOnce.Do(func() {
		one := [8]byte{1}
		_, _ = unix.Write(s.efd, one[:])
	})
	<-s.done
	return s.err
}

func (s *Server) loop() {
	runtime.LockOSThread()
	defer close(s.done)
	defer s.closeAll()
	events := make([]unix.EpollEvent, 128)
	for {
		// A blocking poll, as nginx's and the worker's loops make: the
		// runtime's entersyscall/exitsyscall around it, as in theirs.
		n, err := unix.EpollWait(s.epfd, events, -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			s.err = fmt.Errorf("floor: epoll_wait: %w", err)
			return
		}
		for i := range n {
			fd := int(events[i].Fd)
			switch {
			case fd == s.efd:
				return
			case fd == s.lfd:
				s.accept()
			default:
				if c := s.conn(fd); c != nil {
					if fd == c.cfd {
						s.fromClient(c)
					} else {
						s.fromUpstream(c)
					}
				}
			}
		}
	}
}

func (s *Server) conn(fd int) *conn {
	if fd < len(s.conns) {
		return s.conns[fd]
	}
	return nil
}

func (s *Server) set(fd int, c *conn) {
	for fd >= len(s.conns) {
		s.conns = append(s.conns, make([]*conn, len(s.conns))...)
	}
	s.conns[fd] = c
}

func (s *Server) accept() {
	for {
		cfd, _, err := unix.Accept4(s.lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			return // EAGAIN, or an error the next event repeats
		}
		_ = unix.SetsockoptInt(cfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		ufd, err := dialUpstream(&s.up)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			unix.Close(cfd)
			continue
		}
		c := &conn{cfd: cfd, ufd: ufd}
		s.set(cfd, c)
		s.set(ufd, c)
		if s.watch(cfd) != nil || s.watch(ufd) != nil {
			s.drop(c)
		}
	}
}

// dialUpstream connects to the upstream, blocking: a loopback connect completes at
// once, and it happens once per client connection. The socket it returns
// is non-blocking.
func dialUpstream(up *unix.SockaddrInet4) (int, error) {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, fmt.Errorf("floor: socket: %w", err)
	}
	if err := unix.Connect(fd, up); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("floor: connect upstream: %w", err)
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return -1, fmt.Errorf("floor: nonblock: %w", err)
	}
	return fd, nil
}

func (s *Server) drop(c *conn) {
	for _, fd := range []int{c.cfd, c.ufd} {
		if s.conn(fd) == c {
			s.conns[fd] = nil
		}
		unix.Close(fd)
	}
}

var blankLine = []byte("\r\n\r\n")

func (s *Server) fromClient(c *conn) {
	if c.nin == len(c.in) {
		s.drop(c) // a request larger than the buffer: not the bench's
		return
	}
	n, errno := rawRead(c.cfd, c.in[c.nin:])
	if errno == unix.EAGAIN {
		return
	}
	if n <= 0 {
		s.drop(c)
		return
	}
	c.nin += n
	s.next(c)
}

// next sends the client's next whole request upstream, unless one is there.
func (s *Server) next(c *conn) {
	if c.busy {
		return
	}
	end := bytes.Index(c.in[:c.nin], blankLine)
	if end < 0 {
		return
	}
	end += len(blankLine)
	if !writeAll(c.ufd, c.in[:end]) {
		s.drop(c)
		return
	}
	c.nin = copy(c.in[:], c.in[end:c.nin])
	c.busy = true
}

func (s *Server) fromUpstream(c *conn) {
	if c.nout == len(c.out) {
		s.drop(c)
		return
	}
	n, errno := rawRead(c.ufd, c.out[c.nout:])
	if errno == unix.EAGAIN {
		return
	}
	if n <= 0 || !c.busy {
		s.drop(c)
		return
	}
	c.nout += n
	if c.want == 0 {
		n, ok := responseLength(c.out[:c.nout])
		if !ok {
			s.drop(c)
			return
		}
		c.want = n
	}
	if c.want == 0 || c.nout < c.want {
		return
	}
	if c.nout > c.want || !writeAll(c.cfd, c.out[:c.want]) {
		s.drop(c) // bytes past the response, or a client that stopped reading
		return
	}
	c.nout, c.want, c.busy = 0, 0, false
	s.next(c) // a pipelined request already read
}

// responseLength is the length of the response at the start of b, its
// head and its body, once b holds the whole head; 0 before. false: a head
// the floor cannot frame (see bodyLength).
func responseLength(b []byte) (int, bool) {
	head := bytes.Index(b, blankLine)
	if head < 0 {
		return 0, true
	}
	cl, ok := bodyLength(b[:head])
	return head + len(blankLine) + cl, ok
}

// bodyLength reads the Content-Length of a response head (without its
// final CRLFCRLF, upstream.ContentLength): false when there is none, it is
// malformed, or the body would not fit the buffer.
func bodyLength(head []byte) (int, bool) {
	n, err := upstream.ContentLength(head)
	if err != nil || n < 0 || n > bufSize {
		return 0, false
	}
	return n, true
}

// rawRead and rawWrite make the call without the runtime's entersyscall and
// exitsyscall, as the worker's loop does: a non-blocking socket never
// blocks.
func rawRead(fd int, b []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}

func rawWrite(fd int, b []byte) (int, unix.Errno) {
	n, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	return int(n), e
}

// writeAll writes b in one call; a message of a few KiB always fits an idle
// socket's buffer, and one that does not is reported as a failure rather
// than queued, which the floor has no need for.
func writeAll(fd int, b []byte) bool {
	n, e := rawWrite(fd, b)
	return e == 0 && n == len(b)
}

func (s *Server) closeAll() {
	for fd, c := range s.conns {
		if c != nil && fd == c.cfd {
			s.drop(c)
		}
	}
	for _, fd := range []int{s.lfd, s.epfd, s.efd} {
		if fd >= 0 {
			unix.Close(fd)
		}
	}
}
