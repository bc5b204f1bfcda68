// Copyright (c) 2026 The coregate Authors. All rights reserved.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//     http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

//go:build linux && !poll_opt

package gnet

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/panjf2000/gnet/v2/pkg/netpoll"
	"github.com/panjf2000/gnet/v2/pkg/queue"
	"github.com/panjf2000/gnet/v2/pkg/socket"
)

// ConnectTCP starts a non-blocking connect to addr from el's loop, as
// nginx connects to an upstream: the socket joins el's poller for
// writability and the loop finishes the connect when its poll reports it.
// Connected, the connection joins the loop with ctx as its context and
// OnOpen runs for it, as for Register; failed, failed runs on the loop
// with the error, a *net.OpError as net.Dial returns. Neither runs before
// ConnectTCP returns. Call it on el's loop only. It returns the socket's
// fd, which CancelConnect takes, or an error when the connect could not
// start (failed does not run then).
//
// Register dials on a goroutine, which waits in the Go runtime's
// netpoller: when every P is busy (the garbage collector marking, a
// build), nothing may look at that poller for up to sysmon's 10 ms, and
// the request that waits for the connection waits that long.
func ConnectTCP(el EventLoop, addr netip.AddrPort, ctx any, failed func(error)) (int, error) {
	l, ok := el.(*eventloop)
	if !ok {
		return -1, errors.ErrUnsupported
	}
	remote := net.TCPAddrFromAddrPort(addr)
	opErr := func(op string, err error) error { return dialError(remote, os.NewSyscallError(op, err)) }
	var sa unix.Sockaddr
	family := unix.AF_INET
	if ip := addr.Addr().Unmap(); ip.Is4() {
		sa = &unix.SockaddrInet4{Port: int(addr.Port()), Addr: ip.As4()}
	} else {
		family = unix.AF_INET6
		sa = &unix.SockaddrInet6{Port: int(addr.Port()), Addr: ip.As16()}
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, unix.IPPROTO_TCP)
	if err != nil {
		return -1, opErr("socket", err)
	}
	// As net.Dial sets it for a TCP connection.
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err = unix.Connect(fd, sa); err != nil && err != unix.EINPROGRESS {
		_ = unix.Close(fd)
		if err == unix.EAGAIN {
			// Out of local ports on loopback: what net.Dial reports too.
			return -1, opErr("connect", err)
		}
		// Refused at once, or unreachable: reported on the loop like one
		// that fails later, so that failed never runs inside the caller.
		err = opErr("connect", err)
		if l.poller.Trigger(queue.LowPriority, func(any) error { failed(err); return nil }, nil) != nil {
			return -1, err
		}
		return -1, nil
	}
	if err = l.poller.AddWrite(&netpoll.PollAttachment{FD: fd}, false); err != nil {
		_ = unix.Close(fd)
		return -1, opErr("epoll_ctl", err)
	}
	if l.connecting == nil {
		l.connecting = make(map[int]*pendingConnect)
	}
	l.connecting[fd] = &pendingConnect{sa: sa, remote: remote, ctx: ctx, failed: failed}
	return fd, nil
}

// CancelConnect abandons the connect of fd that ConnectTCP started and
// closes its socket; its failed does not run. It returns false when fd
// is no pending connect (it completed or failed already). Call it on
// el's loop only.
func CancelConnect(el EventLoop, fd int) bool {
	l, ok := el.(*eventloop)
	if !ok || l.connecting[fd] == nil {
		return false
	}
	delete(l.connecting, fd)
	_ = l.poller.Delete(fd)
	_ = unix.Close(fd)
	return true
}

// connectDone finishes the pending connect of fd, whose socket the poll
// reported: it joins the loop (OnOpen runs), or its failed runs. It
// returns false when fd is no pending connect.
func (el *eventloop) connectDone(fd int) (bool, error) {
	pc := el.connecting[fd]
	if pc == nil {
		return false, nil
	}
	delete(el.connecting, fd)
	errno, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && errno != 0 {
		err = syscall.Errno(errno)
	}
	if err != nil {
		_ = el.poller.Delete(fd)
		_ = unix.Close(fd)
		pc.failed(dialError(pc.remote, os.NewSyscallError("connect", err)))
		return true, nil
	}
	var local net.Addr
	if lsa, err := unix.Getsockname(fd); err == nil {
		local = socket.SockaddrToTCPOrUnixAddr(lsa)
	}
	c := newStreamConn("tcp", fd, el, pc.sa, local, pc.remote)
	c.ctx = pc.ctx
	// The socket is in the poller for writability: now for reading, and
	// for writing too when edge-triggered, as register0 adds a connection.
	mod := el.poller.ModRead
	if el.engine.opts.EdgeTriggeredIO {
		mod = el.poller.ModReadWrite
	}
	if err := mod(&c.pollAttachment, el.engine.opts.EdgeTriggeredIO); err != nil {
		_ = el.poller.Delete(fd)
		_ = unix.Close(fd)
		c.release()
		pc.failed(dialError(pc.remote, err))
		return true, nil
	}
	el.connections.addConn(c, el.idx)
	return true, el.open(c)
}

// closeConnecting closes the sockets of the connects still pending when
// the loop ends.
func (el *eventloop) closeConnecting() {
	for fd := range el.connecting {
		_ = el.poller.Delete(fd)
		_ = unix.Close(fd)
	}
	el.connecting = nil
}

// dialError is err as net.Dial reports a failed TCP connect to remote.
func dialError(remote *net.TCPAddr, err error) error {
	return &net.OpError{Op: "dial", Net: "tcp", Addr: remote, Err: err}
}
