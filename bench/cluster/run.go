package cluster

import (
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"text/tabwriter"
	"time"
)

// Options of a run of the scenarios.
type Options struct {
	Env   *Env
	Short bool      // fewer iterations and shorter phases (CI)
	Out   io.Writer // progress lines and the table
}

func (o *Options) logf(format string, args ...any) {
	fmt.Fprintf(o.Out, "%s  %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// pick is the short form's n or the full one's.
func (o *Options) pick(full, short int) int {
	if o.Short {
		return short
	}
	return full
}

// Row is one figure of the table.
type Row struct {
	Scenario string
	Figure   string
	Value    string
	Target   string
	Pass     bool
}

// Report is the table a run fills, a row at a time.
type Report struct {
	Rows []Row
}

func (r *Report) add(scenario, figure, value, target string, pass bool) {
	r.Rows = append(r.Rows, Row{scenario, figure, value, target, pass})
}

// Failed tells whether any row failed.
func (r *Report) Failed() bool {
	for _, row := range r.Rows {
		if !row.Pass {
			return true
		}
	}
	return false
}

// Print writes the table.
func (r *Report) Print(w io.Writer) {
	tw := tabwriter.NewWriter(w, 2, 8, 2, ' ', 0)
	fmt.Fprintln(tw, "scenario\tfigure\tvalue\ttarget\t")
	for _, row := range r.Rows {
		v := "ok"
		if !row.Pass {
			v = "FAIL"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", row.Scenario, row.Figure, row.Value, row.Target, v)
	}
	_ = tw.Flush()
}

// A Scenario runs against the cluster and adds its rows; an error is a
// scenario that could not run to its end (a row says so too).
type Scenario struct {
	Name string
	Run  func(o *Options, r *Report) error
}

// Scenarios are the scenarios in the order they run.
var Scenarios = []Scenario{
	{"propagation", propagation},
	{"limit-count", limitCount},
	{"etcd", etcdMembers},
	{"redis", redisDown},
	{"data-plane", dataPlanes},
}

// ErrFailed: a scenario failed (the table says which).
var ErrFailed = errors.New("cluster: a scenario failed")

// Run runs the scenarios named in only (all when empty), prints the table,
// and returns ErrFailed when a row failed.
func Run(o Options, only []string) (*Report, error) {
	r := &Report{}
	// the figures are read against what else the machine ran
	load := loadAvg()
	for _, s := range Scenarios {
		if len(only) > 0 && !contains(only, s.Name) {
			continue
		}
		o.logf("== %s", s.Name)
		t0 := time.Now()
		if err := s.Run(&o, r); err != nil {
			o.logf("%s: %v", s.Name, err)
			r.add(s.Name, "ran to its end", err.Error(), "no error", false)
		}
		o.logf("%s: %v", s.Name, time.Since(t0).Round(time.Millisecond))
	}
	r.add("machine", "load average, before / after", load+" / "+loadAvg(), fmt.Sprintf("reported (%d CPUs)", runtime.NumCPU()), true)
	fmt.Fprintln(o.Out)
	r.Print(o.Out)
	if r.Failed() {
		return r, ErrFailed
	}
	return r, nil
}

// undoList is the cluster.sh commands that bring back what a scenario's
// faults took away, in the order they were taken.
type undoList [][]string

// run runs them, the last first, keeping the first failure in *err
// unless it holds one already: a scenario's deferred clean-up.
func (u undoList) run(e *Env, err *error) {
	for i := len(u) - 1; i >= 0; i-- {
		if err2 := e.Run(u[i]...); err2 != nil && *err == nil {
			*err = err2
		}
	}
}

// loadAvg is the 1-minute load average, from /proc/loadavg.
func loadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) > 0 {
		return f[0]
	}
	return "?"
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if strings.TrimSpace(x) == s {
			return true
		}
	}
	return false
}

// ms renders a duration in milliseconds.
func ms(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}
