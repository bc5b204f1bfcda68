package report

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"sort"
	"strings"
	"time"
)

// Errors returned by this package.
var (
	ErrEmpty = errors.New("report: no results")
)

// Target names used in rows.
const (
	Coregate = "coregate"
	Nginx    = "nginx"
	// NginxPlain is nginx proxying with no plugin, measured in a plugin
	// scenario's rounds: its no-plugin reference.
	NginxPlain = "nginx no plugin"
	Direct     = "upstream direct"
	// Floor is bench/floor: the I/O of a proxy and nothing else, the
	// least any proxy's loop costs on the machine.
	Floor = "floor loop"
	// RingFloor is bench/floor's loop on io_uring: the same I/O in one
	// io_uring_enter per wake-up instead of a system call per operation.
	RingFloor = "floor loop io_uring"
)

// Machine describes where a run happened.
type Machine struct {
	Host     string `json:"host"`
	CPU      string `json:"cpu"`
	Cores    int    `json:"cores"`
	MemGiB   int    `json:"mem_gib"`
	Kernel   string `json:"kernel"`
	Go       string `json:"go"`
	Nginx    string `json:"nginx,omitempty"`
	Coregate string `json:"coregate,omitempty"` // what ran as coregate
}

// Placement records which CPUs each party ran on, as cpu lists.
type Placement struct {
	Gateway  string `json:"gateway"`
	Load     string `json:"load"`
	Upstream string `json:"upstream"`
	Scaling  string `json:"scaling"`
}

// Settings are the run's measurement parameters.
type Settings struct {
	Rounds    int     `json:"rounds"`
	DurationS float64 `json:"duration_s"`
	WarmupS   float64 `json:"warmup_s"`
	Conns     int     `json:"conns"`
	BodyBytes int     `json:"body_bytes"`
	Rate      float64 `json:"rate"`
}

// Sample is one measurement, or the per-field median of several.
type Sample struct {
	QPS          float64 `json:"qps"`
	Requests     uint64  `json:"requests"`
	Errors       uint64  `json:"errors"`
	Non2xx       uint64  `json:"non2xx"`
	P50          float64 `json:"p50_ms"`
	P95          float64 `json:"p95_ms"`
	P99          float64 `json:"p99_ms"`
	P999         float64 `json:"p999_ms"`
	CPUus        float64 `json:"cpu_us_per_req"`          // gateway processes
	LoadCPUus    float64 `json:"load_cpu_us_per_req"`     // the load generator (this program)
	UpstreamCPUs float64 `json:"upstream_cpu_us_per_req"` // the upstream
	GatewayCores float64 `json:"gateway_cores"`           // gateway CPU time / wall time
	RSSMiB       float64 `json:"rss_mib"`
	PSSMiB       float64 `json:"pss_mib,omitempty"` // shared pages counted once across the processes
	Procs        int     `json:"procs"`             // gateway processes counted
	ForeignCores float64 `json:"foreign_cores"`     // CPU used by anything else
	SlowCPU      float64 `json:"slow_cpu"`          // worst compute-probe time ÷ best seen
	Noisy        bool    `json:"noisy,omitempty"`
	Redone       int     `json:"redone,omitempty"` // times the round was redone as noisy
	// TLS scenarios: handshakes the load made, those of them that resumed
	// a session, and the responses of a second load of new connections
	// beside the measured one (counted in CPUus, not in Requests or QPS).
	Handshakes uint64 `json:"handshakes,omitempty"`
	Resumed    uint64 `json:"resumed,omitempty"`
	Background uint64 `json:"background_requests,omitempty"`
}

// Row is one scenario × worker count × target, with its rounds.
type Row struct {
	Scenario  string   `json:"scenario"`
	Title     string   `json:"title"`
	Group     string   `json:"group"`
	Routes    int      `json:"routes"`
	Consumers int      `json:"consumers"`
	Upstream  bool     `json:"upstream"`
	Workers   int      `json:"workers"`
	Target    string   `json:"target"`
	Mode      string   `json:"mode"`
	Rounds    []Sample `json:"rounds"`
	Median    Sample   `json:"median"`
	QPSRatio  float64  `json:"qps_ratio,omitempty"` // ÷ nginx, same scenario and workers
	CPURatio  float64  `json:"cpu_ratio,omitempty"`
	P99Ratio  float64  `json:"p99_ratio,omitempty"`
	// Plugin scenarios: what nginx does in their place (Equivalent, "":
	// nothing but proxying), and the scenario whose nginx row is the
	// no-plugin reference (Baseline), with the ratios to it.
	Equivalent   string  `json:"equivalent,omitempty"`
	Baseline     string  `json:"baseline,omitempty"`
	BaseQPSRatio float64 `json:"base_qps_ratio,omitempty"`
	BaseCPURatio float64 `json:"base_cpu_ratio,omitempty"`
}

// PendingPlugins is Pending.Why of a scenario whose plugins coregate does
// not have yet.
const PendingPlugins = "plugins not implemented yet"

// Pending is a scenario listed but not run, or run without coregate (Why
// says which and why).
type Pending struct {
	Scenario string `json:"scenario"`
	Title    string `json:"title"`
	Routes   int    `json:"routes"`
	Cons     int    `json:"consumers"`
	Upstream bool   `json:"upstream"`
	Why      string `json:"why"`
	// LeftOut: the scenario ran without coregate, which could not serve
	// it (Why); the other gateways' rows are in the run.
	LeftOut bool `json:"coregate_left_out,omitempty"`
}

// WrkCheck compares this package's load generator with wrk on one target.
type WrkCheck struct {
	Target  string    `json:"target"`
	Ours    []float64 `json:"ours_qps"`
	Wrk     []float64 `json:"wrk_qps"`
	OursP99 []float64 `json:"ours_p99_ms"`
	WrkP99  []float64 `json:"wrk_p99_ms"`
	// DiffPct is (median ours − median wrk) ÷ median wrk, in percent.
	DiffPct float64 `json:"diff_pct"`
}

// Run is a whole benchmark run.
type Run struct {
	Started   time.Time `json:"started"`
	Machine   Machine   `json:"machine"`
	Placement Placement `json:"placement"`
	Settings  Settings  `json:"settings"`
	Rows      []Row     `json:"rows"`
	Pending   []Pending `json:"pending,omitempty"`
	WrkCheck  *WrkCheck `json:"wrk_check,omitempty"`
	Notes     []string  `json:"notes,omitempty"`
	// Syscalls are the per-request counts perf stat took on each gateway
	// of a fixed-rate scenario.
	Syscalls []Syscalls `json:"syscalls,omitempty"`
}

// Syscalls is one gateway's system calls and context switches per
// request (Columns name PerReq's values), over Requests requests at Rate.
type Syscalls struct {
	Scenario string    `json:"scenario"`
	Target   string    `json:"target"`
	Workers  int       `json:"workers"`
	Rate     float64   `json:"rate"`
	Requests uint64    `json:"requests"`
	Columns  []string  `json:"columns"`
	PerReq   []float64 `json:"per_req"`
}

// Median returns the per-field median of samples (for an even count, the
// mean of the middle two). Noisy is set if any sample was noisy; Redone is
// summed.
func Median(samples []Sample) Sample {
	if len(samples) == 0 {
		return Sample{}
	}
	f := func(get func(Sample) float64) float64 {
		v := make([]float64, len(samples))
		for i, s := range samples {
			v[i] = get(s)
		}
		sort.Float64s(v)
		n := len(v)
		if n%2 == 1 {
			return v[n/2]
		}
		return (v[n/2-1] + v[n/2]) / 2
	}
	u := func(get func(Sample) uint64) uint64 {
		return uint64(math.Round(f(func(s Sample) float64 { return float64(get(s)) })))
	}
	m := Sample{
		QPS:          f(func(s Sample) float64 { return s.QPS }),
		Requests:     u(func(s Sample) uint64 { return s.Requests }),
		Errors:       u(func(s Sample) uint64 { return s.Errors }),
		Non2xx:       u(func(s Sample) uint64 { return s.Non2xx }),
		P50:          f(func(s Sample) float64 { return s.P50 }),
		P95:          f(func(s Sample) float64 { return s.P95 }),
		P99:          f(func(s Sample) float64 { return s.P99 }),
		P999:         f(func(s Sample) float64 { return s.P999 }),
		CPUus:        f(func(s Sample) float64 { return s.CPUus }),
		LoadCPUus:    f(func(s Sample) float64 { return s.LoadCPUus }),
		UpstreamCPUs: f(func(s Sample) float64 { return s.UpstreamCPUs }),
		GatewayCores: f(func(s Sample) float64 { return s.GatewayCores }),
		RSSMiB:       f(func(s Sample) float64 { return s.RSSMiB }),
		PSSMiB:       f(func(s Sample) float64 { return s.PSSMiB }),
		Procs:        int(f(func(s Sample) float64 { return float64(s.Procs) })),
		ForeignCores: f(func(s Sample) float64 { return s.ForeignCores }),
		SlowCPU:      f(func(s Sample) float64 { return s.SlowCPU }),
		Handshakes:   u(func(s Sample) uint64 { return s.Handshakes }),
		Resumed:      u(func(s Sample) uint64 { return s.Resumed }),
		Background:   u(func(s Sample) uint64 { return s.Background }),
	}
	for _, s := range samples {
		m.Noisy = m.Noisy || s.Noisy
		m.Redone += s.Redone
	}
	return m
}

// SetRatios fills each non-nginx row's ratios against the nginx row of the
// same scenario and worker count.
func (r *Run) SetRatios() {
	for i := range r.Rows {
		row := &r.Rows[i]
		row.QPSRatio, row.CPURatio, row.P99Ratio = 0, 0, 0
		if row.Target == Nginx || row.Target == NginxPlain {
			continue
		}
		j := slices.IndexFunc(r.Rows, func(o Row) bool {
			return o.Target == Nginx && o.Scenario == row.Scenario && o.Workers == row.Workers
		})
		if j < 0 {
			continue
		}
		ref := r.Rows[j].Median
		row.QPSRatio = ratio(row.Median.QPS, ref.QPS)
		if row.Target != Direct {
			row.CPURatio = ratio(row.Median.CPUus, ref.CPUus)
		}
		row.P99Ratio = ratio(row.Median.P99, ref.P99)
	}
	for i := range r.Rows {
		row := &r.Rows[i]
		row.BaseQPSRatio, row.BaseCPURatio = 0, 0
		if row.Baseline == "" || row.Target != Coregate {
			continue
		}
		base := r.find(row.Scenario, NginxPlain, row.Workers)
		if base == nil {
			base = r.find(row.Baseline, Nginx, row.Workers) // a run from before NginxPlain
		}
		if base != nil {
			row.BaseQPSRatio = ratio(row.Median.QPS, base.Median.QPS)
			row.BaseCPURatio = ratio(row.Median.CPUus, base.Median.CPUus)
		}
	}
}

func ratio(a, b float64) float64 {
	if b == 0 || a == 0 {
		return 0
	}
	return a / b
}

// WriteJSON writes the run as indented JSON.
func (r *Run) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// ReadJSON reads a run written by WriteJSON.
func ReadJSON(rd io.Reader) (*Run, error) {
	var r Run
	if err := json.NewDecoder(rd).Decode(&r); err != nil {
		return nil, fmt.Errorf("report: %w", err)
	}
	return &r, nil
}

// scalingLine says, for gateway t, what each worker count of the scaling
// curve costs and serves against one worker: CPU per request (all of the
// gateway's processes) and QPS. "" when there is no one-worker row.
func (r *Run) scalingLine(t string) string {
	one := r.find("scaling", t, 1)
	if one == nil || one.Median.CPUus == 0 || one.Median.QPS == 0 {
		return ""
	}
	var parts []string
	for _, row := range r.rowsIn("scaling") {
		if row.Target != t || row.Workers <= 1 {
			continue
		}
		q := row.Median.QPS / one.Median.QPS
		parts = append(parts, fmt.Sprintf("%d workers: CPU/req %.2f×, QPS %.2f× (%.0f %% of linear)", row.Workers,
			row.Median.CPUus/one.Median.CPUus, q, 100*q/float64(row.Workers)))
	}
	if len(parts) == 0 {
		return ""
	}
	return fmt.Sprintf("%s against 1 worker, %s.  \n", t, strings.Join(parts, "; "))
}

// rowsIn returns the rows of a group, in run order.
func (r *Run) rowsIn(group string) []Row {
	var out []Row
	for _, row := range r.Rows {
		if row.Group == group {
			out = append(out, row)
		}
	}
	return out
}

func fmtRatio(v float64) string {
	if v == 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f×", v)
}

func fmtQPS(v float64) string {
	if v >= 1000 {
		return fmt.Sprintf("%.1fk", v/1000)
	}
	return fmt.Sprintf("%.0f", v)
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// Markdown renders the run as a Markdown document: machine and placement,
// the seeds' table, the worker scaling table, the fixed-rate latency table,
// pending scenarios, the wrk cross-check and the notes.
func (r *Run) Markdown() string {
	var b strings.Builder
	m := r.Machine
	fmt.Fprintf(&b, "## Benchmark run %s\n\n", r.Started.UTC().Format("2006-01-02 15:04 UTC"))
	fmt.Fprintf(&b, "Machine: %s, %d cores (%s), %d GiB, Linux %s, %s", m.Host, m.Cores, m.CPU, m.MemGiB, m.Kernel, m.Go)
	if m.Nginx != "" {
		fmt.Fprintf(&b, ", %s", m.Nginx)
	}
	b.WriteString(".  \n")
	if m.Coregate != "" {
		fmt.Fprintf(&b, "coregate: %s.  \n", m.Coregate)
	}
	p, s := r.Placement, r.Settings
	fmt.Fprintf(&b, "Placement: gateway on cpu %s, load generator on cpu %s, upstream on cpu %s; worker scaling on cpu %s.  \n",
		p.Gateway, p.Load, p.Upstream, p.Scaling)
	fmt.Fprintf(&b, "Load: %d connections (%d per worker in the scaling curve), %.3g s warm-up, %.3g s measured, %d interleaved rounds, medians; upstream body %d bytes.\n\n",
		s.Conns, s.Conns, s.WarmupS, s.DurationS, s.Rounds, s.BodyBytes)

	if rows := r.rowsIn("main"); len(rows) > 0 {
		b.WriteString("| scenario | routes / consumers | upstream | gateway | QPS | P99 ms | P95 ms | CPU µs/req | RSS / PSS MiB | QPS ÷ nginx | CPU/req ÷ nginx |\n")
		b.WriteString("|---|---|---|---|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range rows {
			md := row.Median
			fmt.Fprintf(&b, "| %s | %d / %d | %s | %s%s | %s | %.2f | %.2f | %s | %s | %s | %s |\n",
				row.Title, row.Routes, row.Consumers, yesNo(row.Upstream), row.Target, noisyMark(md),
				fmtQPS(md.QPS), md.P99, md.P95, cpuCell(row), rssCell(row), fmtRatio(row.QPSRatio), fmtRatio(row.CPURatio))
		}
		b.WriteString("\n")
	}
	var plugged []Row
	for _, row := range r.rowsIn("main") {
		if row.Baseline != "" && row.Target == Coregate {
			plugged = append(plugged, row)
		}
	}
	if len(plugged) > 0 {
		b.WriteString("Plugin rows: coregate against nginx proxying with no plugin (the target: ≥ 1.0× QPS, ≤ 1.0× CPU/req), and against nginx doing the nearest job:\n\n")
		b.WriteString("| scenario | routes / consumers | nginx's nearest job | QPS ÷ nginx no plugin | CPU/req ÷ nginx no plugin | QPS ÷ nginx same job | CPU/req ÷ nginx same job |\n")
		b.WriteString("|---|---|---|---:|---:|---:|---:|\n")
		for _, row := range plugged {
			job := row.Equivalent
			if job == "" {
				job = "proxy only"
			}
			fmt.Fprintf(&b, "| %s | %d / %d | %s | %s | %s | %s | %s |\n", row.Title, row.Routes, row.Consumers, job,
				fmtRatio(row.BaseQPSRatio), fmtRatio(row.BaseCPURatio), fmtRatio(row.QPSRatio), fmtRatio(row.CPURatio))
		}
		b.WriteString("\n")
	}
	if rows := r.rowsIn("scaling"); len(rows) > 0 {
		slices.SortStableFunc(rows, func(a, b Row) int { return a.Workers - b.Workers })
		b.WriteString("Worker scaling (no plugins, 1 route):\n\n")
		b.WriteString("| workers | gateway | QPS | P99 ms | CPU µs/req | gateway cores busy | processes | RSS / PSS MiB | QPS ÷ nginx | CPU/req ÷ nginx |\n")
		b.WriteString("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range rows {
			md := row.Median
			fmt.Fprintf(&b, "| %d | %s%s | %s | %.2f | %s | %.2f | %d | %s | %s | %s |\n",
				row.Workers, row.Target, noisyMark(md), fmtQPS(md.QPS), md.P99, cpuCell(row), md.GatewayCores, md.Procs,
				rssCell(row), fmtRatio(row.QPSRatio), fmtRatio(row.CPURatio))
		}
		b.WriteString("\n")
		for _, t := range []string{Coregate, Nginx} {
			if line := r.scalingLine(t); line != "" {
				b.WriteString(line)
			}
		}
		b.WriteString("\n")
	}
	if rows := r.rowsIn("latency"); len(rows) > 0 {
		fmt.Fprintf(&b, "Latency at a fixed rate of %.0f req/s (coordinated omission corrected, as wrk2 -R):\n\n", s.Rate)
		b.WriteString("| gateway | QPS | P50 ms | P95 ms | P99 ms | P99.9 ms | CPU µs/req | P99 ÷ nginx | CPU/req ÷ nginx |\n")
		b.WriteString("|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range rows {
			md := row.Median
			fmt.Fprintf(&b, "| %s%s | %s | %.3f | %.3f | %.3f | %.3f | %s | %s | %s |\n",
				row.Target, noisyMark(md), fmtQPS(md.QPS), md.P50, md.P95, md.P99, md.P999, cpuCell(row),
				fmtRatio(row.P99Ratio), fmtRatio(row.CPURatio))
		}
		b.WriteString("\n")
	}
	if rows := r.rowsIn("tls"); len(rows) > 0 {
		b.WriteString("TLS 1.3 at the gateways' TLS listeners (same certificate, key and ticket setting on both; clients offer X25519 only):\n\n")
		b.WriteString("| scenario | gateway | load | QPS | P50 ms | P99 ms | CPU µs/req | handshakes (resumed) | QPS ÷ nginx | P99 ÷ nginx | CPU/req ÷ nginx |\n")
		b.WriteString("|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, row := range rows {
			md := row.Median
			fmt.Fprintf(&b, "| %s | %s%s | %s | %s | %.3f | %.3f | %s | %d (%d) | %s | %s | %s |\n",
				row.Title, row.Target, noisyMark(md), row.Mode, fmtQPS(md.QPS), md.P50, md.P99, cpuCell(row),
				md.Handshakes, md.Resumed, fmtRatio(row.QPSRatio), fmtRatio(row.P99Ratio), fmtRatio(row.CPURatio))
		}
		b.WriteString("\n")
	}
	for _, t := range []string{Coregate, Nginx} {
		one, many := r.find("no-plugin", t, 1), r.find("routes-5000", t, 1)
		if one != nil && many != nil && one.Median.QPS > 0 && one.Median.CPUus > 0 {
			fmt.Fprintf(&b, "%s, 5000 routes ÷ 1 route: QPS %.2f×, CPU/req %.2f×.  \n", t,
				many.Median.QPS/one.Median.QPS, many.Median.CPUus/one.Median.CPUus)
		}
	}
	var errs []string
	var load []float64
	for _, row := range r.Rows {
		md := row.Median
		if md.Errors > 0 || md.Non2xx > 0 {
			errs = append(errs, fmt.Sprintf("%s/%s w%d: %d errors, %d non-2xx", row.Scenario, row.Target, row.Workers, md.Errors, md.Non2xx))
		}
		if md.LoadCPUus > 0 {
			load = append(load, md.LoadCPUus)
		}
	}
	if len(load) > 0 {
		sort.Float64s(load)
		fmt.Fprintf(&b, "Load generator cost: %.1f µs CPU per request (median over rows).  \n", load[len(load)/2])
	}
	if len(errs) > 0 {
		fmt.Fprintf(&b, "Errors (median per round): %s.  \n", strings.Join(errs, "; "))
	}
	if hasNoisy(r.Rows) {
		b.WriteString("`*` a round of this row stayed noisy after redoing it (other CPU use above 0.1 core, or a CPU slower than usual).  \n")
	}
	var names []string
	for _, p := range r.Pending {
		if !p.LeftOut {
			names = append(names, fmt.Sprintf("%s (%d / %d)", p.Title, p.Routes, p.Cons))
		}
	}
	if len(names) > 0 {
		b.WriteString("\nPending scenarios (their plugins do not exist yet): ")
		b.WriteString(strings.Join(names, ", ") + ".\n")
	}
	for _, p := range r.Pending {
		if p.LeftOut {
			fmt.Fprintf(&b, "\nNot measured on coregate: %s (%s): %s.\n", p.Title, p.Scenario, p.Why)
		}
	}
	if w := r.WrkCheck; w != nil {
		fmt.Fprintf(&b, "\nCross-check against wrk -t1 -c%d on %s: this generator %s req/s, wrk %s req/s (medians), difference %+.1f %%.\n",
			s.Conns, w.Target, fmtQPS(medianOf(w.Ours)), fmtQPS(medianOf(w.Wrk)), w.DiffPct)
	}
	if len(r.Syscalls) > 0 {
		sc := r.Syscalls[0]
		fmt.Fprintf(&b, "\nPer request at a fixed %.0f req/s, %d requests, perf stat on every thread of the gateway's processes:\n\n", sc.Rate, sc.Requests)
		b.WriteString("| gateway |")
		for _, c := range sc.Columns {
			fmt.Fprintf(&b, " %s |", c)
		}
		b.WriteString("\n|---|" + strings.Repeat("---:|", len(sc.Columns)) + "\n")
		for _, s := range r.Syscalls {
			fmt.Fprintf(&b, "| %s |", s.Target)
			for _, v := range s.PerReq {
				fmt.Fprintf(&b, " %.2f |", v)
			}
			b.WriteString("\n")
		}
	}
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "\n%s\n", n)
	}
	return b.String()
}

// find returns the row of a scenario, target and worker count, or nil.
func (r *Run) find(scen, target string, workers int) *Row {
	for i, row := range r.Rows {
		if row.Scenario == scen && row.Target == target && row.Workers == workers {
			return &r.Rows[i]
		}
	}
	return nil
}

func cpuCell(row Row) string {
	if row.Target == Direct {
		return "–"
	}
	return fmt.Sprintf("%.1f", row.Median.CPUus)
}

func rssCell(row Row) string {
	if row.Target == Direct {
		return "–"
	}
	if row.Median.PSSMiB > 0 {
		return fmt.Sprintf("%.1f / %.1f", row.Median.RSSMiB, row.Median.PSSMiB)
	}
	return fmt.Sprintf("%.1f", row.Median.RSSMiB)
}

func noisyMark(s Sample) string {
	if s.Noisy {
		return " *"
	}
	return ""
}

func hasNoisy(rows []Row) bool {
	for _, r := range rows {
		if r.Median.Noisy {
			return true
		}
	}
	return false
}

func medianOf(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	s := slices.Clone(v)
	sort.Float64s(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// MedianOf returns the median of v, 0 for none.
func MedianOf(v []float64) float64 { return medianOf(v) }
