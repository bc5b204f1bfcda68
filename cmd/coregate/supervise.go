package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"coregate/admin/adminapi"
	"coregate/admin/nodeconf"
	"coregate/admin/standalone"
	"coregate/admin/store/storesync"
	"coregate/bpf"
	"coregate/plugins"
	"coregate/worker/shm"
	"coregate/worker/supervisor"

	"github.com/prometheus/client_golang/prometheus"
)

// fileSource is the standalone apisix.yaml as a supervisor.Source: a
// read-only store followed by the same sync as etcd, so that a bad item is
// left out, and a file that does not parse refused, by one policy; the
// sync checks its plugins' configurations as the Admin API does, so that
// a configuration a worker would refuse to build is refused here.
func fileSource(path string, log *slog.Logger) *storesync.Syncer {
	return storesync.New(storesync.Options{
		Store:   standalone.NewStore(standalone.StoreOptions{Path: path, Log: log}),
		Plugins: plugins.Default,
		Log:     log,
	})
}

// runSupervisor is `coregate [-c config.yaml] [--workers N|auto] [--cpus LIST]`.
func runSupervisor(args []string) error {
	fs := flag.NewFlagSet("coregate", flag.ContinueOnError)
	cfgPath := fs.String("c", "conf/config.yaml", "path to config.yaml")
	workersFlag := fs.String("workers", "", "worker processes: auto or N (overrides nginx_config.worker_processes)")
	cpusFlag := fs.String("cpus", "", "CPUs to pin workers to, e.g. 0-3,6 (default: this process's affinity mask)")
	modeFlag := fs.String("selector", "hash", "how the eBPF selector spreads connections: hash, cpu or least_conn")
	shutdownTimeout := fs.Duration("shutdown-timeout", 10*time.Second,
		"graceful stop deadline (SIGTERM, SIGINT, retired workers): in-flight requests may take this long")
	stallRestart := fs.Duration("stall-restart", supervisor.DefaultStallRestart,
		"a worker silent this long (stopped, or its event loop stuck) is killed and restarted; after "+
			supervisor.DefaultStallAfter.String()+" of silence it is already out of the socket selector")
	startTimeout := fs.Duration("start-timeout", supervisor.DefaultStartTimeout,
		"a worker not ready this long after it was started (its first configuration built) is killed and restarted")
	counters := fs.Int("counters", 0, "size of the node's shared counter table, in counters (limit-count's policy local; 128 bytes each; 0: "+
		strconv.Itoa(shm.DefaultSlots)+")")
	etcdData := fs.String("etcd-data", "", "data directory of the embedded etcd (default: "+etcdDataDir+" beside config.yaml)")
	testOnly := fs.Bool("t", false, "check config.yaml (and a data plane's apisix.yaml), print its warnings and exit, as nginx -t: status 0 when the node would start with it")
	acceptReset := fs.Bool(acceptResetFlag[2:], false, "serve the configuration etcd holds even if it is older than "+storesync.CacheFile+
		" (a lower revision, or another cluster: etcd rebuilt or restored), and replace the copy with it; without it such a store is refused")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		// A stray word (a subcommand that does not exist, a flag after
		// it) would otherwise start a gateway with the defaults.
		return fmt.Errorf("unexpected argument %q: coregate takes flags only (coregate -h)", fs.Arg(0))
	}
	// The supervisor checks every configuration before a worker sees it:
	// its plugins' schemas are compiled now, so that one that does not
	// compile stops the start rather than a request. A worker compiles
	// only those of the plugins its routes configure, when it builds them.
	if err := plugins.Default.Compile(); err != nil {
		return err
	}
	if *testOnly {
		return testConfig(*cfgPath, os.Stderr)
	}
	log := newLogger().With("proc", "supervisor")
	if addr := os.Getenv("COREGATE_PPROF_SUPERVISOR"); addr != "" {
		servePprof(addr, 0, log)
	}
	nc, warnings, err := nodeconf.Load(*cfgPath)
	if err != nil {
		return err
	}
	setLogLevel(nc)
	for _, w := range warnings {
		log.Warn("config.yaml: " + w)
	}
	if nc.APISIX.EnableAdmin {
		if err := adminapi.CheckKeys(nc.Deployment.Admin); err != nil {
			return err
		}
	}
	var source supervisor.Source
	var collectors []prometheus.Collector
	switch prov := nc.Provider(); prov.Kind {
	case "yaml", "json":
		if prov.File == "" {
			return fmt.Errorf("config provider %q without etcd (the Admin API's own standalone store) is not available yet: set deployment.role: data_plane and deployment.role_data_plane.config_provider: yaml, or use etcd", prov.Kind)
		}
		source = fileSource(prov.File, log)
	case "etcd":
		node, err := openEtcd(nc, *etcdData, *acceptReset, log)
		if err != nil {
			return err
		}
		defer node.close()
		source = node.sync
		collectors = append(collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "apisix_etcd_reachable",
			Help: "Config server etcd reachable from the node, 0 is unreachable.",
		}, func() float64 {
			if node.sync.Reachable() {
				return 1
			}
			return 0
		}))
		for _, key := range append(slices.Clone(storesync.IndexedResources), "max_modify_index", "prev_index", "x_etcd_index") {
			collectors = append(collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "apisix_etcd_modify_indexes",
				Help:        "Etcd modify index for APISIX keys",
				ConstLabels: prometheus.Labels{"key": key},
			}, func() float64 { return float64(node.sync.ModifyIndexes()[key]) }))
		}
		if nc.APISIX.EnableAdmin {
			stopAdmin, err := serveAdmin(nc, node.admin, log)
			if err != nil {
				return err
			}
			defer stopAdmin()
		}
	default:
		return fmt.Errorf("config provider %q is not available", prov.Kind)
	}
	mode, err := bpf.ParseMode(*modeFlag)
	if err != nil {
		return err
	}
	var cpus []int
	if *cpusFlag != "" {
		if cpus, err = supervisor.ParseCPUList(*cpusFlag); err != nil {
			return err
		}
	}
	workerCount := func(nc *nodeconf.Config) (int, error) {
		switch *workersFlag {
		case "":
			return nc.NginxConfig.WorkerProcesses, nil // 0: auto
		case "auto":
			return 0, nil
		}
		n, err := strconv.Atoi(*workersFlag)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("--workers: want auto or a number ≥ 1, got %q", *workersFlag)
		}
		return n, nil
	}
	n, err := workerCount(nc)
	if err != nil {
		return err
	}
	if err := checkAccessLog(nc); err != nil {
		return err
	}
	sup, err := supervisor.New(supervisor.Options{
		WorkerArgs:   []string{"-c", *cfgPath},
		Workers:      n,
		CPUs:         cpus,
		Mode:         mode,
		DrainTimeout: *shutdownTimeout,
		StallRestart: *stallRestart,
		StartTimeout: *startTimeout,
		Source:       source,
		Collectors:   collectors,
		Settings:     settingsOf(nc),
		Counters:     *counters,
		Takeover:     supervisor.TakeoverKey(*cfgPath),
		Log:          log,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sup.SetMetricPrefix(nc.Prometheus.MetricPrefix)
	sup.SetExtraLabels(extraLabels(nc))
	if exp := nc.Prometheus; exp.EnableExportServer {
		if err := sup.ServeMetrics(ctx, exp.ExportAddr.Addr(), exp.ExportURI); err != nil {
			log.Error("metrics server not started", "addr", exp.ExportAddr.Addr(), "err", err)
		}
	}
	return sup.Run(ctx, func() (supervisor.Reload, error) {
		nc, warnings, err := nodeconf.Load(*cfgPath)
		if err != nil {
			return supervisor.Reload{}, err
		}
		setLogLevel(nc)
		for _, w := range warnings {
			log.Warn("config.yaml: " + w)
		}
		n, err := workerCount(nc)
		if err != nil {
			return supervisor.Reload{}, err
		}
		if err := checkAccessLog(nc); err != nil {
			return supervisor.Reload{}, err
		}
		sup.SetMetricPrefix(nc.Prometheus.MetricPrefix)
		sup.SetExtraLabels(extraLabels(nc))
		return supervisor.Reload{Workers: n, Settings: settingsOf(nc)}, nil
	})
}

// testConfig is `coregate -t`: what the start checks of config.yaml,
// and of the standalone file a data plane reads beside it, without
// starting anything. Its warnings (keys coregate does not implement, an
// Admin API that checks no key) are printed to w; an error is what would
// stop the start. The configuration held in etcd is not read.
func testConfig(path string, w io.Writer) error {
	nc, warnings, err := nodeconf.Load(path)
	if err != nil {
		return err
	}
	for _, warn := range warnings {
		fmt.Fprintf(w, "coregate: [warn] %s: %s\n", path, warn)
	}
	if nc.APISIX.EnableAdmin {
		if err := adminapi.CheckKeys(nc.Deployment.Admin); err != nil {
			return err
		}
	}
	if err := checkAccessLog(nc); err != nil {
		return err
	}
	switch prov := nc.Provider(); prov.Kind {
	case "yaml", "json":
		if prov.File != "" {
			if err := standalone.CheckFile(prov.File, plugins.Default); err != nil {
				return err
			}
			fmt.Fprintf(w, "coregate: the routes file %s is ok\n", prov.File)
		}
	case "etcd":
		fmt.Fprintf(w, "coregate: the configuration in etcd is not read by -t\n")
	}
	fmt.Fprintf(w, "coregate: the configuration file %s syntax is ok\ncoregate: configuration file %s test is successful\n", path, path)
	return nil
}

// settingsOf fingerprints what a worker reads from config.yaml, all but
// worker_processes (which the supervisor applies itself).
func settingsOf(nc *nodeconf.Config) string {
	c := *nc
	c.NginxConfig.WorkerProcesses = 0
	b, err := json.Marshal(&c)
	if err != nil {
		return ""
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// extraLabels are plugin_attr.prometheus.metrics.<metric>.extra_labels'
// names, by the family's name (apisix_<metric>).
func extraLabels(nc *nodeconf.Config) map[string][]string {
	m := map[string][]string{}
	for metric, ls := range nc.Prometheus.ExtraLabels {
		for _, l := range ls {
			m["apisix_"+metric] = append(m["apisix_"+metric], l.Name)
		}
	}
	return m
}
