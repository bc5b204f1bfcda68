package worker

import (
	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// Read back-pressure. gnet reads every readable connection into an unbounded
// inbound buffer and offers no way to stop reading one. A proxy must stop
// reading the side that produces faster than the other side consumes, or a
// fast uploader (or origin) behind a slow peer grows memory without bound.
//
// pauseRead takes the connection's fd out of the loop's read interest with
// epoll_ctl(EPOLL_CTL_MOD) on the loop's own epoll instance; resumeRead puts
// it back. The epoll fd is the loop's own (gnet.PollerFD, an accessor of
// the carried gnet). gnet itself only switches a fd between "read" and
// "read+write", so it may re-enable reading on its own when it flushes that
// connection's outbound buffer: the worker then pauses it again on the next
// OnTraffic, so at most one read buffer (64 KiB) slips through each time.

func (w *Worker) pauseRead(c gnet.Conn) bool {
	if w.epfd < 0 {
		return false
	}
	var ev uint32
	if c.OutboundBuffered() > 0 {
		ev = unix.EPOLLOUT
	}
	return unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, c.Fd(), &unix.EpollEvent{Fd: int32(c.Fd()), Events: ev}) == nil
}

func (w *Worker) resumeRead(c gnet.Conn) {
	if w.epfd < 0 {
		return
	}
	ev := uint32(unix.EPOLLIN | unix.EPOLLPRI)
	if c.OutboundBuffered() > 0 {
		ev |= unix.EPOLLOUT
	}
	_ = unix.EpollCtl(w.epfd, unix.EPOLL_CTL_MOD, c.Fd(), &unix.EpollEvent{Fd: int32(c.Fd()), Events: ev})
}
