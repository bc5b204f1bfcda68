/*
 * Copyright (c) 2021 The Gnet Authors. All rights reserved.
 *
 * Licensed under the Apache License, Version 2.0 (the "License");
 * you may not use this file except in compliance with the License.
 * You may obtain a copy of the License at
 *
 *      http://www.apache.org/licenses/LICENSE-2.0
 *
 * Unless required by applicable law or agreed to in writing, software
 * distributed under the License is distributed on an "AS IS" BASIS,
 * WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
 * See the License for the specific language governing permissions and
 * limitations under the License.
 *
 */

package io

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Read, Write and Writev below are the system calls of an event loop's
// non-blocking sockets, made with RawSyscall (coregate's change, see
// COREGATE.md): such a call never blocks, and the runtime's bookkeeping
// of one that may (entersyscall and exitsyscall, which let another thread
// take the caller's P while it waits) was a tenth of what the loop spent in
// user space. They return what golang.org/x/sys/unix's functions of the same
// name return: n is -1 with an error, the error an unix.Errno. Call them only
// on descriptors in non-blocking mode.

// zero is the address passed for an empty buffer, as x/sys does.
var zero uintptr

// base is the address of p's first byte, or zero's when p is empty.
func base(p []byte) unsafe.Pointer {
	if len(p) > 0 {
		return unsafe.Pointer(&p[0])
	}
	return unsafe.Pointer(&zero)
}

// Read calls read() on fd, a non-blocking descriptor.
func Read(fd int, p []byte) (int, error) {
	ptr := base(p)
	r, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	n := int(r)
	if e != 0 {
		return n, e
	}
	if raceEnabled && n > 0 {
		raceWriteRange(ptr, n)
	}
	return n, nil
}

// Write calls write() on fd, a non-blocking descriptor.
func Write(fd int, p []byte) (int, error) {
	ptr := base(p)
	if raceEnabled && len(p) > 0 {
		raceReadRange(ptr, len(p))
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITE, uintptr(fd), uintptr(ptr), uintptr(len(p)))
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}

// stackIovecs is how many buffers Writev passes without allocating.
const stackIovecs = 8

// Writev calls writev() on fd, a non-blocking descriptor, with the
// non-empty buffers of iov.
func Writev(fd int, iov [][]byte) (int, error) {
	var stack [stackIovecs]unix.Iovec
	vecs := stack[:0]
	if len(iov) > stackIovecs {
		vecs = make([]unix.Iovec, 0, len(iov))
	}
	for _, b := range iov {
		if len(b) == 0 {
			continue
		}
		if raceEnabled {
			raceReadRange(unsafe.Pointer(&b[0]), len(b))
		}
		v := unix.Iovec{Base: &b[0]}
		v.SetLen(len(b))
		vecs = append(vecs, v)
	}
	if len(vecs) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(unix.SYS_WRITEV, uintptr(fd), uintptr(unsafe.Pointer(&vecs[0])), uintptr(len(vecs)))
	if e != 0 {
		return int(r), e
	}
	return int(r), nil
}

// Readv calls readv() on Linux.
func Readv(fd int, iov [][]byte) (int, error) {
	if len(iov) == 0 {
		return 0, nil
	}
	return unix.Readv(fd, iov)
}
