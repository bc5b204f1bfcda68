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
	"runtime"
	"time"
)

// YieldInterval is the longest a polling loop runs between two passes
// through the Go scheduler (runtime.Gosched).
//
// Upstream gnet yields after every empty poll, which is cheap with
// GOMAXPROCS=1 but, with a second P idle, wakes a spinning thread each
// time the loop goes to sleep. With GOMAXPROCS=1, on the other hand, the
// runtime's sysmon takes the loop's P away whenever epoll_wait blocks
// across two of its ticks (20 µs and up), handing it to another thread.
// A loop run with GOMAXPROCS=2 keeps its P while it blocks, as long as it
// passes through the scheduler at least every 10 ms (forcePreemptNS);
// otherwise sysmon treats it as a goroutine hogging its P and takes the P
// at the next system call. Yielding every 5 ms keeps inside that with a
// margin of two, and costs one wakeup of an idle thread (a futex call)
// per yield: 0.04 per request at 10 000 req/s, against 0.16 with the
// 1 ms this was before (see COREGATE.md, change 1).
const YieldInterval = 5 * time.Millisecond

// WakeHook is called on a polling loop's goroutine each time epoll_wait
// (kevent) comes back with events, before any of them is handled, with the
// time it came back on the monotonic clock, as a duration since the origin
// given with the hook: a handler can keep a clock that is fresh at every
// wake-up without reading the system clock itself.
type WakeHook func(sinceOrigin time.Duration)

// loopClock is the clock of an epoll polling loop. It reads the monotonic
// clock as often as the yield alone did (once before each poll that does
// not block, once after each that may have blocked), and that one reading
// serves both the yield and the WakeHook. Owned by the loop's goroutine.
type loopClock struct {
	origin    time.Time     // a time.Now() reading; set by SetWakeHook or start
	now       time.Duration // last reading, since origin
	lastYield time.Duration
}

func (c *loopClock) start() {
	if c.origin.IsZero() {
		c.origin = time.Now()
	}
	c.now = time.Since(c.origin)
	c.lastYield = c.now
}

// beforePoll runs before each poll. Before one that does not block (the
// last poll filled the event list) it reads the clock, and that reading is
// the wake-up time of the poll too. It passes through the scheduler when
// YieldInterval has passed since the last pass, and reads the clock again
// after it: other goroutines may have run.
func (c *loopClock) beforePoll(blocking bool) {
	if !blocking {
		c.now = time.Since(c.origin)
	}
	if c.now-c.lastYield >= YieldInterval {
		runtime.Gosched()
		c.now = time.Since(c.origin)
		c.lastYield = c.now
	}
}

// afterPoll runs when a poll came back with events and returns the time it
// came back: a new reading when the poll may have blocked.
func (c *loopClock) afterPoll(blocked bool) time.Duration {
	if blocked {
		c.now = time.Since(c.origin)
	}
	return c.now
}
