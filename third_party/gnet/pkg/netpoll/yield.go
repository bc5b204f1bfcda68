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
	"time"
	_ "unsafe" // for go:linkname
)

// goyield is the runtime's yield of the processor that puts the calling
// goroutine on its P's own run queue, where runtime.Gosched puts it on the
// global one and wakes an idle P's thread to take it (a futex call and a
// context switch each time). It is one of the runtime's functions that
// packages may link to (go.dev/issue/67401), and it passes through the
// scheduler as Gosched does: the P's schedtick advances, which is what
// keeps sysmon from treating the loop as a goroutine hogging its P, and
// goroutines waiting in the P's run queue run first.
//
//go:linkname goyield runtime.goyield
func goyield()

// YieldInterval is the longest a polling loop runs between two passes
// through the Go scheduler (goyield).
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
// margin of two. With runtime.Gosched each yield woke an idle thread (a
// futex call): 0.04 per request at 10 000 req/s, 0.16 with the 1 ms this
// was before (see COREGATE.md, change 1); goyield wakes none (change 8).
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
	origin     time.Time     // a time.Now() reading; set by SetWakeHook or start
	now        time.Duration // last reading, since origin
	lastYield  time.Duration
	lastEvents time.Duration // when a poll last came back with events
}

func (c *loopClock) start() {
	if c.origin.IsZero() {
		c.origin = time.Now()
	}
	c.now = time.Since(c.origin)
	c.lastYield = c.now
	c.lastEvents = c.now
}

// ParkAfter is how long a loop with a tick hook goes without events
// before its blocking polls park: they wait until the next tick, not
// YieldWithin, with the loop's P given back to the runtime for the call
// (epollWaitParked), so that an idle process has no P running and sysmon
// sleeps until the loop comes back, where it wakes every 10 ms beside a
// loop that keeps its P.
//
// Coming back costs more than the hand-off: the P the loop takes wakes
// sysmon, which then polls every 20 µs for a millisecond and backs off
// from there, for as long as any P runs (about 0.8 ms of CPU on a 2-vCPU
// VM when the loop goes on polling with its P for YieldWithin). A loop
// parked after 9 ms cost 3.4 times the CPU per request of one that never
// parks at 50 req/s; after ParkAfter only a loop idle long enough for its
// sysmon wake-ups to have cost more parks, and at a tick (every 50 ms in
// a worker) it parks again at once, before sysmon's first poll.
const ParkAfter = 200 * time.Millisecond

// idle reports whether the loop has had no events for ParkAfter at c.now.
func (c *loopClock) idle() bool {
	return c.now-c.lastEvents >= ParkAfter
}

// pollWait returns the timeout of the next poll at c.now of a loop with
// tick t (msec: 0 for a poll that does not block, -1 otherwise), and
// whether that poll parks: until the next tick, and the next yield, at
// most; a loop idle for ParkAfter waits until the next tick with its P
// given back (pollParked).
func (c *loopClock) pollWait(t *loopTick, msec int) (wait int, park bool) {
	wait = t.timeout(msec, c.now)
	if wait != 0 && c.idle() {
		return wait, true
	}
	return c.timeout(wait), false
}

// unpark runs when a parked poll comes back, on the P the loop got back:
// a pass through the scheduler, so that the P's scheduling tick moves and
// sysmon counts the loop's time on it from now. Its clock reading is the
// time the poll came back, for afterPoll and timedOut as well.
func (c *loopClock) unpark() {
	goyield()
	c.now = time.Since(c.origin)
	c.lastYield = c.now
}

// beforePoll runs before each poll. Unless blocking is set, it reads the
// clock: the loops call it so before a poll that does not block (the last
// poll filled the event list), whose wake-up time that reading is too, and
// a loop with a tick before every poll, whose timeout counts from it. It
// passes through the scheduler when
// YieldInterval has passed since the last pass, and reads the clock again
// after it: other goroutines may have run.
func (c *loopClock) beforePoll(blocking bool) {
	if !blocking {
		c.now = time.Since(c.origin)
	}
	if c.now-c.lastYield >= YieldInterval {
		goyield()
		c.now = time.Since(c.origin)
		c.lastYield = c.now
	}
}

// YieldWithin is the longest a polling loop with a tick hook blocks in
// epoll_wait since it last passed through the scheduler: its polls time
// out then, and it yields (beforePoll) before it polls again.
//
// A goroutine that stays in a system call for forcePreemptNS (10 ms) since
// it last passed through the scheduler has its P taken by the runtime's
// sysmon, which then polls at its shortest period (20 µs) for about a
// millisecond and backs off from there: a loop that blocked in epoll_wait
// until its next tick, 50 ms away, set off that burst every tick, about a
// thousand sysmon wake-ups a second in an idle worker. Woken a little
// before that, the loop keeps its P and sysmon sleeps 10 ms at a time.
const YieldWithin = 9 * time.Millisecond

// timeout bounds msec, the timeout of a poll with a tick (see loopTick),
// to YieldWithin since the loop last yielded.
func (c *loopClock) timeout(msec int) int {
	if msec == 0 {
		return 0
	}
	left := c.lastYield + YieldWithin - c.now
	if left <= 0 {
		return 0
	}
	ms := int((left + time.Millisecond - 1) / time.Millisecond)
	if msec < 0 || ms < msec {
		return ms
	}
	return msec
}

// timedOut runs when a poll came back without events (it timed out, or a
// signal ended it) and returns the time it came back: a new reading unless
// the poll was parked, whose unpark read the clock.
func (c *loopClock) timedOut(parked bool) time.Duration {
	if !parked {
		c.now = time.Since(c.origin)
	}
	return c.now
}

// afterPoll runs when a poll came back with events and returns the time it
// came back: a new reading when the poll may have blocked.
func (c *loopClock) afterPoll(blocked bool) time.Duration {
	if blocked {
		c.now = time.Since(c.origin)
	}
	c.lastEvents = c.now
	return c.now
}

// TickHook is called on a polling loop's goroutine every period given with
// it (SetTickHook), between two batches of events, with the time as a
// WakeHook gets it. A loop that has a tick hook bounds each blocking poll
// by the time left until its next tick, as nginx bounds epoll_wait by its
// next timer, so a tick needs no other goroutine, timer or wake-up of the
// loop: the poll's timeout is the tick's clock.
type TickHook func(sinceOrigin time.Duration)

// loopTick is the tick of a polling loop (see TickHook). Owned by the
// loop's goroutine.
type loopTick struct {
	every time.Duration
	fn    TickHook
	next  time.Duration // when the next tick is due, since the clock's origin
}

// set installs fn, every period, the first due a period after now.
func (t *loopTick) set(every time.Duration, fn TickHook, now time.Duration) {
	if fn == nil || every <= 0 {
		t.fn, t.every = nil, 0
		return
	}
	t.fn, t.every, t.next = fn, every, now+every
}

// timeout is the epoll_wait timeout of a poll at now: msec itself when the
// poll does not block (0) or there is no tick, otherwise the milliseconds
// left until the tick, rounded up so that the poll does not come back
// just before it is due (at least 1, or 0 if it is due already).
func (t *loopTick) timeout(msec int, now time.Duration) int {
	if msec == 0 || t.fn == nil {
		return msec
	}
	return int((t.left(now) + time.Millisecond - 1) / time.Millisecond)
}

// left is the time from now until the tick is due, 0 once it is.
func (t *loopTick) left(now time.Duration) time.Duration {
	if t.next <= now {
		return 0
	}
	return t.next - now
}

// timedOut runs after a poll that timed out (or a signal ended): the
// tick, if it is due at now, the wake hook given the time first, as after
// a poll that came back with events.
func (t *loopTick) timedOut(now time.Duration, wake WakeHook) {
	if t.fn == nil || now < t.next {
		return
	}
	if wake != nil {
		wake(now)
	}
	t.run(now)
}

// run calls the hook if its tick is due at now. The next tick is due a
// period after the one that ran, or a period after now when the loop was
// held longer than a period: ticks a busy handler made the loop miss are
// not made up for.
func (t *loopTick) run(now time.Duration) {
	if t.fn == nil || now < t.next {
		return
	}
	t.next += t.every
	if t.next <= now {
		t.next = now + t.every
	}
	t.fn(now)
}
