package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"strconv"
	"time"

	"coregate/admin/store/storesync"
	"coregate/node/supervisor"
	"coregate/node/workerproc"
	"coregate/worker/shm"
)

// runSupervisor is `coregate [-c config.yaml] [--workers N|auto] [--cpus LIST]`.
func runSupervisor(args []string) error {
	var c supervisor.Command
	fs := flag.NewFlagSet("coregate", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprintln(fs.Output(), "usage: coregate [flags]: run the node, or with -t, -T, -s, -v or -V the command they name\n"+
			"       coregate init [path]: write a config.yaml with every key and its default")
		fs.PrintDefaults()
	}
	fs.StringVar(&c.Config, "c", "conf/config.yaml", "path to config.yaml")
	fs.StringVar(&c.Workers, "workers", "", "worker processes: auto or N (overrides nginx_config.worker_processes)")
	fs.StringVar(&c.CPUs, "cpus", "", "CPUs to pin workers to, e.g. 0-3,6 (default: this process's affinity mask)")
	fs.StringVar(&c.Selector, "selector", "hash", "how the eBPF selector spreads connections: hash, cpu or least_conn")
	fs.DurationVar(&c.ShutdownTimeout, "shutdown-timeout", 10*time.Second,
		"graceful stop deadline (SIGTERM, SIGINT, retired workers): in-flight requests may take this long")
	fs.DurationVar(&c.StallRestart, "stall-restart", supervisor.DefaultStallRestart,
		"a worker silent this long (stopped, or its event loop stuck) is killed and restarted; after "+
			supervisor.DefaultStallAfter.String()+" of silence it is already out of the socket selector")
	fs.DurationVar(&c.StartTimeout, "start-timeout", supervisor.DefaultStartTimeout,
		"a worker not ready this long after it was started (its first configuration built) is killed and restarted")
	fs.IntVar(&c.Counters, "counters", 0, "size of the node's shared counter table, in counters (limit-count's policy local; 128 bytes each; 0: "+
		strconv.Itoa(shm.DefaultSlots)+")")
	fs.IntVar(&c.HealthSlots, "health-slots", 0, "size of the node's upstream health region, in nodes of checked upstreams (64 bytes each; 0: "+
		strconv.Itoa(shm.DefaultHealthSlots)+")")
	fs.StringVar(&c.EtcdData, "etcd-data", "", "data directory of the embedded etcd (default: "+supervisor.EtcdDataDir+" beside config.yaml)")
	fs.BoolVar(&c.Dump, "T", false, "as -t, then print the configuration in effect (config.yaml with the defaults of what it leaves out, secrets hidden) to standard output, as nginx -T")
	fs.BoolVar(&c.Test, "t", false, "check config.yaml, then a data plane's apisix.yaml or every object in etcd, print the warnings and problems and exit, as nginx -t: status 0 when the node would start with it")
	fs.BoolVar(&c.AcceptReset, supervisor.AcceptResetFlag[2:], false, "serve the configuration etcd holds even if it is older than "+storesync.CacheFile+
		" (a lower revision, or another cluster: etcd rebuilt or restored), and replace the copy with it; without it such a store is refused")
	sig := fs.String("s", "", "send a signal to the running node (its pid file, apisix.pid_file): reload (SIGHUP: re-read config.yaml), "+
		"stop (SIGQUIT: stop now), quit (SIGTERM: drain, then stop) or reopen (SIGUSR1: reopen the access logs)")
	short := fs.Bool("v", false, "print the version and exit")
	long := fs.Bool("V", false, "print the version, the Go release, the commit and build flags, and whether the eBPF socket selector loads here, and exit")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *long:
		printVersionLong(os.Stdout)
		return nil
	case *short:
		printVersion(os.Stdout)
		return nil
	}
	if fs.NArg() > 0 {
		// A stray word (a subcommand that does not exist, a flag after
		// it) would otherwise start a gateway with the defaults.
		return fmt.Errorf("unexpected argument %q: coregate takes flags only (coregate -h)", fs.Arg(0))
	}
	if *sig != "" {
		if c.Test || c.Dump {
			return fmt.Errorf("-s and -t: give one of them")
		}
		return sendSignal(c.Config, *sig, os.Stderr)
	}
	return supervisor.Main(c)
}

// runWorker is `coregate worker --id N ...`, as the supervisor starts a
// worker process (package workerproc).
func runWorker(args []string) error {
	var o workerproc.Options
	fs := flag.NewFlagSet("worker", flag.ContinueOnError)
	fs.IntVar(&o.ID, "id", 0, "worker slot")
	fs.IntVar(&o.CPU, "cpu", -1, "CPU the worker is pinned to")
	fs.StringVar(&o.Selector, "selector", "plain", "what steers connections: ebpf, cbpf, kernel-hash, plain")
	fs.IntVar(&o.BPFFDs, "bpf-fds", 0, "number of inherited selector fds after the control socket")
	fs.StringVar(&o.Mode, "mode", "hash", "selector mode")
	fs.StringVar(&o.Config, "c", "conf/config.yaml", "path to config.yaml")
	fs.IntVar(&o.CountersFD, "counters-fd", 0, "inherited fd of the node's shared counter table (0: none, counters are this worker's own)")
	fs.IntVar(&o.MetricsFD, "metrics-fd", 0, "inherited fd of the node's metrics segment (0: none, metrics and counters are this worker's own)")
	fs.IntVar(&o.TicketsFD, "tickets-fd", 0, "inherited fd of the node's TLS session ticket keys (0: none, this worker's keys are its own)")
	fs.IntVar(&o.HealthFD, "health-fd", 0, "inherited fd of the node's upstream health region (0: none, every node is healthy)")
	fs.StringVar(&o.Objects, "objects", "", "the name of the node's shared objects this worker uses (with --takeover)")
	fs.StringVar(&o.Takeover, "takeover", "", "the node's key: a worker whose supervisor is gone serves on and waits for the next one on a socket named by it")
	if err := fs.Parse(args); err != nil {
		return err
	}
	o.Control = os.NewFile(workerproc.ControlFD, "control")
	return workerproc.Run(context.Background(), o)
}
