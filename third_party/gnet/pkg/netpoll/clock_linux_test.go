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
	"runtime"
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
