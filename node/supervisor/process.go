package supervisor

import (
	"context"
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
	"coregate/admin/spec"
	"coregate/admin/standalone"
	"coregate/admin/store/storesync"
	"coregate/bpf"
	"coregate/node"
	"coregate/plugins"

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

// Command is the supervisor process's command line (`coregate [flags]`,
// which cmd/coregate parses): the flags' values as given, checked by Main.
type Command struct {
	// Config is config.yaml's path (-c).
	Config string
	// Workers is --workers: "auto", a number ≥ 1, or "" for
	// nginx_config.worker_processes.
	Workers string
	// CPUs is --cpus, a CPU list (ParseCPUList); "": the process's
	// affinity mask.
	CPUs string
	// Selector is --selector, the eBPF selector's mode (bpf.ParseMode).
	Selector string
	// ShutdownTimeout, StallRestart and StartTimeout are Options'
	// DrainTimeout, StallRestart and StartTimeout.
	ShutdownTimeout time.Duration
	StallRestart    time.Duration
	StartTimeout    time.Duration
	// Counters is Options.Counters.
	Counters int
	// HealthSlots is Options.HealthSlots.
	HealthSlots int
	// EtcdData is the embedded etcd's data directory (--etcd-data); "":
	// EtcdDataDir beside config.yaml.
	EtcdData string
	// AcceptReset serves an etcd found older than the node's local copy
	// (AcceptResetFlag).
	AcceptReset bool
	// Test only checks the configuration (-t, Check).
	Test bool
	// Dump is Test, then the configuration in effect printed to standard
	// output (-T, nodeconf.Render), as nginx -T.
	Dump bool
}

// Main is the supervisor process: it reads config.yaml, opens the
// configuration's source (the standalone file a data plane reads beside
// config.yaml, or etcd: openEtcd) and the Admin API over it, serves the
// node's metrics, and runs the workers (Supervisor.Run) until SIGTERM or
// SIGINT; SIGHUP re-reads config.yaml. With c.Test it only checks the
// configuration (Check), on stderr.
func Main(c Command) error {
	// The supervisor checks every configuration before a worker sees it:
	// its plugins' schemas are compiled now, so that one that does not
	// compile stops the start rather than a request. A worker compiles
	// only those of the plugins its routes configure, when it builds them.
	if err := plugins.Default.Compile(); err != nil {
		return err
	}
	if c.Test || c.Dump {
		if err := Check(c.Config, c.EtcdData, os.Stderr); err != nil {
			return fmt.Errorf("%w\ncoregate: configuration file %s test failed", err, c.Config)
		}
		if c.Dump {
			nc, _, err := nodeconf.Load(c.Config)
			if err != nil {
				return err
			}
			fmt.Fprintf(os.Stdout, "# configuration file %s:\n", c.Config)
			_, err = os.Stdout.Write(nodeconf.Render(nc))
			return err
		}
		return nil
	}
	boot := time.Now()
	log := node.NewLogger().With("proc", "supervisor")
	// Below the workers from here on (Nice): the threads the embedded
	// etcd and the Admin API start inherit it.
	if err := LowerPriority(); err != nil {
		log.Warn("supervisor: runs at the workers' priority", "err", err)
	}
	if addr := os.Getenv("COREGATE_PPROF_SUPERVISOR"); addr != "" {
		node.ServePprof(addr, 0, log)
	}
	nc, warnings, err := nodeconf.Load(c.Config)
	if err != nil {
		return err
	}
	node.SetLogLevel(nc)
	// nginx_config.error_log: this process's log, and its workers', from
	// here on (they inherit it), reopened on SIGUSR1.
	var reopenLog func() error
	if path := nc.NginxConfig.ErrorLogPath(nc.Dir); path != "" {
		reopenLog = func() error { return node.OpenErrorLog(path) }
		if err := reopenLog(); err != nil {
			return err
		}
	}
	for _, w := range warnings {
		log.Warn(w)
	}
	// The pid file first: a second coregate on this configuration stops
	// here, before it opens the embedded etcd or a port.
	pidFile, stale, err := node.CreatePIDFile(nc.APISIX.PIDFilePath(nc.Dir))
	if err != nil {
		return err
	}
	defer pidFile.Remove()
	if stale {
		log.Warn("a stale pid file replaced: the coregate that wrote it is gone", "pid_file", pidFile.Path())
	}
	// The plugins' encrypt_fields stored encrypted are checked in clear
	// (the workers do the same for their builds).
	plugins.Default.SetKeyring(nc.APISIX.DataEncryption.FieldsKeyring(nc.Provider()))
	// $secret:// references are read with the secret objects the store
	// sync (and the Admin API) hand the registry, their credentials
	// decrypted as the Admin API encrypted them.
	plugins.Default.SetSecrets(node.SecretResolver(nc))
	if nc.APISIX.EnableAdmin {
		if err := adminapi.CheckKeys(nc.Deployment.Admin); err != nil {
			return err
		}
	}
	var source Source
	var collectors []prometheus.Collector
	var etcdVersion func(context.Context) (string, error)
	switch prov := nc.Provider(); prov.Kind {
	case "yaml", "json":
		if prov.File == "" {
			return fmt.Errorf("config provider %q without etcd (the Admin API's own standalone store) is not available yet: set deployment.role: data_plane and deployment.role_data_plane.config_provider: yaml, or use etcd", prov.Kind)
		}
		source = fileSource(prov.File, log)
	case "etcd":
		en, err := openEtcd(nc, c.EtcdData, c.AcceptReset, log)
		if err != nil {
			return err
		}
		defer en.close()
		source = en.sync
		if v, ok := en.store.(interface {
			ServerVersion(context.Context) (string, error)
		}); ok {
			etcdVersion = v.ServerVersion
		}
		collectors = append(collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "apisix_etcd_reachable",
			Help: "Config server etcd reachable from the node, 0 is unreachable.",
		}, func() float64 {
			if en.sync.Reachable() {
				return 1
			}
			return 0
		}))
		for _, key := range append(slices.Clone(storesync.IndexedResources), "max_modify_index", "prev_index", "x_etcd_index") {
			collectors = append(collectors, prometheus.NewGaugeFunc(prometheus.GaugeOpts{
				Name:        "apisix_etcd_modify_indexes",
				Help:        "Etcd modify index for APISIX keys",
				ConstLabels: prometheus.Labels{"key": key},
			}, func() float64 { return float64(en.sync.ModifyIndexes()[key]) }))
		}
		if nc.APISIX.EnableAdmin {
			stopAdmin, err := serveAdmin(nc, en.admin, log)
			if err != nil {
				return err
			}
			defer stopAdmin()
		}
	default:
		return fmt.Errorf("config provider %q is not available", prov.Kind)
	}
	mode, err := bpf.ParseMode(c.Selector)
	if err != nil {
		return err
	}
	var cpus []int
	if c.CPUs != "" {
		if cpus, err = ParseCPUList(c.CPUs); err != nil {
			return err
		}
	}
	workerCount := func(nc *nodeconf.Config) (int, error) {
		switch c.Workers {
		case "":
			return nc.NginxConfig.WorkerProcesses, nil // 0: auto
		case "auto":
			return 0, nil
		}
		n, err := strconv.Atoi(c.Workers)
		if err != nil || n < 1 {
			return 0, fmt.Errorf("--workers: want auto or a number ≥ 1, got %q", c.Workers)
		}
		return n, nil
	}
	n, err := workerCount(nc)
	if err != nil {
		return err
	}
	if err := node.CheckAccessLog(nc); err != nil {
		return err
	}
	if err := node.CheckTLS(nc); err != nil {
		return err
	}
	cas, err := nodeconf.TrustedCAs(nc.APISIX.SSLTrustedCertificate)
	if err != nil {
		return err
	}
	sup, err := New(Options{
		WorkerArgs:   []string{"-c", c.Config},
		Workers:      n,
		CPUs:         cpus,
		Mode:         mode,
		DrainTimeout: c.ShutdownTimeout,
		StallRestart: c.StallRestart,
		StartTimeout: c.StartTimeout,
		Source:       source,
		Collectors:   collectors,
		Settings:     node.Settings(nc),
		Counters:     c.Counters,
		HealthSlots:  c.HealthSlots,
		Takeover:     TakeoverKey(c.Config),
		TrustedCAs:   cas,
		ReopenLog:    reopenLog,
		Log:          log,
	})
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	sup.SetMetricPrefix(nc.Prometheus.MetricPrefix)
	sup.SetExtraLabels(extraLabels(nc))
	if nc.APISIX.EnableControl {
		id, err := NodeID(nc.Dir, nc.APISIX.ID)
		if err != nil {
			log.Error("config.yaml's directory", "err", err)
		}
		keyPrefix := ""
		if nc.Provider().Kind == "etcd" {
			keyPrefix = nc.Deployment.Etcd.Prefix
		}
		if err := sup.ServeControl(ctx, ControlOptions{
			Addr: nc.APISIX.Control.Addr(), Plugins: plugins.Default, Enabled: nc.Plugins,
			KeyPrefix: keyPrefix, ID: id, Version: spec.CompatVersion, BootTime: boot,
			EtcdVersion: etcdVersion,
		}); err != nil {
			return err
		}
	}
	if exp := nc.Prometheus; exp.EnableExportServer {
		if !loopbackAddr(exp.ExportAddr.Addr()) {
			keys, err := statusKeys(nc)
			if err != nil {
				return err
			}
			sup.SetStatusKeys(keys)
		}
		if err := sup.ServeMetrics(ctx, exp.ExportAddr.Addr(), exp.ExportURI); err != nil {
			log.Error("metrics server not started", "addr", exp.ExportAddr.Addr(), "err", err)
		}
	}
	return sup.Run(ctx, func() (Reload, error) {
		nc, warnings, err := nodeconf.Load(c.Config)
		if err != nil {
			return Reload{}, err
		}
		node.SetLogLevel(nc)
		for _, w := range warnings {
			log.Warn(w)
		}
		n, err := workerCount(nc)
		if err != nil {
			return Reload{}, err
		}
		if err := node.CheckAccessLog(nc); err != nil {
			return Reload{}, err
		}
		if err := node.CheckTLS(nc); err != nil {
			return Reload{}, err
		}
		sup.SetMetricPrefix(nc.Prometheus.MetricPrefix)
		sup.SetExtraLabels(extraLabels(nc))
		return Reload{Workers: n, Settings: node.Settings(nc)}, nil
	})
}

// Check is `coregate -t`: what the start checks of config.yaml,
// and of the standalone file a data plane reads beside it, without
// starting anything. Its warnings (keys coregate does not implement, an
// Admin API that checks no key) are printed to w; an error is what would
// stop the start, or an object of the configuration that would be left
// out. The configuration held in etcd is read and checked too
// (checkEtcd; etcdData is Command.EtcdData).
func Check(path, etcdData string, w io.Writer) error {
	nc, warnings, err := nodeconf.Load(path)
	if err != nil {
		return err
	}
	for _, warn := range warnings {
		fmt.Fprintf(w, "coregate: [warn] %s\n", warn)
	}
	if nc.APISIX.EnableAdmin {
		if err := adminapi.CheckKeys(nc.Deployment.Admin); err != nil {
			return err
		}
	}
	if err := node.CheckAccessLog(nc); err != nil {
		return err
	}
	if err := node.CheckTLS(nc); err != nil {
		return err
	}
	switch prov := nc.Provider(); prov.Kind {
	case "yaml", "json":
		if prov.File != "" {
			// The file's $secret:// references are read, as at start.
			plugins.Default.SetSecrets(node.SecretResolver(nc))
			if err := standalone.CheckFile(prov.File, plugins.Default); err != nil {
				return err
			}
			if err := checkFileBuild(nc, prov.File); err != nil {
				return err
			}
			fmt.Fprintf(w, "coregate: the routes file %s is ok\n", prov.File)
		}
	case "etcd":
		if err := checkEtcd(nc, etcdData, w); err != nil {
			return err
		}
	}
	fmt.Fprintf(w, "coregate: the configuration file %s syntax is ok\ncoregate: configuration file %s test is successful\n", path, path)
	return nil
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
