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

package netpoll

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// rawWaitMax is the longest timeout, in milliseconds, of a poll that
// boundedEpollWait makes without the runtime's system call bookkeeping: the
// YieldWithin bound of a loop with a tick, rounded up.
const rawWaitMax = int((YieldWithin + 999999) / 1000000)

// boundedEpollWait is epoll_wait(2) on the loop's epoll instance (coregate's
// change 9, see COREGATE.md). A poll whose timeout is at most rawWaitMax
// is made with RawSyscall: the runtime's entersyscall and exitsyscall,
// which let another thread take the P of a goroutine blocked in the kernel,
// cost about 300 ns a call on the VMs coregate is measured on, and a
// worker's loop neither wants its P taken (its second P is idle, and the
// runtime leaves a goroutine blocked that briefly its P anyway) nor blocks
// long enough for anything to need it: a stop-the-world waits at most
// that long for the loop to come back. gnet's poll_opt poller makes its
// polls that do not block the same way. A poll that may block longer or
// for good (msec < 0, a loop without a tick) is an ordinary system call.
func boundedEpollWait(epfd int, events []unix.EpollEvent, msec int) (int, error) {
	if msec < 0 || msec > rawWaitMax || len(events) == 0 {
		return unix.EpollWait(epfd, events, msec)
	}
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])),
		uintptr(len(events)), uintptr(msec), 0, 0)
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}
