package supervisor

import (
	"time"

	"coregate/worker/control"
)

// Heartbeats. A worker's Stats frames (every control.StatsEvery, 250 ms)
// are its heartbeat; it sends one only when its event loop has ticked
// since the last, so a loop stuck in one event falls silent like a
// stopped process, while a busy loop, which still ticks every 50 ms, keeps
// beating (see workerproc's sendStats).
const (
	// DefaultStallAfter is how long a running worker may be silent before
	// it is taken out of the socket selector: four missed beats. That
	// bounds how long it black-holes new connections to about a second
	// (the silence, plus at most stallCheckEvery), while a healthy worker
	// never comes near it: its beats come from a goroutine of their own,
	// on a P of their own (worker.Procs), which neither a busy loop nor a
	// busy CPU delays by a second. A worker taken out wrongly costs
	// little: it keeps what it serves and rejoins at its next beat.
	DefaultStallAfter = 4 * control.StatsEvery
	// DefaultStallRestart is how long a worker may be silent before it is
	// killed and restarted. Long enough for a debugger's or an operator's
	// SIGSTOP, a swapped-out process or a frozen cgroup to come back
	// without losing its connections; short enough that the connections
	// in its accept queue (which migrate to the live workers once it is
	// killed) and its established ones do not wait without end.
	DefaultStallRestart = 10 * time.Second
	// stallCheckEvery is the least time between two looks at the beats.
	// The supervisor looks when a deadline falls due (checkDue), not on a
	// clock, but not sooner than this after its last look, and this often
	// while a worker is stalled, for the beat that puts it back.
	stallCheckEvery = 100 * time.Millisecond
	// DefaultStartTimeout is how long a worker may take to get ready. A
	// start takes tens of milliseconds, and a first configuration of tens
	// of thousands of routes seconds; one that takes a minute is stuck,
	// and it holds its slot: a slot that is starting is not rolled again
	// (Supervisor.roll), and a first start serves nothing until ready.
	DefaultStartTimeout = time.Minute
)

// checkStalls takes the running workers that stopped beating out of the
// selector, puts back those that beat again, and kills those silent for
// longer than StallRestart (the exit goes through the usual restart
// path). Only the current process of a slot that said Ready is watched
// for beats: one that starts is not in the selector yet (it is killed if
// it is not ready within StartTimeout), and a replaced one has left its
// slot to its successor.
func (s *Supervisor) checkStalls() {
	now := time.Since(s.epoch)
	for _, p := range s.workers {
		if p.starting() && time.Since(p.started) >= s.opts.StartTimeout {
			// Stuck starting (restarted with backoff, as it never ran).
			s.killStuck(p, "worker not ready in time: killing it", "start_timeout", s.opts.StartTimeout.String())
			continue
		}
		if !p.watched() {
			continue
		}
		last := time.Duration(p.beat.Load())
		silent := now - last
		switch {
		case !p.stalled && silent >= s.opts.StallAfter:
			p.stalled, p.stalledAt = true, last
			s.metrics.stalls.Add(1)
			s.metrics.setState(p.id, stateStalled)
			attrs := []any{"id", p.id, "pid", p.pid, "cpu", p.cpu, "silent", silent.Round(time.Millisecond).String(),
				"restart_after", s.opts.StallRestart.String()}
			if s.sel == nil {
				s.log.Warn("worker stalled: no eBPF selector to take it out of, new connections still reach it", attrs...)
				continue
			}
			if err := s.sel.Remove(p.id); err != nil {
				s.log.Error("worker stalled: cannot take it out of the selector", append(attrs, "err", err)...)
				continue
			}
			s.log.Warn("worker stalled: out of the selector", attrs...)
		case p.stalled && silent < s.opts.StallAfter && !p.killed:
			p.stalled = false
			s.metrics.setState(p.id, stateRunning)
			if p.ctrl != nil {
				if err := p.ctrl.Send(control.Rejoin, nil); err != nil {
					s.log.Warn("worker: send rejoin", "id", p.id, "pid", p.pid, "err", err)
				}
			}
			s.log.Warn("worker resumed: back in the selector", "id", p.id, "pid", p.pid, "cpu", p.cpu,
				"silent_for", (last - p.stalledAt).Round(time.Millisecond).String())
		case p.stalled && silent >= s.opts.StallRestart && !p.killed:
			s.killStuck(p, "worker silent too long: killing it", "silent", silent.Round(time.Millisecond).String())
		}
	}
}

// starting reports whether the slot's current process was started and is
// not ready yet (and was not killed for it): StartTimeout runs for it.
func (p *proc) starting() bool {
	return p.ps != nil && !p.ready && !p.retired && !p.killed
}

// watched reports whether the slot's current process is ready and its
// beats are watched: StallAfter and StallRestart run for it.
func (p *proc) watched() bool {
	return p.ps != nil && p.ready && !p.retired && p.beat != nil
}

// checkDue returns when checkStalls, or the configuration held back past
// maxHold, next has something to decide: the earliest of the running
// workers' last beats plus StallAfter, the starting workers' starts plus
// StartTimeout, the held configuration's maxHold, and, while a worker is
// stalled, now plus stallCheckEvery. ok is false when nothing waits on the
// clock. A beat only moves its deadline later, so a due time computed
// before the beat comes is early, never late: the check then finds nothing
// to do and the next due time is computed from the new beat.
func (s *Supervisor) checkDue(now time.Time) (due time.Time, ok bool) {
	at := func(t time.Time) {
		if !ok || t.Before(due) {
			due, ok = t, true
		}
	}
	for _, p := range s.workers {
		if p.starting() {
			at(p.started.Add(s.opts.StartTimeout))
			continue
		}
		if !p.watched() {
			continue
		}
		switch {
		case !p.stalled:
			at(s.epoch.Add(time.Duration(p.beat.Load()) + s.opts.StallAfter))
		case !p.killed:
			at(now.Add(stallCheckEvery))
		}
	}
	if s.next != nil && s.reload != nil {
		at(s.reload.start.Add(maxHold))
	}
	return due, ok
}

// armCheck sets the check timer to checkDue, but not sooner than
// stallCheckEvery after the last check. With one or two workers the
// supervisor then looks about once a StallAfter rather than ten times a
// second; with many, whose beats fall due at different times, no more
// often than a ticker of stallCheckEvery, and a silence is still found at
// most stallCheckEvery after StallAfter.
func (s *Supervisor) armCheck() {
	due, ok := s.checkDue(time.Now())
	if !ok {
		if !s.checkAt.IsZero() {
			s.check.Stop()
			s.checkAt = time.Time{}
		}
		return
	}
	if floor := s.checked.Add(stallCheckEvery); due.Before(floor) {
		due = floor
	}
	if due.Equal(s.checkAt) {
		return
	}
	s.checkAt = due
	s.check.Reset(time.Until(due))
}

// killStuck kills the slot's current process with SIGKILL, once, logging
// why (msg, and the measure key = value); its exit goes through the usual
// restart path.
func (s *Supervisor) killStuck(p *proc, msg, key, value string) {
	p.killed = true
	s.log.Warn(msg, "id", p.id, "pid", p.pid, "cpu", p.cpu, key, value)
	_ = p.ps.Kill()
}
