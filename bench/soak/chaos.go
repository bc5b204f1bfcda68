package soak

import (
	"errors"
	"fmt"
	"sync"
	"syscall"
	"time"

	"coregate/bench/hdr"
)

// Times of the chaos run.
const (
	chaosWarmup = 3 * time.Second // steady load before the first fault
	chaosPre    = 2 * time.Second // steady load in a phase before its fault
	chaosAfter  = 6 * time.Second // observed after a fault ends
	chaosSettle = time.Second     // a phase still failing this close to its end has not recovered
	stopFor     = 5 * time.Second // SIGSTOP … SIGCONT
	stopGrace   = 1500 * time.Millisecond
	upDownFor   = 2 * time.Second // the upstream is dead this long before it is restarted
	// supervisorDownFor: the node has no supervisor this long.
	supervisorDownFor = time.Second
	failFor           = 5 * time.Second  // the upstream answers 503 this long
	reloadCount       = 50               // reloads …
	reloadSpan        = 10 * time.Second // … spread over this
	// upSlack: after the upstream is back (or answers normally again), error
	// answers to requests outstanding this much later are still explained
	// (pool connections to the old process, a signal's delivery).
	upSlack = 500 * time.Millisecond
	// exitWait bounds the wait for a killed worker to have exited whole.
	exitWait = 2 * time.Second
	// Before a fault the load should be on its schedule (onTime): it has
	// up to catchUp to get there.
	onTime  = 50 * time.Millisecond
	catchUp = 10 * time.Second
)

// ErrChaos is returned when a fault caused failures it does not explain.
var ErrChaos = errors.New("chaos: failed requests the faults do not explain")

// RunChaos runs the chaos scenario and prints its table; rows holds one row
// per fault (and one for the steady load before them).
func RunChaos(o Options) (rows []Row, err error) {
	if o.Workers < 2 {
		return nil, fmt.Errorf("chaos: needs at least 2 workers, got %d", o.Workers)
	}
	e, err := StartEnv(o.Dir, o.Coregate, o.Self, o.Workers, o.logf)
	if err != nil {
		return nil, err
	}
	defer e.Close()
	o.logf("gateway %s (%d workers), upstream %s, logs in %s", e.GatewayAddr, o.Workers, e.UpstreamAddr, o.Dir)
	rate, peak, err := loadRate(&o, e)
	if err != nil {
		return nil, err
	}
	o.logf("chaos: steady load at %.0f req/s (%s), %d connections, request timeout %v",
		rate, o.of(peak), o.Conns, o.Timeout)

	epoch := time.Now()
	since := func() time.Duration { return time.Since(epoch) }
	sink := make(chan Record, 1<<16)
	var recs []Record
	colDone := make(chan struct{})
	go func() {
		for r := range sink {
			recs = append(recs, r)
		}
		close(colDone)
	}()
	stop := make(chan struct{})
	var lw sync.WaitGroup
	lw.Add(1)
	l := &Load{Addr: e.GatewayAddr, Conns: o.Conns, Rate: rate, Timeout: o.Timeout, Epoch: epoch, Sink: sink}
	go func() {
		defer lw.Done()
		l.Run(3*time.Minute, stop) // bounded; stopped when the faults are done
	}()
	endLoad := func() {
		close(stop)
		lw.Wait()
		close(sink)
		<-colDone
	}

	var faults []Fault
	from := time.Duration(0)
	time.Sleep(chaosWarmup)
	faults = append(faults, Fault{Name: "steady load, no fault", From: 0, To: since(), At: 0, Explains: ExplainsNothing,
		Note: "nothing", Baseline: true})
	run := func(name, note string, inject func(t0 time.Duration) (func(*Record) bool, error)) error {
		if err := e.WaitWorkers(20 * time.Second); err != nil {
			return err
		}
		from = faults[len(faults)-1].To
		time.Sleep(chaosPre)
		// A fault goes in with the load on its schedule, when it can: a
		// backlog the last fault left would be sent in a burst meanwhile.
		if b := l.Behind(); b > onTime {
			w0 := time.Now()
			for l.Behind() > onTime && time.Since(w0) < catchUp {
				time.Sleep(10 * time.Millisecond)
			}
			if b2 := l.Behind(); b2 > onTime {
				o.logf("         the load was %v behind its schedule, still %v after %v",
					b.Round(time.Millisecond), b2.Round(time.Millisecond), catchUp)
			} else {
				o.logf("         the load was %v behind its schedule; caught up in %v",
					b.Round(time.Millisecond), time.Since(w0).Round(time.Millisecond))
			}
		}
		t0 := since()
		o.logf("%6.2fs  %s", t0.Seconds(), name)
		rule, err := inject(t0)
		if err != nil {
			return fmt.Errorf("chaos: %s: %w", name, err)
		}
		time.Sleep(chaosAfter)
		faults = append(faults, Fault{Name: name, From: from, To: since(), At: t0, Explains: rule, Note: note})
		return nil
	}
	// victim picks the worker owning the most client connections; seen is
	// when its fds were read.
	victim := func() (pid int, owned map[uint16]bool, seen time.Duration, err error) {
		seen = since()
		owned = map[uint16]bool{}
		for _, p := range e.WorkerPIDs() {
			if c := ClientPorts(p, e.GatewayPort); pid == 0 || len(c) > len(owned) {
				pid, owned = p, c
			}
		}
		if pid == 0 {
			return 0, nil, 0, errors.New("no worker found")
		}
		return pid, owned, seen, nil
	}

	steps := []struct {
		name, note string
		inject     func(t0 time.Duration) (func(*Record) bool, error)
	}{
		{"kill -9 of a worker", "failures on the connections the worker owned (or may have taken between the reading of its fds and its exit)", func(time.Duration) (func(*Record) bool, error) {
			pid, owned, seen, err := victim()
			if err != nil {
				return nil, err
			}
			t0 := since()
			if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
				return nil, err
			}
			// Until its last thread is gone, the worker's listening socket
			// is open and the selector may give it a connection.
			for !Exited(pid) {
				if since()-t0 > exitWait {
					return nil, fmt.Errorf("worker %d still runs %v after SIGKILL", pid, exitWait)
				}
				time.Sleep(100 * time.Microsecond)
			}
			gone := since()
			o.logf("         worker %d owned %d client connections; it had exited %.1f ms after the signal",
				pid, len(owned), float64(gone-t0)/1e6)
			return KillRule(owned, seen, gone), nil
		}},
		{"SIGSTOP of a worker for 5 s", fmt.Sprintf("failures on the connections the worker owned; timeouts on connections opened within %v of the stop", stopGrace),
			func(time.Duration) (func(*Record) bool, error) {
				pid, owned, seen, err := victim()
				if err != nil {
					return nil, err
				}
				t0 := since()
				if err := syscall.Kill(pid, syscall.SIGSTOP); err != nil {
					return nil, err
				}
				o.logf("         worker %d owned %d client connections", pid, len(owned))
				time.Sleep(stopFor)
				return StopRule(owned, seen, t0, stopGrace), syscall.Kill(pid, syscall.SIGCONT)
			}},
		{"kill -9 of the supervisor, started again 1 s later", "nothing", func(time.Duration) (func(*Record) bool, error) {
			return ExplainsNothing, e.RestartSupervisor(supervisorDownFor, 30*time.Second)
		}},
		{fmt.Sprintf("%d SIGHUP reloads in %v", reloadCount, reloadSpan), "nothing", func(time.Duration) (func(*Record) bool, error) {
			for i := range reloadCount {
				if err := e.Reload(); err != nil {
					return nil, err
				}
				if i < reloadCount-1 {
					time.Sleep(reloadSpan / reloadCount)
				}
			}
			return ExplainsNothing, nil
		}},
		{"upstream killed, restarted 2 s later", "502/503/504 and bodies cut short, for requests outstanding while it was down (+0.5 s)",
			func(t0 time.Duration) (func(*Record) bool, error) {
				addr := e.UpstreamAddr
				e.KillUpstream()
				time.Sleep(upDownFor)
				var err error
				for range 20 { // the port may take a moment to be free again
					if err = e.StartUpstream(addr); err == nil {
						break
					}
					time.Sleep(100 * time.Millisecond)
				}
				return UpstreamDownRule(t0, since(), upSlack), err
			}},
		{"upstream answering 503 for 5 s", "503 for requests outstanding meanwhile (+0.5 s)", func(t0 time.Duration) (func(*Record) bool, error) {
			if err := e.SignalUpstream(syscall.SIGUSR1); err != nil {
				return nil, err
			}
			time.Sleep(failFor)
			if err := e.SignalUpstream(syscall.SIGUSR2); err != nil {
				return nil, err
			}
			return Upstream503Rule(t0, since(), upSlack), nil
		}},
	}
	for _, s := range steps {
		if err := run(s.name, s.note, s.inject); err != nil {
			endLoad()
			return nil, err
		}
	}
	endLoad()
	if !e.GatewayAlive() {
		return nil, fmt.Errorf("chaos: the gateway exited:\n%s", e.LogTail(20))
	}

	if o.Records != "" {
		if err := WriteRecords(o.Records, recs); err != nil {
			o.logf("records: %v", err)
		}
	}
	slow := SlowThreshold(recs, faults[0].From, faults[0].To)
	for _, f := range faults {
		rows = append(rows, Tally(recs, f, slow, chaosSettle))
	}
	fmt.Fprintf(o.Out, "\nChaos, steady load at %.0f req/s (%s), %d connections, %d workers, request timeout %v:\n\n",
		rate, o.of(peak), o.Conns, o.Workers, o.Timeout)
	Tabulate(o.Out, rows)
	ListStray(o.Out, rows)
	fmt.Fprintf(o.Out, "\nA request failed: no connection, no complete answer within %v, or not the status it should get (200; 404 for an unknown path).\n", o.Timeout)
	fmt.Fprintf(o.Out, "Time to full recovery: from the fault to the end of the last 100 ms in which a request failed or more than 1 %% were served (sent to answered) in more than %v (5 × the steady p99, at least 100 ms).\n", slow.Round(time.Millisecond))
	fmt.Fprintln(o.Out, "What each fault explains:")
	for _, f := range faults {
		fmt.Fprintf(o.Out, "- %s: %s\n", f.Name, f.Note)
	}
	bad := 0
	for _, r := range rows {
		bad += r.Unexplained()
	}
	if bad > 0 {
		fmt.Fprintf(o.Out, "chaos: FAIL: %d failed requests the faults do not explain\n", bad)
		return rows, ErrChaos
	}
	fmt.Fprintln(o.Out, "chaos: PASS: no failed request the faults do not explain")
	return rows, nil
}

// SlowThreshold is the service time above which a request counts as slow
// for the recovery time: 5 × the p99 service time of the small requests due
// in [from, to), at least 100 ms.
func SlowThreshold(recs []Record, from, to time.Duration) time.Duration {
	h := hdr.New()
	for i := range recs {
		r := &recs[i]
		if r.Due >= from && r.Due < to && r.Kind.Small() && !r.Failed() {
			h.Record(uint64(r.Service()))
		}
	}
	return max(5*time.Duration(h.MustQuantile(0.99)), 100*time.Millisecond)
}
