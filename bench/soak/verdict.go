package soak

import (
	"fmt"
	"io"
	"slices"
	"strings"
	"time"
)

// Limits of the soak verdict (issue 9 §6).
const (
	MaxRSSDrift = 0.05 // RSS after warm-up may end at most 5 % above where it started
	MaxP99Drift = 0.50 // the p99 of small requests may end at most 50 % above where it started
)

// Window is one stretch of the soak after warm-up.
type Window struct {
	Start     time.Duration // since the run's epoch
	Requests  uint64        // requests that ended in the window
	Failed    uint64        // of those, not answered as expected
	Status5xx uint64        // of those, a 5xx answer
	P99       time.Duration // p99 service time (sent to answered) of the small requests: judged
	P99Due    time.Duration // p99 latency from when they were due, the client's backlog included: shown
	RSSKiB    uint64        // lowest summed RSS of the gateway's processes in the window's steady samples, 0 without one
	FDs       int           // lowest count of open fds outside the upstream pool in the same samples (shown, not judged)
	Reloads   int           // reloads sent in the window
}

// SoakTotals are the whole run's counts, warm-up included.
type SoakTotals struct {
	Requests   uint64
	Status5xx  uint64 // 5xx answers; the soak provokes none
	Unanswered uint64 // connect errors, timeouts, broken connections, truncated bodies
	Unexpected uint64 // complete answers with another status than expected, 5xx excluded
	FDsBefore  int    // open fds outside the upstream pool, quiet, before the load
	FDsAfter   int    // the same, quiet, after the load
}

// SoakVerdict is what JudgeSoak concludes.
type SoakVerdict struct {
	RSSStart, RSSEnd uint64 // KiB, medians of the first and last quarter of windows
	RSSDrift         float64
	P99Start, P99End time.Duration
	P99Drift         float64
	FDGrowth         int
	Failures         []string // why the run failed; empty when it passed
}

// Passed reports whether nothing failed.
func (v SoakVerdict) Passed() bool { return len(v.Failures) == 0 }

// JudgeSoak compares the first quarter of the windows (at least two when
// there are four or more) with the last quarter, by medians, so that one noisy window moves neither
// end; it fails the run on RSS drift above MaxRSSDrift, p99 drift above
// MaxP99Drift, any fd growth between the quiet points before and after the
// load, any 5xx, any request not answered, any unexpected status, and on
// fewer than two windows (nothing to compare).
func JudgeSoak(ws []Window, t SoakTotals) SoakVerdict {
	var v SoakVerdict
	fail := func(format string, a ...any) { v.Failures = append(v.Failures, fmt.Sprintf(format, a...)) }
	if len(ws) < 2 {
		fail("only %d window(s) after warm-up: run longer", len(ws))
	} else {
		q := max(1, len(ws)/4)
		if len(ws) >= 4 {
			q = max(2, q)
		}
		first, last := ws[:q], ws[len(ws)-q:]
		rss := func(w []Window) uint64 {
			var xs []uint64
			for _, x := range w {
				if x.RSSKiB > 0 {
					xs = append(xs, x.RSSKiB)
				}
			}
			return median(xs)
		}
		p99 := func(w []Window) time.Duration {
			var xs []time.Duration
			for _, x := range w {
				if x.Requests > 0 {
					xs = append(xs, x.P99)
				}
			}
			return median(xs)
		}
		v.RSSStart, v.RSSEnd = rss(first), rss(last)
		v.P99Start, v.P99End = p99(first), p99(last)
		switch {
		case v.RSSStart == 0 || v.RSSEnd == 0:
			fail("RSS could not be read")
		default:
			v.RSSDrift = float64(v.RSSEnd)/float64(v.RSSStart) - 1
			if v.RSSDrift > MaxRSSDrift {
				fail("RSS drift %+.1f %% (%d → %d KiB), limit +%.0f %%", 100*v.RSSDrift, v.RSSStart, v.RSSEnd, 100*MaxRSSDrift)
			}
		}
		switch {
		case v.P99Start <= 0 || v.P99End <= 0:
			fail("no latency measured at the start or the end")
		default:
			v.P99Drift = float64(v.P99End)/float64(v.P99Start) - 1
			if v.P99Drift > MaxP99Drift {
				fail("p99 drift %+.0f %% (%v → %v), limit +%.0f %%", 100*v.P99Drift, v.P99Start, v.P99End, 100*MaxP99Drift)
			}
		}
	}
	v.FDGrowth = t.FDsAfter - t.FDsBefore
	if v.FDGrowth > 0 {
		fail("fd growth: %d open before the load, %d after", t.FDsBefore, t.FDsAfter)
	}
	if t.Status5xx > 0 {
		fail("%d answers with a 5xx status the scenario did not provoke", t.Status5xx)
	}
	if t.Unanswered > 0 {
		fail("%d requests not answered (connect errors, timeouts, broken connections, truncated bodies)", t.Unanswered)
	}
	if t.Unexpected > 0 {
		fail("%d answers with an unexpected status", t.Unexpected)
	}
	if t.Requests == 0 {
		fail("no request completed")
	}
	return v
}

func median[T uint64 | time.Duration](xs []T) T {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 0 {
		return s[len(s)/2-1]/2 + s[len(s)/2]/2
	}
	return s[len(s)/2]
}

// RenderWindows writes the windows as a Markdown table.
func RenderWindows(w io.Writer, ws []Window) {
	fmt.Fprintln(w, "| from | requests | failed | 5xx | p99 served | p99 from due | RSS MiB | fds | reloads |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range ws {
		fmt.Fprintf(w, "| %v | %d | %d | %d | %s | %s | %.1f | %d | %d |\n", x.Start.Round(time.Second), x.Requests, x.Failed,
			x.Status5xx, ms(x.P99), ms(x.P99Due), float64(x.RSSKiB)/1024, x.FDs, x.Reloads)
	}
}

// RenderSoakVerdict writes the verdict's figures and its failures.
func RenderSoakVerdict(w io.Writer, v SoakVerdict, t SoakTotals) {
	fmt.Fprintf(w, "RSS (first → last quarter, medians): %.1f → %.1f MiB, drift %+.1f %% (limit +%.0f %%)\n",
		float64(v.RSSStart)/1024, float64(v.RSSEnd)/1024, 100*v.RSSDrift, 100*MaxRSSDrift)
	fmt.Fprintf(w, "p99 service time of small requests: %s → %s, drift %+.0f %% (limit +%.0f %%)\n", ms(v.P99Start), ms(v.P99End), 100*v.P99Drift, 100*MaxP99Drift)
	fmt.Fprintf(w, "open fds outside the upstream pool, quiet: %d before, %d after (growth %d)\n", t.FDsBefore, t.FDsAfter, v.FDGrowth)
	fmt.Fprintf(w, "requests: %d; 5xx: %d; not answered: %d; unexpected status: %d\n", t.Requests, t.Status5xx, t.Unanswered, t.Unexpected)
	if v.Passed() {
		fmt.Fprintln(w, "soak: PASS")
		return
	}
	for _, f := range v.Failures {
		fmt.Fprintln(w, "soak: FAIL:", f)
	}
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/1e6) }

// Fault is one fault of the chaos run, as it happened: what was done, when,
// and which failed requests that accounts for.
type Fault struct {
	Name     string
	From, To time.Duration // the phase: its requests are those sent in [From, To)
	At       time.Duration // when the fault was injected
	Explains func(*Record) bool
	Note     string // what the fault explains, in words, for the table's legend
	Baseline bool   // no fault: the steady load before the first; no recovery time
}

// KillRule explains the failures on the connections the killed worker
// owned: those it held when its fds were read at seen (owned: the clients'
// local ports), and those opened between seen and gone, when its last
// thread had exited and its listening socket was closed, which it may have
// taken meanwhile (reset when it died, or a SYN dropped by the listener
// closing under it, which the client retries only after a second). A
// connection opened after gone that fails is not explained: the selector
// must send it to a live worker.
func KillRule(owned map[uint16]bool, seen, gone time.Duration) func(*Record) bool {
	return func(r *Record) bool { return r.Failed() && r.Dialed < gone && (owned[r.Port] || r.Dialed >= seen) }
}

// StopRule explains, for a worker stopped at t0 (its fds read at seen, as
// for KillRule): the failures on the connections it owned (they stall until
// it continues), and the failures on connections opened within grace after
// t0, which the selector may still have given the stopped worker before the
// supervisor took it out (a timeout, and the requests pipelined behind it).
// A connection opened later that fails was black-holed, and is not
// explained.
func StopRule(owned map[uint16]bool, seen, t0, grace time.Duration) func(*Record) bool {
	return func(r *Record) bool {
		if !r.Failed() {
			return false
		}
		if r.Dialed < t0 && (owned[r.Port] || r.Dialed >= seen) {
			return true
		}
		// A connection the selector handed the stopped worker before it was
		// taken out: the first request times out, the ones pipelined
		// behind it break with the connection.
		return r.Dialed >= t0 && r.Dialed < t0+grace
	}
}

// UpstreamDownRule explains, for an upstream killed at t0 and listening
// again at t1: the gateway's error answers (502, 503, 504) and bodies cut
// short (the head was sent before the upstream died) for requests
// outstanding within [t0, t1+slack]. A dropped connection or a timeout is
// not explained: the gateway must answer.
func UpstreamDownRule(t0, t1, slack time.Duration) func(*Record) bool {
	return func(r *Record) bool {
		if !r.Failed() || !r.Overlaps(t0, t1+slack) {
			return false
		}
		switch r.Outcome {
		case BadStatus:
			return r.Status == 502 || r.Status == 503 || r.Status == 504
		case Truncated:
			return true
		}
		return false
	}
}

// Upstream503Rule explains the 503 answers to requests outstanding while
// the upstream answered 503, [t0, t1+slack].
func Upstream503Rule(t0, t1, slack time.Duration) func(*Record) bool {
	return func(r *Record) bool {
		return r.Failed() && r.Outcome == BadStatus && r.Status == 503 && r.Overlaps(t0, t1+slack)
	}
}

// ExplainsNothing is the rule of a fault no request may fail under
// (reloads must lose nothing).
func ExplainsNothing(*Record) bool { return false }

// Row is one line of the chaos table.
type Row struct {
	Fault     string
	Sent      int
	Failed    int
	Explained int
	Recovery  time.Duration // from the injection to the end of the last failed or slowly served request
	Recovered bool          // false: still failing or slow at the end of the phase
	Baseline  bool          // the row of the steady load: no recovery time
	ByOutcome map[string]int
	// Stray holds the first maxStray failures the fault does not explain,
	// for the listing under the table.
	Stray []Record
	At    time.Duration // when the fault was injected: Stray's times are shown from it
}

// maxStray bounds the unexplained failures a row keeps for the listing.
const maxStray = 10

// Unexplained is how many failures the fault does not account for.
func (r Row) Unexplained() int { return r.Failed - r.Explained }

// Recovery bins: the time after a fault is cut into bins by the requests'
// end; a bin is bad if a request in it failed, or more than slowShare of its
// requests were served slowly (one stray slow request on a shared machine is
// not a fault still acting).
const (
	binWidth  = 100 * time.Millisecond
	slowShare = 0.01
)

// Tally counts the phase's requests (those due in [f.From, f.To)) and
// finds its time to full recovery: from f.At to the end of the last bad bin
// (see binWidth) among the requests that ended after f.At. Slow is measured
// on the service time (sent to answered), not from when a request was due:
// the backlog a stall leaves in the client's schedule is the client's, not
// the gateway's. Recovered is false when the last bad bin ends within settle
// of the phase's end.
func Tally(recs []Record, f Fault, slow, settle time.Duration) Row {
	row := Row{Fault: f.Name, Recovered: true, Baseline: f.Baseline, ByOutcome: map[string]int{}, At: f.At}
	type bin struct{ n, slow, failed int }
	bins := map[int]*bin{}
	for i := range recs {
		r := &recs[i]
		// By when it was sent, not when it was due: a request the client
		// sends late, behind its schedule, meets the fault of the phase it
		// is sent in.
		if r.Start < f.From || r.Start >= f.To {
			continue
		}
		row.Sent++
		if r.Failed() {
			row.Failed++
			key := r.Outcome.String()
			if r.Outcome == BadStatus {
				key = fmt.Sprint(r.Status)
			}
			row.ByOutcome[key]++
			if f.Explains != nil && f.Explains(r) {
				row.Explained++
			} else if len(row.Stray) < maxStray {
				row.Stray = append(row.Stray, *r)
			}
		}
		if r.End < f.At || f.Baseline {
			continue
		}
		k := int((r.End - f.At) / binWidth)
		b := bins[k]
		if b == nil {
			b = &bin{}
			bins[k] = b
		}
		b.n++
		switch {
		case r.Failed():
			b.failed++
		case r.Service() > slow:
			b.slow++
		}
	}
	last := -1
	for k, b := range bins {
		if (b.failed > 0 || float64(b.slow) > slowShare*float64(b.n)) && k > last {
			last = k
		}
	}
	if last >= 0 {
		row.Recovery = time.Duration(last+1) * binWidth
		if f.At+row.Recovery > f.To-settle {
			row.Recovered = false
		}
	}
	return row
}

// Tabulate writes the chaos table in Markdown.
func Tabulate(w io.Writer, rows []Row) {
	fmt.Fprintln(w, "| fault | requests sent | failed | failed that the fault explains | unexplained | time to full recovery | failures by kind |")
	fmt.Fprintln(w, "|---|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		rec := "0 s"
		switch {
		case r.Baseline:
			rec = "–"
		case !r.Recovered:
			rec = fmt.Sprintf("not within %.1f s", r.Recovery.Seconds())
		case r.Recovery > 0:
			rec = fmt.Sprintf("%.2f s", r.Recovery.Seconds())
		}
		keys := make([]string, 0, len(r.ByOutcome))
		for k := range r.ByOutcome {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		parts := make([]string, 0, len(keys))
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s %d", k, r.ByOutcome[k]))
		}
		by := strings.Join(parts, ", ")
		if by == "" {
			by = "–"
		}
		fmt.Fprintf(w, "| %s | %d | %d | %d | %d | %s | %s |\n", r.Fault, r.Sent, r.Failed, r.Explained, r.Unexplained(), rec, by)
	}
}

// ListStray writes the unexplained failures the rows kept, one a line,
// their times from the fault's injection, so that a failed run says what
// failed when.
func ListStray(w io.Writer, rows []Row) {
	for _, r := range rows {
		if len(r.Stray) == 0 {
			continue
		}
		fmt.Fprintf(w, "Unexplained under %q (times from the fault; the first %d of %d):\n", r.Fault, len(r.Stray), r.Unexplained())
		for i := range r.Stray {
			x := &r.Stray[i]
			fmt.Fprintf(w, "- %s, %s", x.Kind, x.Outcome)
			if x.Status != 0 {
				fmt.Fprintf(w, " %d", x.Status)
			}
			fmt.Fprintf(w, ": client port %d, connection opened at %s, sent at %s, ended at %s\n",
				x.Port, rel(x.Dialed-r.At), rel(x.Start-r.At), rel(x.End-r.At))
		}
	}
}

func rel(d time.Duration) string { return fmt.Sprintf("%+.1f ms", float64(d)/1e6) }
