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

//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package gnet

// PollerFD returns the fd of the epoll instance (kqueue) behind el, or -1
// when el is not an event loop of this package. The fd belongs to the
// loop: use it on the loop, for fds of that loop only, and never close it.
func PollerFD(el EventLoop) int {
	if l, ok := el.(*eventloop); ok && l.poller != nil {
		return l.poller.FD()
	}
	return -1
}

// ListenerFDs appends the fds of el's listening sockets to fds and returns
// the result; with WithReusePort each event loop has sockets of its own,
// watched by its own poller. Call it on el's goroutine (from an event
// handler or a Runnable run by el): the fds belong to el.
func ListenerFDs(el EventLoop, fds []int) []int {
	if l, ok := el.(*eventloop); ok {
		for fd := range l.listeners {
			fds = append(fds, fd)
		}
	}
	return fds
}
