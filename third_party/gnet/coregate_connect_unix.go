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

//go:build (darwin || dragonfly || freebsd || linux || netbsd || openbsd) && !poll_opt

package gnet

import (
	"net"
	"os"
	"syscall"

	"golang.org/x/sys/unix"

	"github.com/panjf2000/gnet/v2/pkg/queue"
	"github.com/panjf2000/gnet/v2/pkg/socket"
)

// failSoon has failed run with err from the loop's task queue.
func (el *eventloop) failSoon(failed func(error), err error) (int, error) {
	if terr := el.poller.Trigger(queue.LowPriority, func(any) error { failed(err); return nil }, nil); terr != nil {
		return -1, err
	}
	return -1, nil
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
		pc.failed(&net.OpError{Op: "dial", Net: "tcp", Addr: pc.remote, Err: os.NewSyscallError("connect", err)})
		return true, nil
	}
	var local net.Addr
	if lsa, err := unix.Getsockname(fd); err == nil {
		local = socket.SockaddrToTCPOrUnixAddr(lsa)
	}
	c := newStreamConn("tcp", fd, el, pc.sa, local, pc.remote)
	c.ctx = pc.ctx
	// The socket is in the poller for writability: now for reading, as
	// register0 adds a connection.
	if err := el.poller.ModRead(&c.pollAttachment, el.engine.opts.EdgeTriggeredIO); err != nil {
		_ = el.poller.Delete(fd)
		_ = unix.Close(fd)
		c.release()
		pc.failed(&net.OpError{Op: "dial", Net: "tcp", Addr: pc.remote, Err: err})
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
