package soak

import (
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"coregate/bench/hdr"
	"coregate/bench/procstat"
)

// Options configure a soak or chaos run.
type Options struct {
	Coregate string        // the gateway binary (bin/coregate)
	Self     string        // this program, started as "Self upstream"
	Dir      string        // temporary directory for configs and logs
	Workers  int           // gateway worker processes
	Conns    int           // client slots
	Duration time.Duration // soak: how long the load runs, warm-up included
	Share    float64       // of the measured maximum rate, 0 < Share ≤ 1
	Rate     float64       // if > 0: this fixed rate, req/s, and no probe (Share unused)
	Probe    time.Duration // how long the closed-loop run that finds the maximum lasts
	Timeout  time.Duration // a request not answered within this has failed
	Out      io.Writer     // where the run reports
	Records  string        // chaos: write every request here as CSV, if set
}

func (o *Options) logf(format string, a ...any) {
	fmt.Fprintf(o.Out, format+"\n", a...)
}

// ReloadEvery is the soak's reload period.
const ReloadEvery = 10 * time.Second

// SoakPlan derives the warm-up and the window length from the duration:
// warm-up a sixth of it, between 10 s and 2 min; windows of 10 s under
// 10 min, of 1 min from there.
func SoakPlan(d time.Duration) (warmup, window time.Duration) {
	warmup = min(max(d/6, 10*time.Second), 2*time.Minute)
	window = 10 * time.Second
	if d >= 10*time.Minute {
		window = time.Minute
	}
	return warmup, window
}

// loadRate returns the rate of the steady load and, when it is a share of
// a measured maximum, that maximum: o.Rate with no probe when it is set
// (peak 0), else o.Share of what probe measures.
func loadRate(o *Options, e *Env) (rate, peak float64, err error) {
	if o.Rate > 0 {
		o.logf("fixed rate %.0f req/s: no closed-loop maximum measured", o.Rate)
		return o.Rate, 0, nil
	}
	peak, err = probe(o, e)
	return o.Share * peak, peak, err
}

// of says what the load's rate is: the share of the measured maximum peak,
// or fixed.
func (o *Options) of(peak float64) string {
	if peak == 0 {
		return "fixed"
	}
	return fmt.Sprintf("%.0f %% of %.0f", 100*o.Share, peak)
}

// probe runs the mix as a closed loop for o.Probe and returns the rate of
// requests answered as expected.
func probe(o *Options, e *Env) (float64, error) {
	sink := make(chan Record, 1<<16)
	var ok, all uint64
	done := make(chan struct{})
	go func() {
		for r := range sink {
			all++
			if !r.Failed() {
				ok++
			}
		}
		close(done)
	}()
	l := &Load{Addr: e.GatewayAddr, Conns: o.Conns, Timeout: o.Timeout, Epoch: time.Now(), Sink: sink}
	t := time.Now()
	l.Run(o.Probe, nil)
	el := time.Since(t)
	close(sink)
	<-done
	if ok == 0 {
		return 0, fmt.Errorf("soak: no request answered while measuring the maximum (%d sent)", all)
	}
	rate := float64(ok) / el.Seconds()
	o.logf("maximum of the mix, closed loop, %d connections: %.0f req/s (%d requests, %d failed)", o.Conns, rate, all, all-ok)
	return rate, nil
}

// quietFDs waits for the gateway to settle with no load (its workers all
// running, the upstream pool's idle timeout passed) and returns its open
// fds outside the upstream pool; with atMost > 0 it waits up to 15 s for
// the count to drop to atMost.
func quietFDs(e *Env, atMost int) FDCount {
	_ = e.WaitWorkers(20 * time.Second)
	time.Sleep(3 * time.Second)
	c := CountFDs(e.GatewayPIDs(), e.UpstreamPort)
	deadline := time.Now().Add(15 * time.Second)
	for atMost > 0 && c.Other() > atMost && time.Now().Before(deadline) {
		time.Sleep(250 * time.Millisecond)
		c = CountFDs(e.GatewayPIDs(), e.UpstreamPort)
	}
	return c
}

type sample struct {
	at     time.Duration
	rssKiB uint64
	fds    int
	steady bool // exactly the configured workers ran (no replaced one draining, none starting)
}

// RunSoak runs the soak and reports; it returns the verdict (an error only
// when the run itself could not be made).
func RunSoak(o Options) (SoakVerdict, error) {
	warmup, window := SoakPlan(o.Duration)
	e, err := StartEnv(o.Dir, o.Coregate, o.Self, o.Workers, o.logf)
	if err != nil {
		return SoakVerdict{}, err
	}
	defer e.Close()
	o.logf("gateway %s (%d workers), upstream %s, logs in %s", e.GatewayAddr, o.Workers, e.UpstreamAddr, o.Dir)
	rate, peak, err := loadRate(&o, e)
	if err != nil {
		return SoakVerdict{}, err
	}
	// The baseline is counted with workers a reload made, as the count
	// after the load is: a worker of the first generation can hold fewer
	// fds than its replacements (5 fewer anon inodes were seen).
	if err := e.ReloadAndWait(20 * time.Second); err != nil {
		return SoakVerdict{}, err
	}
	before := quietFDs(e, 0)
	beforeFDs := DescribeFDs(e.GatewayPIDs())
	o.logf("quiet before the load: %d open fds in %d processes (%d to the upstream)", before.Total, before.Procs, before.Pool)

	o.logf("soak: %v at %.0f req/s (%s), warm-up %v, windows of %v, reload every %v",
		o.Duration, rate, o.of(peak), warmup, window, ReloadEvery)
	epoch := time.Now()
	sink := make(chan Record, 1<<16)
	col := newSoakCollector(warmup, window)
	colDone := make(chan struct{})
	go func() { col.run(sink); close(colDone) }()

	var mu sync.Mutex
	var samples []sample
	var reloads []time.Duration
	stop := make(chan struct{})
	var bg sync.WaitGroup
	bg.Add(1)
	go func() { // samples every second, reloads every ReloadEvery, reports every window
		defer bg.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		lastReload, lastReport := time.Now(), time.Now()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				pids := e.GatewayPIDs()
				u := procstat.Measure(pids)
				f := CountFDs(pids, e.UpstreamPort)
				steady := len(e.WorkerPIDs()) == o.Workers
				mu.Lock()
				samples = append(samples, sample{at: now.Sub(epoch), rssKiB: u.RSSKiB, fds: f.Other(), steady: steady})
				mu.Unlock()
				if now.Sub(lastReload) >= ReloadEvery {
					lastReload = now
					if err := e.Reload(); err != nil {
						o.logf("reload: %v", err)
					}
					mu.Lock()
					reloads = append(reloads, now.Sub(epoch))
					mu.Unlock()
				}
				if now.Sub(lastReport) >= window {
					lastReport = now
					o.logf("%4.0fs  %d requests, %d failed, %d 5xx; RSS %.1f MiB, %d fds, %d upstream sockets",
						now.Sub(epoch).Seconds(), col.requests.Load(), col.failed.Load(), col.s5xx.Load(),
						float64(u.RSSKiB)/1024, f.Other(), f.Pool)
				}
			}
		}
	}()
	l := &Load{Addr: e.GatewayAddr, Conns: o.Conns, Rate: rate, Timeout: o.Timeout, Epoch: epoch, Sink: sink}
	l.Run(o.Duration, nil)
	close(stop)
	bg.Wait()
	close(sink)
	<-colDone
	if !e.GatewayAlive() {
		return SoakVerdict{}, fmt.Errorf("soak: the gateway exited:\n%s", e.LogTail(20))
	}

	after := quietFDs(e, before.Other())
	o.logf("quiet after the load: %d open fds in %d processes (%d to the upstream)", after.Total, after.Procs, after.Pool)
	// What the fds are, before the gateway is stopped.
	for _, l := range beforeFDs {
		o.logf("  before: %s", l)
	}
	for _, l := range DescribeFDs(e.GatewayPIDs()) {
		o.logf("  after:  %s", l)
	}

	ws := col.windows(o.Duration)
	for i := range ws {
		from, to := ws[i].Start, ws[i].Start+window
		first := true
		for _, s := range samples {
			if s.at < from || s.at >= to || !s.steady {
				continue
			}
			if first || s.rssKiB < ws[i].RSSKiB {
				ws[i].RSSKiB, ws[i].FDs = s.rssKiB, s.fds
			}
			if s.fds < ws[i].FDs {
				ws[i].FDs = s.fds
			}
			first = false
		}
		for _, r := range reloads {
			if r >= from && r < to {
				ws[i].Reloads++
			}
		}
	}
	t := col.totals
	t.FDsBefore, t.FDsAfter = before.Other(), after.Other()
	v := JudgeSoak(ws, t)
	fmt.Fprintln(o.Out)
	fmt.Fprintf(o.Out, "Soak, %v at %.0f req/s (%s), %d connections, %d workers, %d reloads; windows after %v of warm-up:\n\n",
		o.Duration, rate, o.of(peak), o.Conns, o.Workers, len(reloads), warmup)
	RenderWindows(o.Out, ws)
	fmt.Fprintln(o.Out)
	if len(col.outcomes) > 0 {
		fmt.Fprintf(o.Out, "failed requests by kind and outcome: %v\n", col.outcomes)
	}
	RenderSoakVerdict(o.Out, v, t)
	return v, nil
}

// soakCollector aggregates the soak's records: totals over the whole run,
// and per window after warm-up the counts and the p99 of small requests.
// It is fed by one goroutine (run); the atomics are read by the reporter.
type soakCollector struct {
	warmup, window time.Duration
	totals         SoakTotals
	ws             []Window
	cur            int            // window whose latencies hist holds, -1 for none
	hist, histDue  *hdr.Histogram // service times and latencies from due of the small requests in window cur
	outcomes       map[string]int // failed requests by "kind/outcome"

	requests, failed, s5xx atomic.Uint64
}

func newSoakCollector(warmup, window time.Duration) *soakCollector {
	return &soakCollector{warmup: warmup, window: window, cur: -1, hist: hdr.New(), histDue: hdr.New(), outcomes: map[string]int{}}
}

func (c *soakCollector) run(in <-chan Record) {
	for r := range in {
		c.add(&r)
	}
	c.close()
}

func (c *soakCollector) add(r *Record) {
	c.totals.Requests++
	c.requests.Add(1)
	if r.Status >= 500 {
		c.totals.Status5xx++
		c.s5xx.Add(1)
	}
	if r.Failed() {
		c.failed.Add(1)
		c.outcomes[r.Kind.String()+"/"+r.Outcome.String()]++
		switch {
		case r.Outcome == BadStatus && r.Status < 500:
			c.totals.Unexpected++
		case r.Outcome != BadStatus:
			c.totals.Unanswered++
		}
	}
	if r.End < c.warmup {
		return
	}
	i := int((r.End - c.warmup) / c.window)
	for len(c.ws) <= i {
		c.ws = append(c.ws, Window{Start: c.warmup + time.Duration(len(c.ws))*c.window})
	}
	w := &c.ws[i]
	w.Requests++
	if r.Failed() {
		w.Failed++
	}
	if r.Status >= 500 {
		w.Status5xx++
	}
	if i > c.cur {
		c.close()
		c.cur = i
	}
	if i == c.cur && r.Kind.Small() && !r.Failed() {
		c.hist.Record(uint64(r.Service()))
		c.histDue.Record(uint64(r.Latency()))
	}
}

// close sets the current window's p99s and empties the histograms.
func (c *soakCollector) close() {
	if c.cur >= 0 && c.hist.Count() > 0 {
		c.ws[c.cur].P99 = time.Duration(c.hist.MustQuantile(0.99))
		c.ws[c.cur].P99Due = time.Duration(c.histDue.MustQuantile(0.99))
	}
	c.hist.Reset()
	c.histDue.Reset()
}

// windows returns the complete windows that ended by d (a last, partial
// window would compare unlike with like).
func (c *soakCollector) windows(d time.Duration) []Window {
	out := c.ws[:0:0]
	for _, w := range c.ws {
		if w.Start+c.window <= d+c.window/10 {
			out = append(out, w)
		}
	}
	return out
}
