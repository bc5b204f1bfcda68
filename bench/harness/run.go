package harness

import (
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"coregate/bench/certs"
	"coregate/bench/load"
	"coregate/bench/procstat"
	"coregate/bench/report"
	"coregate/bench/scenario"

	"golang.org/x/sys/unix"
)

// Options configure a run.
type Options struct {
	Self      string // this program, for the upstream subcommand
	Coregate  string // coregate binary; "" leaves coregate out
	StandIn   bool   // run nginx in coregate's place (harness check before the gateway exists)
	Nginx     string // nginx binary; "" leaves the reference out
	Redis     string // redis-server binary, for the scenarios that count in Redis
	Perf      string // perf binary: count system calls per request in the fixed-rate scenario; "" to skip
	Direct    bool   // also measure the load generator against the upstream alone
	Floor     bool   // also measure the I/O floor (bench/floor, on epoll and on io_uring) in the one-worker no-plugin and fixed-rate scenarios
	Scenarios []scenario.Scenario
	Pending   []scenario.Scenario // listed in the report, not run

	Rounds   int
	Duration time.Duration
	Warmup   time.Duration
	Body     int // upstream body bytes
	Rate     float64

	GatewayCPUs  []int // non-scaling scenarios
	LoadCPUs     []int // this process
	UpstreamCPUs []int
	ScaleCPUs    []int // worker w of the scaling curve runs on ScaleCPUs[:w]

	Redo     int     // times a noisy round is redone
	MaxOther float64 // foreign CPU (cores) above which a round is noisy
	MaxSlow  float64 // probe slowdown above which a round is noisy

	WorkDir  string    // per-run temporary directory
	Progress io.Writer // progress lines; nil for none
	Live     bool      // Progress is a terminal: redraw a live line each second
	WrkCheck bool      // cross-check the load generator against wrk once
	Pprof    string    // COREGATE_PPROF value for coregate, "" for none
}

// target is one gateway instance under measurement.
type target struct {
	name    string
	addr    string
	tlsAddr string // the TLS listener, in a TLS scenario
	proc    *Proc  // nil for the upstream-direct target
	workers int
	cpus    []int // the gateway's CPUs
}

// Runner carries a run's state.
type Runner struct {
	o         Options
	up        *Proc
	upAddr    string
	up2       *Proc // the balancer scenarios' second node, nil before
	up2Addr   string
	redisPort int // the redis-server started for the run, 0 before
	bestSpin  map[int]time.Duration
	run       *report.Run
	certs     *certs.Set // the TLS scenarios' files, made for the first one
}

// New prepares a run.
func New(o Options) *Runner {
	if o.MaxOther == 0 {
		o.MaxOther = 0.10
	}
	if o.MaxSlow == 0 {
		o.MaxSlow = 1.15
	}
	return &Runner{o: o, bestSpin: map[int]time.Duration{}}
}

func (r *Runner) logf(format string, a ...any) {
	if r.o.Progress != nil {
		fmt.Fprintf(r.o.Progress, format, a...)
	}
}

// Run executes every scenario and returns the filled report. Processes are
// stopped before it returns.
func (r *Runner) Run() (*report.Run, error) {
	defer StopAll()
	o := r.o
	if o.Coregate == "" && !o.StandIn && o.Nginx == "" && !o.Direct && !o.Floor {
		return nil, ErrNoTarget
	}
	mach := machine(o) // before pinning narrows what this process sees
	r.run = &report.Run{
		Started: time.Now(),
		Machine: mach,
		Placement: report.Placement{
			Gateway:  procstat.FormatCPUList(o.GatewayCPUs),
			Load:     procstat.FormatCPUList(o.LoadCPUs),
			Upstream: procstat.FormatCPUList(o.UpstreamCPUs),
			Scaling:  procstat.FormatCPUList(o.ScaleCPUs),
		},
		Settings: report.Settings{Rounds: o.Rounds, DurationS: o.Duration.Seconds(), WarmupS: o.Warmup.Seconds(),
			Conns: 16, BodyBytes: o.Body, Rate: o.Rate},
	}
	for _, s := range o.Pending {
		r.run.Pending = append(r.run.Pending, report.Pending{Scenario: s.Name, Title: s.Title, Routes: s.Routes,
			Cons: s.Consumers, Upstream: s.Upstream, Why: report.PendingPlugins})
	}
	if err := r.startLoadAndUpstream(); err != nil {
		return nil, err
	}
	for si, s := range o.Scenarios {
		rows, err := r.scenario(s, o.Direct && si == 0)
		if err != nil {
			return r.run, err
		}
		r.run.Rows = append(r.run.Rows, rows...)
		r.run.SetRatios()
	}
	if o.WrkCheck {
		if err := r.wrkCheck(); err != nil {
			r.run.Notes = append(r.run.Notes, "wrk cross-check failed: "+err.Error())
		}
	}
	return r.run, nil
}

// startLoadAndUpstream pins this process, the load generator, to its CPUs
// with a P for each, and starts the run's upstream on its own.
func (r *Runner) startLoadAndUpstream() error {
	o := r.o
	if err := procstat.PinSelf(o.LoadCPUs); err != nil {
		return fmt.Errorf("harness: pin load generator: %w", err)
	}
	runtime.GOMAXPROCS(max(1, len(o.LoadCPUs)))
	var err error
	r.up, r.upAddr, err = StartUpstream(o.Self, o.UpstreamCPUs, o.Body, o.WorkDir)
	if err != nil {
		return err
	}
	r.logf("upstream on %s (pid %d, cpu %s)\n", r.upAddr, r.up.PID(), procstat.FormatCPUList(o.UpstreamCPUs))
	return nil
}

func (r *Runner) gatewayCPUs(s scenario.Scenario, w int) []int {
	if s.Group == scenario.GroupScaling && len(r.o.ScaleCPUs) > 0 {
		return r.o.ScaleCPUs[:min(w, len(r.o.ScaleCPUs))]
	}
	return r.o.GatewayCPUs
}

// scenario starts every target for s, at each of its worker counts,
// measures them all in the same interleaved rounds (so that the ratios
// between worker counts, like those between gateways, come from the same
// minutes of the machine; an idle gateway costs nothing) and returns one
// row per target.
func (r *Runner) scenario(s scenario.Scenario, direct bool) ([]report.Row, error) {
	o := r.o
	if s.Redis {
		port, err := r.startRedis()
		if err != nil {
			return nil, err
		}
		s.RedisPort = port
	}
	if s.Balancer != "" {
		addr, err := r.startUpstream2()
		if err != nil {
			return nil, err
		}
		s.Upstream2 = addr
	}
	s, err := s.WithJWTKey()
	if err != nil {
		return nil, err
	}
	var targets []*target
	defer func() {
		for _, t := range targets {
			if t.proc != nil {
				t.proc.Stop(5 * time.Second)
			}
		}
	}()
	for _, w := range s.Workers {
		cpus := r.gatewayCPUs(s, w)
		if o.Coregate != "" || o.StandIn {
			t, err := r.startCoregate(s, w, cpus)
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
		}
		if o.Nginx != "" {
			t, err := r.startNginx(s, w, cpus, report.Nginx)
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
			if s.Baseline != "" {
				// The no-plugin reference in the same rounds: the ratio a
				// plugin row is judged by comes from the same minutes of
				// the machine, not from another scenario's.
				t, err := r.startNginx(s.Plain(), w, cpus, report.NginxPlain)
				if err != nil {
					return nil, err
				}
				targets = append(targets, t)
			}
		}
	}
	if o.Floor && floorScenario(s) {
		for _, ring := range []bool{false, true} {
			t, err := r.startFloor(s, ring)
			if err != nil {
				return nil, err
			}
			targets = append(targets, t)
		}
	}
	if direct && len(s.Workers) > 0 {
		// The load of the largest worker count: the ceiling that matters
		// most is the one the biggest gateway runs against.
		w := s.Workers[len(s.Workers)-1]
		targets = append(targets, &target{name: report.Direct, addr: r.upAddr, workers: w, cpus: r.gatewayCPUs(s, w)})
	}
	ready := targets[:0]
	for _, t := range targets {
		if err := r.ready(s, t); err != nil {
			if !errors.Is(err, ErrNoTLS) {
				return nil, err
			}
			t.proc.Stop(5 * time.Second)
			r.logf("%s: coregate left out: %v\n", s.Name, err)
			r.run.Pending = append(r.run.Pending, report.Pending{Scenario: s.Name, Title: s.Title, Routes: s.Routes,
				Cons: s.Consumers, Upstream: s.Upstream, Why: oneLine(err), LeftOut: true})
			continue
		}
		ready = append(ready, t)
	}
	targets = ready
	samples := make([][]report.Sample, len(targets))
	for round := range o.Rounds {
		for k := range targets {
			i := (k + round) % len(targets) // rotate the order each round
			t := targets[i]
			var smp report.Sample
			for attempt := 0; ; attempt++ {
				label := fmt.Sprintf("%s w%d %s round %d/%d", s.Name, t.workers, t.name, round+1, o.Rounds)
				var err error
				smp, err = r.measure(s, t, t.cpus, label)
				if err != nil {
					return nil, err
				}
				smp.Redone = attempt
				if !smp.Noisy || attempt >= o.Redo {
					break
				}
				r.logf("  noisy round (other CPU %.2f cores, slow CPU ×%.2f): redoing\n", smp.ForeignCores, smp.SlowCPU)
			}
			samples[i] = append(samples[i], smp)
		}
	}
	if s.Group == scenario.GroupLatency && o.Perf != "" {
		for _, t := range targets {
			if t.proc == nil {
				continue
			}
			sc, err := r.countSyscalls(s, t)
			if err != nil {
				r.run.Notes = append(r.run.Notes, err.Error())
				continue
			}
			r.run.Syscalls = append(r.run.Syscalls, sc)
		}
	}
	rows := make([]report.Row, len(targets))
	for i, t := range targets {
		conns := s.Load.ConnsFor(t.workers)
		mode := fmt.Sprintf("closed c%d", conns)
		if s.Load.Rate > 0 {
			mode = fmt.Sprintf("fixed %.0f req/s c%d", s.Load.Rate, conns)
		}
		rows[i] = report.Row{Scenario: s.Name, Title: s.Title, Group: s.Group, Routes: s.Routes, Consumers: s.Consumers,
			Equivalent: s.Equivalent(), Baseline: s.Baseline,
			Upstream: s.Upstream, Workers: t.workers, Target: t.name, Mode: mode, Rounds: samples[i], Median: report.Median(samples[i])}
		md := rows[i].Median
		r.logf("%-14s w%d %-16s %8.0f req/s  p99 %6.2f ms  cpu %6.1f µs/req  rss %5.1f MiB  pss %5.1f MiB\n",
			s.Name, t.workers, t.name, md.QPS, md.P99, md.CPUus, md.RSSMiB, md.PSSMiB)
	}
	return rows, nil
}

func (r *Runner) startCoregate(s scenario.Scenario, w int, cpus []int) (*target, error) {
	if r.o.StandIn {
		t, err := r.startNginx(s, w, cpus, report.Coregate)
		return t, err
	}
	return r.startCoregateBin(r.o.Coregate, report.Coregate, s, w, cpus)
}

// floorScenario reports whether the I/O floor is measured beside s: the
// one-worker scenarios of a plain proxy, at saturation and at a fixed
// rate, the two loads the cost per request is judged at.
func floorScenario(s scenario.Scenario) bool {
	return (s.Name == "no-plugin" || s.Group == scenario.GroupLatency) && slices.Equal(s.Workers, []int{1})
}

// startFloor runs "self floor" (with ring, "self floor -ring") on the
// gateway's CPUs, with the worker's GOMAXPROCS (worker.Procs,
// which bench/ may not import), in front of the run's upstream.
func (r *Runner) startFloor(s scenario.Scenario, ring bool) (*target, error) {
	cpus := r.gatewayCPUs(s, 1)
	name, sub, args := report.Floor, "floor", []string{"floor", "-listen", "127.0.0.1:0", "-upstream", r.upAddr}
	if ring {
		name, sub, args = report.RingFloor, "floor-ring", append(args, "-ring")
	}
	dir := filepath.Join(r.o.WorkDir, sub+"-"+s.Name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	p, out, err := Start(name, cpus, []string{"GOMAXPROCS=4"}, filepath.Join(dir, "floor.log"), true, append([]string{r.o.Self}, args...)...)
	if err != nil {
		return nil, err
	}
	addr, err := UpstreamAddr(p, out)
	if err != nil {
		return nil, fmt.Errorf("harness: %s: %w", name, err)
	}
	return &target{name: name, addr: addr, proc: p, workers: 1, cpus: cpus}, nil
}

func (r *Runner) startNginx(s scenario.Scenario, w int, cpus []int, name string) (*target, error) {
	port, err := FreePort()
	if err != nil {
		return nil, err
	}
	s, tlsAddr, err := r.withTLS(s)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(r.o.WorkDir, fmt.Sprintf("%s-%s-w%d", strings.ReplaceAll(name, " ", "-"), s.Name, w))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	conf := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(conf, scenario.NginxConfig(s, dir, port, w, r.upAddr), 0o644); err != nil {
		return nil, err
	}
	p, _, err := Start(name, cpus, nil, filepath.Join(dir, "nginx.log"), false,
		r.o.Nginx, "-p", dir+"/", "-c", conf, "-e", filepath.Join(dir, "error.log"))
	if err != nil {
		return nil, err
	}
	return &target{name: name, addr: fmt.Sprintf("127.0.0.1:%d", port), tlsAddr: tlsAddr, proc: p, workers: w, cpus: cpus}, nil
}

// ready waits for t to answer GET /hello with 200 on its plain listener
// and, in a TLS scenario, checks its TLS listener (probeTLS). A coregate
// target of a TLS scenario that fails either way is reported as ErrNoTLS:
// the gateway does not serve TLS (yet), which leaves it out of the
// scenario rather than failing the run.
func (r *Runner) ready(s scenario.Scenario, t *target) error {
	err := WaitReady(t.proc, t.addr, "/hello", s.Load.Header, 15*time.Second)
	if err == nil && t.tlsAddr != "" {
		var desc string
		if desc, err = r.probeTLS(s, t); err == nil {
			r.logf("%s: %s negotiates %s\n", s.Name, t.name, desc)
			if r.run != nil { // nil in a pair
				r.run.Notes = append(r.run.Notes, fmt.Sprintf("%s: %s negotiated %s.", s.Name, t.name, desc))
			}
		}
	}
	if err != nil && s.TLS != nil && t.name == report.Coregate && !r.o.StandIn {
		return fmt.Errorf("%w: %w", ErrNoTLS, err)
	}
	return err
}

// startUpstream2 starts the balancer scenarios' second upstream, the
// first one's twin on the same CPUs, once, and returns its address.
// StopAll stops it.
func (r *Runner) startUpstream2() (string, error) {
	if r.up2 != nil {
		return r.up2Addr, nil
	}
	dir := filepath.Join(r.o.WorkDir, "upstream2")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	p, addr, err := StartUpstream(r.o.Self, r.o.UpstreamCPUs, r.o.Body, dir)
	if err != nil {
		return "", err
	}
	r.up2, r.up2Addr = p, addr
	r.logf("second upstream on %s (pid %d, cpu %s)\n", addr, p.PID(), procstat.FormatCPUList(r.o.UpstreamCPUs))
	return addr, nil
}

// upPIDs are the upstreams' processes: the run's, and the second one once
// a balancer scenario started it.
func (r *Runner) upPIDs() []int {
	if r.up2 == nil {
		return r.up.PIDs()
	}
	return append(r.up.PIDs(), r.up2.PIDs()...)
}

// startRedis starts the run's redis-server on the upstream's CPUs, once,
// and returns its port. It is a backend, as the upstream is: its CPU is
// not the gateway's.
func (r *Runner) startRedis() (int, error) {
	if r.redisPort != 0 {
		return r.redisPort, nil
	}
	if r.o.Redis == "" {
		return 0, errors.New("harness: a scenario counts in Redis and no redis-server was given")
	}
	port, err := StartRedis(r.o.Redis, r.o.UpstreamCPUs, r.o.WorkDir)
	if err != nil {
		return 0, err
	}
	r.logf("redis-server on 127.0.0.1:%d (cpu %s)\n", port, procstat.FormatCPUList(r.o.UpstreamCPUs))
	r.redisPort = port
	return port, nil
}

// StartRedis starts the redis-server bin on cpus, without persistence,
// its files in dir, and returns its port once it accepts connections.
// StopAll stops it.
func StartRedis(bin string, cpus []int, dir string) (int, error) {
	port, err := FreePort()
	if err != nil {
		return 0, err
	}
	_, _, err = Start("redis", cpus, nil, filepath.Join(dir, "redis.log"), false,
		bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", dir)
	if err != nil {
		return 0, err
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for deadline := time.Now().Add(10 * time.Second); ; {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			return port, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("harness: redis-server on %s: %w", addr, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// snapshot is CPU accounting at one instant.
type snapshot struct {
	gw, up, self procstat.Usage
	sys          []procstat.CPUTimes
	at           time.Time
}

func (r *Runner) snap(gwPIDs []int) snapshot {
	sys, _ := procstat.ReadSystem()
	return snapshot{
		gw:   procstat.Measure(gwPIDs),
		up:   procstat.Measure(r.upPIDs()),
		self: procstat.Measure([]int{os.Getpid()}),
		sys:  sys,
		at:   time.Now(),
	}
}

// waitIdle waits up to 5 s for the machine to be quiet: CPU used by
// anything but this run's processes below MaxOther.
func (r *Runner) waitIdle(gwPIDs []int) float64 {
	var other float64
	for range 25 {
		a := r.snap(gwPIDs)
		time.Sleep(200 * time.Millisecond)
		b := r.snap(gwPIDs)
		other = foreign(a, b)
		if other < r.o.MaxOther {
			break
		}
	}
	return other
}

// foreign returns the CPU, in cores, used between a and b by anything but
// the gateway, the upstream and this process.
func foreign(a, b snapshot) float64 {
	if len(a.sys) == 0 || len(b.sys) == 0 {
		return 0
	}
	total := float64(b.sys[0].Busy) - float64(a.sys[0].Busy)
	ours := float64(b.gw.Ticks+b.up.Ticks+b.self.Ticks) - float64(a.gw.Ticks+a.up.Ticks+a.self.Ticks)
	secs := b.at.Sub(a.at).Seconds()
	if secs <= 0 {
		return 0
	}
	return math.Max(0, (total-ours)/procstat.Hz/secs)
}

// probe times the compute loop on cpus and returns the worst ratio to the
// best time seen on each CPU so far.
func (r *Runner) probe(cpus []int) float64 {
	p, err := procstat.Probe(cpus)
	if err != nil {
		return 1
	}
	worst := 1.0
	for c, d := range p {
		best, ok := r.bestSpin[c]
		if !ok || d < best {
			r.bestSpin[c], best = d, d
		}
		worst = math.Max(worst, float64(d)/float64(best))
	}
	return worst
}

func (r *Runner) measure(s scenario.Scenario, t *target, gwCPUs []int, label string) (report.Sample, error) {
	o := r.o
	var pids []int
	if t.proc != nil {
		if t.proc.Exited() {
			return report.Sample{}, fmt.Errorf("%w: %s: %s", ErrExited, t.name, t.proc.Tail(20))
		}
		pids = t.proc.PIDs()
	}
	r.waitIdle(pids)
	if o.Warmup > 0 {
		if _, _, err := r.drive(s, t, o.Warmup, nil); err != nil {
			return report.Sample{}, fmt.Errorf("harness: warm-up %s: %w", t.name, err)
		}
	}
	cpus := append(append(append([]int{}, gwCPUs...), o.LoadCPUs...), o.UpstreamCPUs...)
	slowBefore := r.probe(cpus)
	if t.proc != nil {
		pids = t.proc.PIDs() // workers may have been spawned meanwhile
	}
	a := r.snap(pids)
	if !o.Live {
		r.logf("  %s\n", label)
	}
	progress := func(p load.Progress) {
		if !o.Live {
			return
		}
		r.logf("\r  %s: %4.1f/%.0f s %8.0f req/s errors %d\033[K", label, p.Elapsed.Seconds(), o.Duration.Seconds(),
			float64(p.Requests)/p.Elapsed.Seconds(), p.Errors)
	}
	res, bg, err := r.drive(s, t, o.Duration, progress)
	if err != nil {
		return report.Sample{}, fmt.Errorf("harness: load %s: %w", t.name, err)
	}
	if t.proc != nil {
		pids = union(pids, t.proc.PIDs())
	}
	b := r.snap(pids)
	slowAfter := r.probe(cpus)
	if o.Live {
		r.logf("\r\033[K")
	}
	ms := func(q float64) float64 { return float64(res.Latency.MustQuantile(q)) / 1e6 }
	// The CPU is the gateway's over both loads, when there is a second
	// one: it is divided by every response of the two.
	served := res.Requests + bg.Requests
	perReq := func(ticks uint64) float64 {
		if served == 0 {
			return 0
		}
		return float64(ticks) / procstat.Hz * 1e6 / float64(served)
	}
	smp := report.Sample{
		QPS: res.RPS(), Requests: res.Requests, Errors: res.Errors + bg.Errors, Non2xx: res.Non2xx + bg.Non2xx,
		Handshakes: res.Handshakes + bg.Handshakes, Resumed: res.Resumed + bg.Resumed, Background: bg.Requests,
		P50: ms(0.5), P95: ms(0.95), P99: ms(0.99), P999: ms(0.999),
		LoadCPUus:    perReq(b.self.Ticks - a.self.Ticks),
		UpstreamCPUs: perReq(b.up.Ticks - a.up.Ticks),
		ForeignCores: foreign(a, b),
		SlowCPU:      math.Max(slowBefore, slowAfter),
	}
	if t.proc != nil {
		smp.CPUus = perReq(b.gw.Ticks - a.gw.Ticks)
		smp.GatewayCores = float64(b.gw.Ticks-a.gw.Ticks) / procstat.Hz / b.at.Sub(a.at).Seconds()
		smp.RSSMiB = float64(b.gw.RSSKiB) / 1024
		smp.PSSMiB = float64(b.gw.PSSKiB) / 1024
		smp.Procs = b.gw.Procs
	}
	smp.Noisy = smp.ForeignCores > o.MaxOther || smp.SlowCPU > o.MaxSlow
	return smp, nil
}

// oneLine is err's message on one line: its first line and, where a log
// tail follows, the tail's last line, what the process said last.
func oneLine(err error) string {
	lines := strings.Split(strings.TrimSpace(err.Error()), "\n")
	if len(lines) == 1 {
		return lines[0]
	}
	return strings.TrimSpace(lines[0]) + " … " + strings.TrimSpace(lines[len(lines)-1])
}

func union(a, b []int) []int {
	out := append([]int{}, a...)
	for _, x := range b {
		found := false
		for _, y := range a {
			found = found || x == y
		}
		if !found {
			out = append(out, x)
		}
	}
	return out
}

var (
	wrkRPS = regexp.MustCompile(`Requests/sec:\s+([0-9.]+)`)
	wrkP99 = regexp.MustCompile(`\s99%\s+([0-9.]+)(us|ms|s)`)
)

// wrkCheck runs this generator and wrk alternately, three times each, on
// an nginx no-plugin target (or coregate when nginx is absent).
func (r *Runner) wrkCheck() error {
	wrk, err := exec.LookPath("wrk")
	if err != nil {
		return errors.New("wrk not installed")
	}
	s := scenario.Seeds(1, 0)[0]
	var t *target
	if r.o.Nginx != "" {
		t, err = r.startNginx(s, 1, r.o.GatewayCPUs, report.Nginx)
	} else {
		t, err = r.startCoregate(s, 1, r.o.GatewayCPUs)
	}
	if err != nil {
		return err
	}
	defer t.proc.Stop(5 * time.Second)
	if err := WaitReady(t.proc, t.addr, "/hello", "", 15*time.Second); err != nil {
		return err
	}
	wc := &report.WrkCheck{Target: t.name + " no-plugin"}
	secs := strconv.Itoa(int(math.Max(1, r.o.Duration.Seconds())))
	for i := range 3 {
		r.logf("  wrk cross-check %d/3\n", i+1)
		res, err := load.Run(load.Config{Addr: t.addr, Conns: 16, Duration: r.o.Duration})
		if err != nil {
			return err
		}
		wc.Ours = append(wc.Ours, res.RPS())
		wc.OursP99 = append(wc.OursP99, float64(res.Latency.MustQuantile(0.99))/1e6)
		cmd := exec.Command(wrk, "-t1", "-c16", "-d"+secs, "--latency", "http://"+t.addr+"/hello")
		var out []byte
		err = procstat.OnCPUs(r.o.LoadCPUs, func() error {
			var e error
			out, e = cmd.Output()
			return e
		})
		if err != nil {
			return fmt.Errorf("wrk: %w", err)
		}
		m := wrkRPS.FindSubmatch(out)
		if m == nil {
			return fmt.Errorf("wrk output not understood: %q", out)
		}
		v, _ := strconv.ParseFloat(string(m[1]), 64)
		wc.Wrk = append(wc.Wrk, v)
		if m := wrkP99.FindSubmatch(out); m != nil {
			p, _ := strconv.ParseFloat(string(m[1]), 64)
			switch string(m[2]) {
			case "us":
				p /= 1000
			case "s":
				p *= 1000
			}
			wc.WrkP99 = append(wc.WrkP99, p)
		}
	}
	ours, theirs := report.MedianOf(wc.Ours), report.MedianOf(wc.Wrk)
	if theirs > 0 {
		wc.DiffPct = (ours - theirs) / theirs * 100
	}
	r.run.WrkCheck = wc
	r.logf("wrk cross-check on %s: ours %.0f req/s, wrk %.0f req/s (%+.1f %%)\n", wc.Target, ours, theirs, wc.DiffPct)
	return nil
}

func machine(o Options) report.Machine {
	m := report.Machine{Cores: runtime.NumCPU(), Go: runtime.Version()}
	m.Host, _ = os.Hostname()
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if online, err := procstat.Online(); err == nil {
		m.Cores = len(online)
	}
	var si unix.Sysinfo_t
	if unix.Sysinfo(&si) == nil {
		m.MemGiB = int(math.Round(float64(si.Totalram) * float64(si.Unit) / (1 << 30)))
	}
	var u unix.Utsname
	if unix.Uname(&u) == nil {
		m.Kernel = unix.ByteSliceToString(u.Release[:])
	}
	if o.Nginx != "" {
		if out, err := exec.Command(o.Nginx, "-v").CombinedOutput(); err == nil {
			m.Nginx = strings.TrimPrefix(strings.TrimSpace(string(out)), "nginx version: ")
		}
	}
	switch {
	case o.StandIn:
		m.Coregate = "stand-in: nginx in coregate's place (the gateway binary was not used)"
	case o.Coregate != "":
		m.Coregate = o.Coregate
		if out, err := exec.Command("git", "-C", filepath.Dir(o.Coregate), "describe", "--always", "--dirty").Output(); err == nil {
			m.Coregate += " (" + strings.TrimSpace(string(out)) + ")"
		}
	}
	return m
}
