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
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	errorx "github.com/panjf2000/gnet/v2/pkg/errors"
)

// busyPoller is a poller watching an eventfd that stays readable (level
// triggered, never read): every epoll_wait comes back at once with one
// event, as for a loop that is never idle.
func busyPoller(tb testing.TB) *Poller {
	tb.Helper()
	p, err := OpenPoller()
	if err != nil {
		tb.Fatal(err)
	}
	efd, err := unix.Eventfd(1, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = unix.Close(efd); _ = p.Close() })
	if err := p.AddRead(&PollAttachment{FD: efd}, false); err != nil {
		tb.Fatal(err)
	}
	return p
}

// pollN runs p's loop for n wake-ups.
func pollN(p *Poller, n int) {
	i := 0
	_ = p.Polling(func(int, IOEvent, IOFlags) error {
		if i++; i >= n {
			return errorx.ErrEngineShutdown
		}
		return nil
	})
}

// BenchmarkPollingBusy is the cost of one turn of the polling loop (one
// epoll_wait with one event and its dispatch), the clock reads included.
func BenchmarkPollingBusy(b *testing.B) {
	p := busyPoller(b)
	b.ResetTimer()
	pollN(p, b.N)
}

// BenchmarkPollingBusyHook is BenchmarkPollingBusy with a WakeHook that
// keeps a clock in nanoseconds since a start, as a coregate worker does.
func BenchmarkPollingBusyHook(b *testing.B) {
	p := busyPoller(b)
	var now int64
	p.SetWakeHook(time.Now(), func(d time.Duration) { now = int64(d) })
	b.ResetTimer()
	pollN(p, b.N)
	if now <= 0 {
		b.Fatal("the hook was not called")
	}
}

// BenchmarkClockTurn is the clock's share of one busy turn of the loop
// (a poll that does not block and comes back with events), without the
// system call: "yield-only" is the loop as it was before the WakeHook (a
// monotonic read before each poll for the yield), "yield+hook" is
// loopClock with a hook that keeps a worker's clock.
func BenchmarkClockTurn(b *testing.B) {
	b.Run("yield-only", func(b *testing.B) {
		lastYield := time.Now()
		for i := 0; i < b.N; i++ {
			if time.Since(lastYield) >= YieldInterval {
				runtime.Gosched()
				lastYield = time.Now()
			}
		}
	})
	b.Run("yield+hook", func(b *testing.B) {
		var c loopClock
		var now int64
		hook := WakeHook(func(d time.Duration) { now = int64(d) })
		c.start()
		for i := 0; i < b.N; i++ {
			c.beforePoll(false)
			hook(c.afterPoll(false))
		}
		if now <= 0 {
			b.Fatal("no time")
		}
	})
}

// TestWakeHook: the hook runs at every wake-up before the events are
// handled, with a time that is fresh then, and the loop still yields.
func TestWakeHook(t *testing.T) {
	p := busyPoller(t)
	origin := time.Now()
	var calls, stale int
	var last time.Duration
	p.SetWakeHook(origin, func(d time.Duration) {
		calls++
		last = d
	})
	i := 0
	_ = p.Polling(func(int, IOEvent, IOFlags) error {
		// The wake-up was just now: its time is at most a little older
		// than a reading taken here.
		if d := time.Since(origin) - last; d < 0 || d > 50*time.Millisecond {
			stale++
		}
		if i++; i%1000 == 0 {
			time.Sleep(2 * time.Millisecond) // the next wake-up must see it
		}
		if i >= 5000 {
			return errorx.ErrEngineShutdown
		}
		return nil
	})
	if calls != 5000 {
		t.Errorf("hook called %d times for 5000 wake-ups", calls)
	}
	if stale > 0 {
		t.Errorf("%d wake-ups saw a clock older than 50ms, or ahead of the clock", stale)
	}
	if last < 10*time.Millisecond {
		t.Errorf("last wake-up at %v after the origin, want past the 5 sleeps of 2ms", last)
	}
}

// idlePoller is a poller watching an eventfd that nothing has written yet,
// and that fd: a loop on it is idle until the test writes to the fd.
func idlePoller(tb testing.TB) (*Poller, int) {
	tb.Helper()
	p, err := OpenPoller()
	if err != nil {
		tb.Fatal(err)
	}
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = unix.Close(efd); _ = p.Close() })
	if err := p.AddRead(&PollAttachment{FD: efd}, false); err != nil {
		tb.Fatal(err)
	}
	return p, efd
}

// An idle loop ticks from its polls' timeouts alone: on time, never early,
// the wake hook's clock set first, on the loop's goroutine.
func TestTickHook(t *testing.T) {
	const every = 10 * time.Millisecond
	const ticks = 20
	p, efd := idlePoller(t)
	origin := time.Now()
	var woke time.Duration
	var times []time.Duration
	var clockNotSet, early, events int
	p.SetWakeHook(origin, func(d time.Duration) { woke = d })
	p.SetTickHook(every, func(d time.Duration) {
		if d != woke {
			clockNotSet++
		}
		if real := time.Since(origin); real < d || d < time.Duration(len(times)+1)*every {
			early++
		}
		times = append(times, d)
		if len(times) == ticks {
			// end the loop through an event
			if _, err := unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
				t.Error(err)
			}
		}
	})
	start := time.Now()
	_ = p.Polling(func(int, IOEvent, IOFlags) error {
		events++
		return errorx.ErrEngineShutdown
	})
	took := time.Since(start)
	if len(times) != ticks || events != 1 {
		t.Fatalf("%d ticks and %d events, want %d ticks, then the event that ends the loop", len(times), events, ticks)
	}
	if clockNotSet > 0 || early > 0 {
		t.Errorf("of %d ticks, %d came without the wake hook's clock, %d early: %v", ticks, clockNotSet, early, times)
	}
	// Ticks a period apart, give or take what a loaded machine delays a
	// timed-out poll by: a loop that ticked only on events would not have
	// ended at all.
	if took < ticks*every || took > ticks*every+2*time.Second {
		t.Errorf("%d ticks of %v took %v", ticks, every, took)
	}
}

// A loop that is never idle still ticks, between two batches of events,
// at the wake-up time.
func TestTickHookBusy(t *testing.T) {
	const every = 5 * time.Millisecond
	p := busyPoller(t)
	origin := time.Now()
	var woke time.Duration
	var ticks, clockNotSet int
	p.SetWakeHook(origin, func(d time.Duration) { woke = d })
	p.SetTickHook(every, func(d time.Duration) {
		if d != woke {
			clockNotSet++
		}
		ticks++
	})
	start := time.Now()
	_ = p.Polling(func(int, IOEvent, IOFlags) error {
		if time.Since(start) > 20*every {
			return errorx.ErrEngineShutdown
		}
		return nil
	})
	// 20 periods passed; a tick is never early, and a busy loop checks
	// for it at every wake-up.
	if ticks < 10 || ticks > 20 {
		t.Errorf("%d ticks of %v in %v of busy polling, want about 20", ticks, every, time.Since(start))
	}
	if clockNotSet > 0 {
		t.Errorf("%d ticks without the wake hook's clock", clockNotSet)
	}
}

// The timeout of a blocking poll is the time left until the tick, rounded
// up to a millisecond; a poll that does not block stays so.
func TestTickTimeout(t *testing.T) {
	var tk loopTick
	if got := tk.timeout(-1, 0); got != -1 {
		t.Errorf("no tick: timeout %d, want -1", got)
	}
	tk.set(50*time.Millisecond, func(time.Duration) {}, time.Second)
	for _, c := range []struct {
		msec int
		now  time.Duration
		want int
	}{
		{-1, time.Second, 50},
		{-1, time.Second + 49*time.Millisecond + 1, 1},
		{-1, time.Second + 50*time.Millisecond, 0},
		{-1, 2 * time.Second, 0},
		{-1, time.Second + 10*time.Millisecond + 500*time.Microsecond, 40},
		{0, time.Second, 0},
	} {
		if got := tk.timeout(c.msec, c.now); got != c.want {
			t.Errorf("timeout(%d, %v) = %d, want %d", c.msec, c.now, got, c.want)
		}
	}
	// A tick missed by more than a period is not made up for.
	n := 0
	tk.fn = func(time.Duration) { n++ }
	tk.run(time.Second + 175*time.Millisecond)
	tk.run(time.Second + 200*time.Millisecond)
	if n != 1 || tk.next != time.Second+225*time.Millisecond {
		t.Errorf("after a late tick: %d calls, next at %v; want 1, 1.225s", n, tk.next)
	}
}

// A blocking poll of a loop with a tick times out YieldWithin after the
// loop last yielded, whatever the tick's timeout, so that the loop yields
// again before sysmon takes its P.
func TestYieldTimeout(t *testing.T) {
	c := loopClock{now: time.Second, lastYield: time.Second}
	for _, x := range []struct {
		now        time.Duration
		msec, want int
	}{
		{time.Second, -1, 9},
		{time.Second, 50, 9},
		{time.Second, 3, 3},
		{time.Second, 0, 0},
		{time.Second + 4*time.Millisecond + 500*time.Microsecond, -1, 5},
		{time.Second + 9*time.Millisecond, -1, 0},
		{time.Second + 20*time.Millisecond, 40, 0},
	} {
		c.now = x.now
		if got := c.timeout(x.msec); got != x.want {
			t.Errorf("%v after the yield, tick timeout %d: poll timeout %d, want %d", x.now-c.lastYield, x.msec, got, x.want)
		}
	}
}

// A blocking poll of a loop with a tick parks once the loop has had no
// events for ParkAfter: it then waits until the tick, not YieldWithin.
// A poll that does not block never parks.
func TestPollWait(t *testing.T) {
	var tk loopTick
	tk.set(50*time.Millisecond, func(time.Duration) {}, time.Second)
	for _, x := range []struct {
		sinceEvents time.Duration
		msec, want  int
		park        bool
	}{
		{0, -1, 9, false},
		{ParkAfter - time.Millisecond, -1, 9, false},
		{ParkAfter, -1, 50, true},
		{ParkAfter, 0, 0, false},
	} {
		c := loopClock{now: time.Second, lastYield: time.Second, lastEvents: time.Second - x.sinceEvents}
		if wait, park := c.pollWait(&tk, x.msec); wait != x.want || park != x.park {
			t.Errorf("%v without events, msec %d: wait %d, park %v; want %d, %v", x.sinceEvents, x.msec, wait, park, x.want, x.park)
		}
	}
}

// voluntarySwitches reads the calling thread's count of voluntary context
// switches: each time it slept, in a poll or waiting for a P.
func voluntarySwitches(tb testing.TB) int {
	b, err := os.ReadFile("/proc/thread-self/status")
	if err != nil {
		tb.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "voluntary_ctxt_switches:"); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil {
				tb.Fatal(err)
			}
			return n
		}
	}
	tb.Fatal("no voluntary_ctxt_switches in /proc/thread-self/status")
	return 0
}

// An idle loop with a tick parks: after ParkAfter without events its polls
// wait until the next tick, not YieldWithin, so it wakes about once a tick
// (it woke every 9 ms before, 11 times in a tick of 100 ms). An event
// still ends a parked poll at once.
func TestIdleParks(t *testing.T) {
	const every = 100 * time.Millisecond
	const ticks = 10
	skip := int(ParkAfter/every) + 1 // ticks before the loop parks
	p, efd := idlePoller(t)
	var first, last, n int
	var evAt time.Time
	p.SetTickHook(every, func(time.Duration) {
		switch n++; n {
		case skip:
			first = voluntarySwitches(t)
		case skip + ticks:
			last = voluntarySwitches(t)
			evAt = time.Now()
			if _, err := unix.Write(efd, []byte{1, 0, 0, 0, 0, 0, 0, 0}); err != nil {
				t.Error(err)
			}
		}
	})
	done := make(chan time.Duration)
	go func() {
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		_ = p.Polling(func(int, IOEvent, IOFlags) error {
			done <- time.Since(evAt)
			return errorx.ErrEngineShutdown
		})
	}()
	var late time.Duration
	select {
	case late = <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("the loop did not end")
	}
	// A wake-up per tick, and the sleeps of a P hand-off or two around
	// it; a loop that woke every YieldWithin would sleep 11 times a tick.
	if sw := last - first; sw < ticks || sw > 4*ticks {
		t.Errorf("%d voluntary context switches in %d idle ticks of %v, want %d to %d", sw, ticks, every, ticks, 4*ticks)
	}
	if late > time.Second {
		t.Errorf("the event was handled %v after it came", late)
	}
}
