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

package netpoll

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// entersyscallblock and exitsyscall bracket a system call that is known
// to block: the first hands the goroutine's P to the runtime before the
// call (handoffp), where entersyscall leaves it for sysmon to take after
// a while; the second takes a P back. Both are among the runtime's
// functions that packages may link to (go.dev/issue/67401).
//
//go:linkname entersyscallblock runtime.entersyscallblock
func entersyscallblock()

//go:linkname exitsyscall runtime.exitsyscall
func exitsyscall()

// epollWaitParked is epoll_wait for a loop that has been idle: its P is
// given back for the call, so that the process's every P is idle while
// the loop waits and the runtime's sysmon sleeps until it returns, not
// every 10 ms. It costs a P hand-off each way (a lock, and a wake-up of
// sysmon on the way back), which an idle loop can afford and a busy one
// should not pay at every poll.
//
//go:nosplit
func epollWaitParked(epfd int, events unsafe.Pointer, size, msec int) (int, unix.Errno) {
	entersyscallblock()
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(events), uintptr(size), uintptr(msec), 0, 0)
	exitsyscall()
	return int(r), e
}

// pollTimeout returns the timeout of the loop's next poll (msec: 0 for a
// poll that does not block, -1 otherwise) and whether it parks
// (loopClock.pollWait); a loop without a tick polls as asked and never
// parks.
func (p *Poller) pollTimeout(msec int) (wait int, park bool) {
	if p.tick.fn == nil {
		return msec, false
	}
	return p.clock.pollWait(&p.tick, msec)
}

// pollParked is the poll of a loop idle for ParkAfter (loopClock.idle):
// epoll_wait until the next tick with the loop's P given back, then a
// pass through the scheduler on the P it gets back (loopClock.unpark),
// which also reads the clock for the time the poll came back.
func (p *Poller) pollParked(el *eventList, msec int) (int, error) {
	n, e := epollWaitParked(p.fd, unsafe.Pointer(&el.events[0]), len(el.events), msec)
	p.clock.unpark()
	if e != 0 {
		return n, e
	}
	return n, nil
}
