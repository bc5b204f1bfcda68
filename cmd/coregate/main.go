// Command coregate is the gateway.
//
//	coregate [-c conf/config.yaml] [--workers auto|N] [--cpus 0-3,6]
//	         [--selector hash|cpu|least_conn] [--shutdown-timeout 10s]
//	         [--etcd-data DIR] [--accept-store-reset]
//	coregate -t|-T [-c conf/config.yaml]
//	coregate -s reload|stop|quit|reopen [-c conf/config.yaml]
//	coregate -v | -V
//	coregate init [conf/config.yaml]
//
// runs the supervisor (package coregate/node/supervisor): it loads the
// eBPF socket selector, reads the routes (apisix.yaml beside config.yaml
// for a data plane; etcd otherwise, the node's embedded one unless
// deployment.etcd.host names a cluster; --accept-store-reset serves an
// etcd found older than the node's config-cache.json, which it otherwise
// refuses), and starts one worker process per CPU (`coregate worker ...`,
// package coregate/node/workerproc), each pinned to its CPU and running
// one event loop on the shared SO_REUSEPORT port.
//
// With -t it only checks config.yaml (and a data plane's apisix.yaml, or
// every object in etcd) as the start would, prints the warnings and the
// problems (a file's line and key, an etcd object's key), and exits: 0
// when the node would start with it and serve the whole configuration;
// -T then prints the configuration in effect (nodeconf.Render).
// -s sends the running supervisor, found through its pid file
// (apisix.pid_file, coregate.pid beside config.yaml), the signal nginx's
// -s name means: reload SIGHUP, stop SIGQUIT, quit SIGTERM, reopen
// SIGUSR1. -v prints the version, -V the Go release, commit, build flags
// and the socket selector this process may load too. init writes a
// config.yaml with every key and its default (nodeconf.Template).
//
// Signals to the supervisor: SIGTERM or SIGINT stop gracefully (no new
// connections; in-flight requests finish within --shutdown-timeout; the next
// request on a kept-alive connection is answered with Connection: close, a
// connection quiet for 2 s is closed cleanly), SIGQUIT stops at once, SIGHUP
// re-reads config.yaml and starts or retires workers to match
// nginx_config.worker_processes (unless --workers is given), SIGUSR1 has
// every worker reopen its access log, and every process its error log
// when nginx_config.error_log names one (after logrotate renamed them).
//
// COREGATE_PPROF=127.0.0.1:PORT makes worker i serve net/http/pprof on
// PORT+i (for scripts/flamegraph.sh); COREGATE_PPROF_SUPERVISOR=ADDR makes
// the supervisor (Admin API, embedded etcd, the watch) serve it on ADDR.
package main

import (
	"fmt"
	"os"

	_ "coregate/plugins/all" // the plugins, registered in plugins.Default
)

func main() {
	var err error
	switch {
	case len(os.Args) > 1 && os.Args[1] == "worker":
		err = runWorker(os.Args[2:])
	case len(os.Args) > 1 && os.Args[1] == "init":
		err = runInit(os.Args[2:])
	default:
		err = runSupervisor(os.Args[1:])
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "coregate:", err)
		os.Exit(1)
	}
}
