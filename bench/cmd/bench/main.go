package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	_ "net/http/pprof" // served by "bench upstream -pprof"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"coregate/bench/certs"
	"coregate/bench/floor"
	"coregate/bench/harness"
	"coregate/bench/load"
	"coregate/bench/procstat"
	"coregate/bench/report"
	"coregate/bench/scenario"
	"coregate/bench/upstream"
)

func main() {
	args := os.Args[1:]
	cmd := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "run":
		err = runCmd(args)
	case "pair":
		err = pairCmd(args)
	case "upstream":
		err = upstreamCmd(args)
	case "floor":
		err = floorCmd(args)
	case "load":
		err = loadCmd(args)
	case "profile":
		err = profileCmd(args)
	case "report":
		err = reportCmd(args)
	case "config":
		err = configCmd(args)
	case "admin":
		err = adminCmd(args)
	default:
		err = fmt.Errorf("bench: unknown subcommand %q (run, pair, upstream, floor, load, profile, report, config, admin)", cmd)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

// onSignal stops every child process and exits when interrupted.
func onSignal() {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	go func() {
		s := <-ch
		fmt.Fprintf(os.Stderr, "\nbench: %v: stopping processes\n", s)
		harness.StopAll()
		os.Exit(130)
	}()
}

// harnessSetup returns what a harness.Runner starts from: this binary,
// which it runs again as the upstream (and the floor loop), and a new work
// directory named with prefix; from then on an interrupt stops every child
// process.
func harnessSetup(prefix string) (self, work string, err error) {
	if self, err = os.Executable(); err != nil {
		return "", "", err
	}
	if work, err = os.MkdirTemp("", prefix); err != nil {
		return "", "", err
	}
	onSignal()
	return self, work, nil
}

func cpuFlag(fs *flag.FlagSet, name, def, usage string) *string {
	return fs.String(name, def, usage+" (cpu list, e.g. 0 or 2-3)")
}

func parseCPUs(name, v string) ([]int, error) {
	c, err := procstat.ParseCPUList(v)
	if err != nil {
		return nil, fmt.Errorf("bench: -%s: %w", name, err)
	}
	return c, nil
}

// placement parses the -cpus, -load-cpus and -upstream-cpus flags; the
// upstream runs on the load generator's CPUs when its flag is empty.
func placement(gwCPUs, loadCPUs, upCPUs string) (gw, ld, up []int, err error) {
	if gw, err = parseCPUs("cpus", gwCPUs); err != nil {
		return nil, nil, nil, err
	}
	if ld, err = parseCPUs("load-cpus", loadCPUs); err != nil {
		return nil, nil, nil, err
	}
	up = ld
	if upCPUs != "" {
		if up, err = parseCPUs("upstream-cpus", upCPUs); err != nil {
			return nil, nil, nil, err
		}
	}
	return gw, ld, up, nil
}

func defaultPlacement() (gw, ld string, all []int) {
	all, err := procstat.Online()
	if err != nil || len(all) == 0 {
		all = []int{0}
	}
	gw = strconv.Itoa(all[0])
	ld = strconv.Itoa(all[len(all)-1])
	return gw, ld, all
}

func lookNginx() string {
	if p, err := exec.LookPath("nginx"); err == nil {
		return p
	}
	if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
		return "/usr/sbin/nginx"
	}
	return ""
}

func lookPerf() string {
	if p, err := exec.LookPath("perf"); err == nil {
		return p
	}
	return ""
}

func lookRedis() string {
	if p, err := exec.LookPath("redis-server"); err == nil {
		return p
	}
	return ""
}

func runCmd(args []string) error {
	fs := flag.NewFlagSet("run", flag.ExitOnError)
	gwDef, ldDef, all := defaultPlacement()
	var (
		duration  = fs.Duration("d", 5*time.Second, "measured time per round")
		warmup    = fs.Duration("warmup", time.Second, "warm-up before each round")
		rounds    = fs.Int("rounds", 3, "interleaved rounds (medians are reported)")
		scens     = fs.String("scenarios", "default", "comma-separated scenario names, 'default' (the ready ones) or 'all'; see -list")
		list      = fs.Bool("list", false, "list scenarios and exit")
		coregate  = fs.String("coregate", "bin/coregate", "coregate binary; '' to leave coregate out")
		nginx     = fs.String("nginx", lookNginx(), "nginx binary for the reference; '' to leave it out")
		redis     = fs.String("redis", lookRedis(), "redis-server for the scenarios that count in Redis; '' to leave them out")
		perf      = fs.String("perf", lookPerf(), "perf, to count system calls per request in the fixed-rate scenario; '' to skip")
		standIn   = fs.Bool("stand-in", false, "run nginx in coregate's place (checks the harness before the gateway exists)")
		direct    = fs.Bool("direct", true, "also measure the load generator against the upstream alone")
		floor     = fs.Bool("floor", true, "also measure the I/O floor (bench floor) beside the one-worker no-plugin and fixed-rate rows")
		body      = fs.Int("body", 1024, "upstream body bytes: 1024 (the seeds) or 10 (APISIX run.sh)")
		rate      = fs.Float64("rate", 10000, "fixed rate of the latency scenario, req/s")
		gwCPUs    = cpuFlag(fs, "cpus", gwDef, "CPUs of the gateway under test")
		loadCPUs  = cpuFlag(fs, "load-cpus", ldDef, "CPUs of the load generator")
		upCPUs    = cpuFlag(fs, "upstream-cpus", "", "CPUs of the upstream; default: the load generator's")
		scaleCPUs = cpuFlag(fs, "scale-cpus", procstat.FormatCPUList(all), "CPUs for the worker scaling curve; worker count w runs on the first w")
		maxW      = fs.Int("max-workers", 0, "largest worker count of the scaling curve; default: the number of -scale-cpus")
		redo      = fs.Int("redo", 1, "times a noisy round is redone")
		out       = fs.String("out", "bench/results", "results directory")
		wrkCheck  = fs.Bool("wrk-check", false, "cross-check the load generator against wrk -t1 -c16 once")
		pprof     = fs.String("pprof", "", "set COREGATE_PPROF for coregate to this loopback address")
	)
	_ = fs.Parse(args)
	gw, ld, up, err := placement(*gwCPUs, *loadCPUs, *upCPUs)
	if err != nil {
		return err
	}
	sc, err := parseCPUs("scale-cpus", *scaleCPUs)
	if err != nil {
		return err
	}
	if *maxW == 0 {
		*maxW = len(sc)
	}
	seeds := scenario.Seeds(*maxW, *rate)
	if *list {
		for _, s := range seeds {
			state := "ready"
			if !s.Ready {
				state = "pending"
			}
			fmt.Printf("%-26s %-8s %-7s routes %4d consumers %3d workers %v  %s\n", s.Name, s.Group, state, s.Routes, s.Consumers, s.Workers, s.Title)
		}
		return nil
	}
	chosen, err := scenario.Select(seeds, *scens)
	if err != nil {
		return err
	}
	if *redis == "" {
		kept := chosen[:0]
		for _, s := range chosen {
			if s.Redis {
				fmt.Fprintf(os.Stderr, "bench: redis-server not installed (make bench-deps): %s left out\n", s.Name)
				continue
			}
			kept = append(kept, s)
		}
		chosen = kept
	}
	var pending []scenario.Scenario
	for _, s := range seeds {
		if !s.Ready && !containsName(chosen, s.Name) {
			pending = append(pending, s)
		}
	}
	if *coregate != "" && !*standIn {
		if _, err := os.Stat(*coregate); err != nil {
			fmt.Fprintf(os.Stderr, "bench: coregate binary %s not found: measuring without it\n", *coregate)
			*coregate = ""
		} else if *coregate, err = filepath.Abs(*coregate); err != nil {
			return err
		}
	}
	if *nginx == "" {
		fmt.Fprintln(os.Stderr, "bench: nginx not installed (make bench-deps): no reference column")
	}
	self, work, err := harnessSetup("coregate-bench-")
	if err != nil {
		return err
	}
	r := harness.New(harness.Options{
		Self: self, Coregate: *coregate, StandIn: *standIn, Nginx: *nginx, Redis: *redis, Perf: *perf, Direct: *direct, Floor: *floor,
		Scenarios: chosen, Pending: pending,
		Rounds: max(1, *rounds), Duration: *duration, Warmup: *warmup, Body: *body, Rate: *rate,
		GatewayCPUs: gw, LoadCPUs: ld, UpstreamCPUs: up, ScaleCPUs: sc, Redo: *redo,
		WorkDir: work, Progress: os.Stderr, Live: isTerminal(os.Stderr), WrkCheck: *wrkCheck, Pprof: *pprof,
	})
	res, err := r.Run()
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: logs kept in %s\n", work)
		if res != nil && len(res.Rows) > 0 {
			_, _ = write(res, *out)
		}
		return err
	}
	_ = os.RemoveAll(work)
	dir, err := write(res, *out)
	if err != nil {
		return err
	}
	fmt.Print(res.Markdown())
	fmt.Fprintf(os.Stderr, "\nresults: %s (results.md, results.json, *.svg)\n", dir)
	return nil
}

// pairCmd is "bench pair": coregate's worker against nginx's (or another
// coregate build's), both listening on the gateway's CPU and loaded in
// turn, ABBA; see harness.Runner.Pair.
func pairCmd(args []string) error {
	fs := flag.NewFlagSet("pair", flag.ExitOnError)
	gwDef, ldDef, _ := defaultPlacement()
	var (
		name     = fs.String("scenario", "no-plugin", "a one-worker scenario (see bench run -list); latency runs at -rate")
		pairs    = fs.Int("pairs", 16, "pairs of rounds")
		duration = fs.Duration("d", 3*time.Second, "measured time per round")
		warmup   = fs.Duration("warmup", time.Second, "one round of each before the pairs")
		rate     = fs.Float64("rate", 10000, "fixed rate of the latency scenario, req/s")
		coregate = fs.String("coregate", "bin/coregate", "coregate binary (A), or \"floor\": the I/O floor (no-plugin and latency)")
		against  = fs.String("against", "", "another coregate binary as B, or \"floor\"; default: nginx")
		nginx    = fs.String("nginx", lookNginx(), "nginx binary, B when -against is not given")
		redis    = fs.String("redis", lookRedis(), "redis-server, for the scenarios that count in Redis")
		body     = fs.Int("body", 1024, "upstream body bytes")
		gwCPUs   = cpuFlag(fs, "cpus", gwDef, "CPUs of both gateways")
		loadCPUs = cpuFlag(fs, "load-cpus", ldDef, "CPUs of the load generator")
		upCPUs   = cpuFlag(fs, "upstream-cpus", "", "CPUs of the upstream; default: the load generator's")
	)
	_ = fs.Parse(args)
	gw, ld, up, err := placement(*gwCPUs, *loadCPUs, *upCPUs)
	if err != nil {
		return err
	}
	chosen, err := scenario.Select(scenario.Seeds(1, *rate), *name)
	if err != nil {
		return err
	}
	if len(chosen) != 1 {
		return fmt.Errorf("bench: pair: -scenario names one scenario, not %d", len(chosen))
	}
	bins := []*string{coregate}
	if *against != "" {
		bins = append(bins, against)
	}
	for _, b := range bins {
		if *b == harness.PairFloor {
			continue
		}
		if *b, err = filepath.Abs(*b); err != nil {
			return err
		}
		if _, err := os.Stat(*b); err != nil {
			return fmt.Errorf("bench: pair: %w", err)
		}
	}
	self, work, err := harnessSetup("coregate-pair-")
	if err != nil {
		return err
	}
	r := harness.New(harness.Options{
		Self: self, Coregate: *coregate, Nginx: *nginx, Redis: *redis,
		Duration: *duration, Warmup: *warmup, Body: *body,
		GatewayCPUs: gw, LoadCPUs: ld, UpstreamCPUs: up,
		WorkDir: work, Progress: os.Stderr,
	})
	rep, err := r.Pair(chosen[0], *pairs, *against)
	if errors.Is(err, harness.ErrNoTLS) {
		// Not a failure of the bench: the gateway has no TLS to pair yet.
		fmt.Fprintf(os.Stderr, "bench: pair: %s skipped: %v\n", chosen[0].Name, err)
		_ = os.RemoveAll(work)
		return nil
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bench: logs kept in %s\n", work)
		return err
	}
	_ = os.RemoveAll(work)
	load := "closed loop"
	if rep.Rate > 0 {
		load = fmt.Sprintf("%.0f req/s", rep.Rate)
	}
	pa, pb := rep.P99()
	fmt.Printf("%s, %s, %d pairs of %v: CPU per request A/B median %.3f, A lower in %d; p99 median A %.3f ms, B %.3f ms\n",
		rep.Scenario, load, len(rep.Pairs), *duration, rep.Median(), rep.Lower(), pa, pb)
	fmt.Printf("A: %s\nB: %s\n", rep.A, rep.B)
	return nil
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func containsName(ss []scenario.Scenario, name string) bool {
	for _, s := range ss {
		if s.Name == name {
			return true
		}
	}
	return false
}

// write puts results.md, results.json and the charts into a new directory
// under out, named by the start time, and points out/latest at it.
func write(res *report.Run, out string) (string, error) {
	dir := filepath.Join(out, res.Started.Format("20060102-150405"))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	if err := renderInto(res, dir); err != nil {
		return "", err
	}
	latest := filepath.Join(out, "latest")
	_ = os.Remove(latest)
	_ = os.Symlink(filepath.Base(dir), latest)
	return dir, nil
}

func renderInto(res *report.Run, dir string) error {
	if err := os.WriteFile(filepath.Join(dir, "results.md"), []byte(res.Markdown()), 0o644); err != nil {
		return err
	}
	f, err := os.Create(filepath.Join(dir, "results.json"))
	if err != nil {
		return err
	}
	if err := res.WriteJSON(f); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	charts := res.Charts()
	names := make([]string, 0, len(charts))
	for n := range charts {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		f, err := os.Create(filepath.Join(dir, n))
		if err != nil {
			return err
		}
		err = charts[n].WriteSVG(f)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// configCmd writes a scenario's gateway files, for runs on separate hosts.
func configCmd(args []string) error {
	fs := flag.NewFlagSet("config", flag.ExitOnError)
	name := fs.String("scenario", "no-plugin", "scenario name (see bench run -list)")
	up := fs.String("upstream", "127.0.0.1:1980", "upstream host:port the gateways proxy to")
	up2 := fs.String("upstream2", "127.0.0.1:1981", "second upstream host:port, in a balancer scenario")
	port := fs.Int("port", 9080, "port the gateways listen on")
	workers := fs.Int("workers", 1, "worker processes")
	tlsPort := fs.Int("tls-port", 9443, "port of the gateways' TLS listeners, in a TLS scenario")
	out := fs.String("out", ".", "directory for config.yaml, apisix.yaml and nginx.conf (and a TLS scenario's certificates)")
	_ = fs.Parse(args)
	ss, err := scenario.Select(scenario.Seeds(*workers, 10000), *name)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(*out)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if ss[0].Balancer != "" {
		ss[0].Upstream2 = *up2
	}
	if t := ss[0].TLS; t != nil {
		set, err := certs.Write(dir)
		if err != nil {
			return err
		}
		ss[0] = ss[0].WithTLSPort(*tlsPort)
		pair := set.Server[t.Key]
		ss[0].TLS.Files = scenario.Files{CertFile: pair.CertFile, KeyFile: pair.KeyFile, CAFile: set.CAFile,
			CertPEM: pair.CertPEM, KeyPEM: pair.KeyPEM, CAPEM: set.CAPEM, TicketKeyFile: set.TicketKeyFile}
	}
	if ss[0], err = ss[0].WithJWTKey(); err != nil {
		return err
	}
	files := map[string][]byte{
		"config.yaml": scenario.CoregateConfig(ss[0], *port, *workers),
		"apisix.yaml": scenario.CoregateRoutes(ss[0], *up),
		"nginx.conf":  scenario.NginxConfig(ss[0], dir, *port, *workers, *up),
	}
	for n, b := range files {
		if err := os.WriteFile(filepath.Join(dir, n), b, 0o644); err != nil {
			return err
		}
	}
	fmt.Printf("wrote %s/{config.yaml,apisix.yaml,nginx.conf}: bin/coregate -c %s/config.yaml; nginx -p %s/ -c %s/nginx.conf\n", dir, dir, dir, dir)
	if h := ss[0].Load.Header; h != "" {
		fmt.Printf("the scenario's requests send: %s", h)
	}
	return nil
}

func reportCmd(args []string) error {
	fs := flag.NewFlagSet("report", flag.ExitOnError)
	in := fs.String("in", "bench/results/latest/results.json", "results.json to render")
	out := fs.String("out", "", "directory for results.md and the charts; default: beside the input")
	_ = fs.Parse(args)
	f, err := os.Open(*in)
	if err != nil {
		return err
	}
	defer f.Close()
	res, err := report.ReadJSON(f)
	if err != nil {
		return err
	}
	if *out == "" {
		*out = filepath.Dir(*in)
	}
	if err := renderInto(res, *out); err != nil {
		return err
	}
	fmt.Print(res.Markdown())
	return nil
}

func upstreamCmd(args []string) error {
	fs := flag.NewFlagSet("upstream", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	body := fs.Int("body", 1024, "body bytes: 1024 or 10")
	pprof := fs.String("pprof", "", "serve net/http/pprof on this loopback address")
	loops := fs.Int("loops", 1, "event loops")
	_ = fs.Parse(args)
	b := upstream.Body1K
	switch *body {
	case 1024:
	case 10:
		b = upstream.Body10
	default:
		return fmt.Errorf("bench: -body %d: want 1024 or 10", *body)
	}
	if *pprof != "" {
		go func() { _ = http.ListenAndServe(*pprof, nil) }()
	}
	s, err := upstream.Start(*listen, b, *loops)
	if err != nil {
		return err
	}
	return serveUntilSignal(s.Addr, s.Stop)
}

// serveUntilSignal reports addr on stdout, as the harness reads it
// (harness.UpstreamAddr), and calls stop on SIGINT or SIGTERM.
func serveUntilSignal(addr string, stop func() error) error {
	fmt.Printf("listening %s\n", addr)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	<-ch
	return stop()
}

func floorCmd(args []string) error {
	fs := flag.NewFlagSet("floor", flag.ExitOnError)
	listen := fs.String("listen", "127.0.0.1:0", "address to listen on")
	up := fs.String("upstream", "", "upstream host:port (required)")
	ring := fs.Bool("ring", false, "the loop on io_uring instead of epoll")
	_ = fs.Parse(args)
	if *up == "" {
		return errors.New("bench: floor: -upstream wanted")
	}
	addr, stop, err := floor.Run(*listen, *up, *ring)
	if err != nil {
		return err
	}
	return serveUntilSignal(addr, stop)
}

func loadCmd(args []string) error {
	fs := flag.NewFlagSet("load", flag.ExitOnError)
	var (
		conns = fs.Int("c", 16, "connections")
		dur   = fs.Duration("d", 5*time.Second, "duration")
		rate  = fs.Float64("R", 0, "fixed total rate, req/s (0: closed loop)")
		hdr   = fs.String("H", "", "extra header, 'Name: value'")
		maxN  = fs.Uint64("n", 0, "stop after this many responses (0: no limit)")
		quiet = fs.Bool("q", false, "no progress line")
	)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: bench load [flags] http://HOST:PORT/PATH")
		fs.PrintDefaults()
	}
	_ = fs.Parse(args)
	if fs.NArg() != 1 {
		fs.Usage()
		return errors.New("bench: load: one URL wanted")
	}
	u, err := url.Parse(fs.Arg(0))
	if err != nil || u.Scheme != "http" {
		return fmt.Errorf("bench: load: %q: want an http:// URL", fs.Arg(0))
	}
	path := u.RequestURI()
	header := ""
	if *hdr != "" {
		header = *hdr + "\r\n"
	}
	cfg := load.Config{Addr: u.Host, Host: u.Host, Path: path, Conns: *conns, Duration: *dur, Rate: *rate, Header: header, MaxRequests: *maxN}
	if !*quiet {
		cfg.Progress = func(p load.Progress) {
			fmt.Fprintf(os.Stderr, "\r%4.1f s %8.0f req/s errors %d   ", p.Elapsed.Seconds(), float64(p.Requests)/p.Elapsed.Seconds(), p.Errors)
		}
	}
	self0 := procstat.Measure([]int{os.Getpid()})
	res, err := load.Run(cfg)
	if err != nil {
		return err
	}
	self1 := procstat.Measure([]int{os.Getpid()})
	if !*quiet {
		fmt.Fprint(os.Stderr, "\r"+strings.Repeat(" ", 50)+"\r")
	}
	printResult(os.Stdout, res, self1.Ticks-self0.Ticks)
	return nil
}

func printResult(w io.Writer, res load.Result, ticks uint64) {
	ms := func(q float64) float64 { return float64(res.Latency.MustQuantile(q)) / 1e6 }
	fmt.Fprintf(w, "requests %d in %.2f s: %.0f req/s; errors %d, non-2xx %d, reconnects %d\n",
		res.Requests, res.Elapsed.Seconds(), res.RPS(), res.Errors, res.Non2xx, res.Reconnects)
	fmt.Fprintf(w, "latency ms: p50 %.3f  p95 %.3f  p99 %.3f  p99.9 %.3f  max %.3f\n",
		ms(0.5), ms(0.95), ms(0.99), ms(0.999), float64(res.Latency.Max())/1e6)
	if res.Requests > 0 {
		fmt.Fprintf(w, "load generator CPU: %.2f µs/request\n", float64(ticks)/procstat.Hz*1e6/float64(res.Requests))
	}
}

// profileCmd starts the upstream and a gateway for a no-plugin scenario,
// loads it, and saves a CPU profile fetched from the gateway's pprof
// listener while the load runs.
func profileCmd(args []string) error {
	fs := flag.NewFlagSet("profile", flag.ExitOnError)
	gwDef, ldDef, _ := defaultPlacement()
	var (
		target   = fs.String("target", "coregate", "what to profile: coregate, or upstream (checks the tooling)")
		coregate = fs.String("coregate", "bin/coregate", "coregate binary")
		routes   = fs.Int("routes", 1, "routes in the table (the measured one is /hello, last)")
		scen     = fs.String("scenario", "", "profile this scenario of 'run -list' (its routes, plugins, consumers and load) instead of -routes without plugins")
		redis    = fs.String("redis", lookRedis(), "redis-server, for a scenario that counts in Redis")
		workers  = fs.Int("workers", 1, "worker processes")
		secs     = fs.Int("seconds", 10, "profile duration")
		out      = fs.String("out", "bench/results/cpu.pprof", "profile file to write")
		gwCPUs   = cpuFlag(fs, "cpus", gwDef, "CPUs of the gateway")
		loadCPUs = cpuFlag(fs, "load-cpus", ldDef, "CPUs of the load generator and upstream")
	)
	_ = fs.Parse(args)
	gw, err := parseCPUs("cpus", *gwCPUs)
	if err != nil {
		return err
	}
	ld, err := parseCPUs("load-cpus", *loadCPUs)
	if err != nil {
		return err
	}
	onSignal()
	defer harness.StopAll()
	if err := procstat.PinSelf(ld); err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "coregate-profile-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	pport, err := harness.FreePort()
	if err != nil {
		return err
	}
	pprofAddr := fmt.Sprintf("127.0.0.1:%d", pport)
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var addr string
	var s scenario.Scenario
	switch *target {
	case "upstream":
		p, _, err := harness.Start("upstream", gw, []string{"GOMAXPROCS=1"}, filepath.Join(work, "upstream.log"), false,
			self, "upstream", "-listen", "127.0.0.1:0", "-pprof", pprofAddr)
		if err != nil {
			return err
		}
		_ = p
		// The address is printed on stdout, which went to the log.
		deadline := time.Now().Add(10 * time.Second)
		for addr == "" && time.Now().Before(deadline) {
			b, _ := os.ReadFile(filepath.Join(work, "upstream.log"))
			if a, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "listening "); ok {
				addr = a
			}
			time.Sleep(20 * time.Millisecond)
		}
		if addr == "" {
			return errors.New("bench: profile: upstream did not start")
		}
	case "coregate":
		up, upAddr, err := harness.StartUpstream(self, ld, 1024, work)
		if err != nil {
			return err
		}
		_ = up
		port, err := harness.FreePort()
		if err != nil {
			return err
		}
		s = scenario.Scenario{Name: "profile", Routes: *routes, Upstream: true}
		if *scen != "" {
			sc, err := scenario.Select(scenario.Seeds(1, 10000), *scen)
			if err != nil {
				return err
			}
			s = sc[0]
		}
		if s.Redis {
			if *redis == "" {
				return errors.New("bench: profile: the scenario counts in Redis: no redis-server (make bench-deps)")
			}
			if s.RedisPort, err = harness.StartRedis(*redis, ld, work); err != nil {
				return err
			}
		}
		if s.Balancer != "" {
			dir := filepath.Join(work, "upstream2")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if _, s.Upstream2, err = harness.StartUpstream(self, ld, 1024, dir); err != nil {
				return err
			}
		}
		if s, err = s.WithJWTKey(); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(work, "config.yaml"), scenario.CoregateConfig(s, port, *workers), 0o644); err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(work, "apisix.yaml"), scenario.CoregateRoutes(s, upAddr), 0o644); err != nil {
			return err
		}
		p, _, err := harness.Start("coregate", gw, []string{"COREGATE_PPROF=" + pprofAddr}, filepath.Join(work, "coregate.log"), false,
			*coregate, "-c", filepath.Join(work, "config.yaml"))
		if err != nil {
			return err
		}
		addr = fmt.Sprintf("127.0.0.1:%d", port)
		if err := harness.WaitReady(p, addr, "/hello", s.Load.Header, 15*time.Second); err != nil {
			return err
		}
	default:
		return fmt.Errorf("bench: profile: -target %q: want coregate or upstream", *target)
	}
	done := make(chan load.Result, 1)
	go func() {
		res, _ := load.Run(load.Config{Addr: addr, Conns: 16, Header: s.Load.Header, Duration: time.Duration(*secs+2) * time.Second})
		done <- res
	}()
	time.Sleep(time.Second)
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(*secs+15)*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", pprofAddr, *secs), nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("bench: profile: %s pprof listener: %w", *target, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		return fmt.Errorf("bench: profile: pprof answered %s", resp.Status)
	}
	if err := os.MkdirAll(filepath.Dir(*out), 0o755); err != nil {
		return err
	}
	f, err := os.Create(*out)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	res := <-done
	fmt.Fprintf(os.Stderr, "profiled %s for %d s under %.0f req/s (%d errors): %s\n", *target, *secs, res.RPS(), res.Errors, *out)
	return nil
}
