package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"coregate/bench/propagate"
)

// adminCmd is "bench admin": the Admin API's changes as the traffic sees
// them (PUT to first proxied request, and a bulk load under steady
// traffic), on a gateway with embedded etcd.
func adminCmd(args []string) error {
	fs := flag.NewFlagSet("admin", flag.ExitOnError)
	var (
		coregate = fs.String("coregate", "bin/coregate", "coregate binary")
		workers  = fs.Int("workers", 1, "worker processes")
		cpus     = cpuFlag(fs, "cpus", "", "CPUs of the gateway; default: not pinned")
		base     = fs.Int("routes", 100, "routes present before the changes")
		changes  = fs.Int("changes", 100, "PUTs timed one at a time")
		ups      = fs.Int("upstreams", 0, "upstreams put first, the routes referring to them by upstream_id in turn; 0: each route has its own")
		plugs    = fs.Bool("plugins", false, "two plugins (proxy-rewrite, response-rewrite) on every route")
		bulk     = fs.Int("bulk", 5000, "routes of the bulk load; 0 to skip it")
		rate     = fs.Float64("rate", 2000, "steady traffic during the bulk load, req/s")
		conns    = fs.Int("c", 9, "connections of the steady traffic")
		parallel = fs.Int("parallel", 8, "concurrent PUTs of the bulk load")
		nginx    = fs.String("nginx", lookNginx(), "nginx binary for the reference without the gateway; '' to leave it out")
		keep     = fs.Bool("keep", false, "keep the working directory")
		trace    = fs.String("trace", "", "file for worker 0's execution trace of the bulk load (go tool trace)")
		access   = fs.Bool("access-log", false, "the gateway's access log with each request's times, access.log in the working directory (with -keep)")
		traceFor = fs.Duration("trace-for", 15*time.Second, "length of the -trace, from the start of the bulk load's traffic")
		memory   = fs.Bool("memory", true, "RSS (and Go heap) of the supervisor and the workers with no route and with the routes loaded")
		cold     = fs.Bool("cold-start", false, "at the end, the gateway stopped and started again on its etcd data, timed to the first request proxied (default at -routes 50000 and more)")
		reload   = fs.Bool("nginx-reload", false, "at the end, nginx with as many locations and upstreams started and reloaded with one more (default at -routes 50000 and more)")
		heap     = fs.String("heap", "", "file for worker 0's heap profile with the routes loaded (go tool pprof)")
		step     = fs.Duration("step-timeout", 120*time.Second, "bound of each step of -cold-start and -nginx-reload")
	)
	_ = fs.Parse(args)
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	if *base >= 50000 {
		// the size: its rows by default
		if !set["cold-start"] {
			*cold = true
		}
		if !set["nginx-reload"] {
			*reload = true
		}
	}
	var gwCPUs []int
	if *cpus != "" {
		var err error
		if gwCPUs, err = parseCPUs("cpus", *cpus); err != nil {
			return err
		}
	}
	bin, err := filepath.Abs(*coregate)
	if err != nil {
		return err
	}
	if _, err := os.Stat(bin); err != nil {
		return fmt.Errorf("bench admin: %w (make build)", err)
	}
	dir, err := os.MkdirTemp("", "coregate-admin-bench-")
	if err != nil {
		return err
	}
	if !*keep {
		defer os.RemoveAll(dir)
	}
	onSignal()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	o := propagate.Options{
		Coregate: bin, Self: self, Workers: *workers, CPUs: gwCPUs, BaseRoutes: *base, Changes: *changes,
		Upstreams: *ups, Plugins: *plugs,
		Bulk: *bulk, Rate: *rate, Conns: *conns, Parallel: *parallel, Nginx: *nginx, Dir: dir, Log: os.Stderr,
		Trace: *trace, TraceFor: *traceFor, AccessLog: *access,
		Memory: *memory, ColdStart: *cold, NginxReload: *reload, StepTimeout: *step, Heap: *heap,
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	res, err := propagate.Run(ctx, o)
	if err != nil {
		if *keep {
			fmt.Fprintf(os.Stderr, "bench admin: logs in %s\n", dir)
		}
		return err
	}
	propagate.Report(os.Stdout, res, o)
	if *keep {
		fmt.Fprintf(os.Stderr, "bench admin: kept %s\n", dir)
	}
	return nil
}
