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

//go:build linux

package gnet

import (
	"os"

	"golang.org/x/sys/unix"

	"github.com/panjf2000/gnet/v2/pkg/errors"
	"github.com/panjf2000/gnet/v2/pkg/netpoll"
)

// PauseRead takes c out of its loop's read interest: data that arrives
// stays in the socket (and the peer's window closes) until ResumeRead. It
// is read back-pressure, which gnet does not offer: gnet reads every
// readable connection into an unbounded inbound buffer. Call it on c's
// loop, from an event handler or a task of that loop.
//
// With WithEdgeTriggeredIO the connection stays in the write interest, so
// that pending output still flushes, and gnet reads nothing more until
// ResumeRead: not the rest of a read that filled the loop's buffer, nor a
// read queued for it. A pause of a paused connection is a no-op. In level-
// triggered mode gnet turns reading back on by itself when it flushes the
// connection's outbound buffer; the caller pauses it again then.
func PauseRead(c Conn) error {
	cc, el, err := streamConn(c)
	if err != nil {
		return err
	}
	var ev uint32
	if el.engine.opts.EdgeTriggeredIO {
		if cc.readPaused {
			return nil
		}
		ev = netpoll.WriteEvents | unix.EPOLLET
	} else if !cc.outboundBuffer.IsEmpty() {
		ev = netpoll.WriteEvents
	}
	if err := modEvents(el, cc.fd, ev); err != nil {
		return err
	}
	cc.readPaused = true
	return nil
}

// ResumeRead puts c back into its loop's read interest. With
// WithEdgeTriggeredIO the change re-arms the socket: data that arrived
// while c was paused is reported at the loop's next poll, with no new
// edge needed. Resuming a connection that is not paused is a no-op there.
// Call it on c's loop.
func ResumeRead(c Conn) error {
	cc, el, err := streamConn(c)
	if err != nil {
		return err
	}
	et := el.engine.opts.EdgeTriggeredIO
	if et && !cc.readPaused {
		return nil
	}
	// the interest register0 gives a connection: reading, and writing too
	// when edge-triggered or when output is pending
	mod := el.poller.ModRead
	if et || !cc.outboundBuffer.IsEmpty() {
		mod = el.poller.ModReadWrite
	}
	if err := mod(&cc.pollAttachment, et); err != nil {
		return err
	}
	cc.readPaused = false
	return nil
}

// ReadPaused reports whether c is paused by PauseRead.
func ReadPaused(c Conn) bool {
	cc, ok := c.(*conn)
	return ok && cc.readPaused
}

func streamConn(c Conn) (*conn, *eventloop, error) {
	cc, ok := c.(*conn)
	if !ok || cc.isDatagram || !cc.opened || cc.loop == nil || cc.loop.poller == nil {
		return nil, nil, errors.ErrUnsupportedOp
	}
	return cc, cc.loop, nil
}

func modEvents(el *eventloop, fd int, ev uint32) error {
	return os.NewSyscallError("epoll_ctl mod",
		unix.EpollCtl(el.poller.FD(), unix.EPOLL_CTL_MOD, fd, &unix.EpollEvent{Fd: int32(fd), Events: ev}))
}
