// Copyright (c) 2023 The Gnet Authors. All rights reserved.
//
// Licensed under the Apache License, Version 2.0 (the "License");
// you may not use this file except in compliance with the License.
// You may obtain a copy of the License at
//
//      http://www.apache.org/licenses/LICENSE-2.0
//
// Unless required by applicable law or agreed to in writing, software
// distributed under the License is distributed on an "AS IS" BASIS,
// WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
// See the License for the specific language governing permissions and
// limitations under the License.

//go:build (darwin || dragonfly || freebsd || linux || netbsd || openbsd) && !gc_opt

package gnet

import (
	"sync/atomic"

	"github.com/panjf2000/gnet/v2/internal/gfd"
)

// connMatrix holds an event loop's connections by descriptor, in a slice
// indexed by the fd (coregate's change, see COREGATE.md): descriptors are
// small and dense, and the lookup at every event was a map access.
type connMatrix struct {
	connCount int32
	conns     []*conn // by fd; nil where the loop has no connection
}

func (cm *connMatrix) init() {}

func (cm *connMatrix) iterate(f func(*conn) bool) {
	for _, c := range cm.conns {
		if c != nil {
			if !f(c) {
				return
			}
		}
	}
}

func (cm *connMatrix) incCount(_ int, delta int32) {
	atomic.AddInt32(&cm.connCount, delta)
}

func (cm *connMatrix) loadCount() (n int32) {
	return atomic.LoadInt32(&cm.connCount)
}

func (cm *connMatrix) addConn(c *conn, index int) {
	c.gfd = gfd.NewGFD(c.fd, index, 0, 0)
	if c.fd >= len(cm.conns) {
		n := 2 * len(cm.conns)
		if n < 64 {
			n = 64
		}
		if n <= c.fd {
			n = c.fd + 1
		}
		grown := make([]*conn, n)
		copy(grown, cm.conns)
		cm.conns = grown
	}
	cm.conns[c.fd] = c
	cm.incCount(0, 1)
}

func (cm *connMatrix) delConn(c *conn) {
	if c.fd >= 0 && c.fd < len(cm.conns) && cm.conns[c.fd] == c {
		cm.conns[c.fd] = nil
	}
	cm.incCount(0, -1)
}

func (cm *connMatrix) getConn(fd int) *conn {
	if uint(fd) < uint(len(cm.conns)) {
		return cm.conns[fd]
	}
	return nil
}

/*
func (cm *connMatrix) getConnByGFD(fd gfd.GFD) *conn {
	return cm.getConn(fd.Fd())
}
*/
