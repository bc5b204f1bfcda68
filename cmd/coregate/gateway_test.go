package main

import (
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"coregate/internal/e2e"
	"coregate/internal/syncbuf"
)

// The end-to-end tests run the real binary, built once by TestMain, against
// real upstream servers on loopback. The harness is coregate/internal/e2e;
// this file and helpers_test.go give its helpers the short names the tests
// of this package use.
//
// A test calls t.Parallel() unless it judges timing, latency or CPU use,
// pins workers to CPUs, or sets the environment (t.Setenv): make test runs
// the parallel ones eight at once, beside other packages, once the serial
// ones are done.

var binPath string

func TestMain(m *testing.M) {
	bin, remove, err := e2e.Build(raceEnabled)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binPath = bin
	code := m.Run()
	remove()
	os.Exit(code)
}

// gateway is one coregate process with its config directory: an
// e2e.Gateway, its fields under this package's names.
type gateway struct {
	*e2e.Gateway
	t    testing.TB
	dir  string
	port int
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
}

func bindGateway(g *e2e.Gateway) *gateway {
	return &gateway{Gateway: g, t: g.T, dir: g.Dir, port: g.Port, cmd: g.Cmd, out: g.Out, done: g.Done}
}

// baseConfig is startGateway's config.yaml for the listen port, its TLS
// listener on e2e.TLSPort(port), with extra appended (under
// nginx_config).
func baseConfig(port int, extra string) string {
	return fmt.Sprintf(`apisix:
  node_listen:
    - %d
%s  enable_admin: false
  enable_control: false
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
plugin_attr:
  prometheus:
    enable_export_server: false
nginx_config:
  worker_processes: 1
  error_log_level: info
%s`, port, e2e.SSLListen(port), extra)
}

// startGateway writes config.yaml (with extra appended) and apisix.yaml and
// starts the gateway, waiting until it answers.
func startGateway(t testing.TB, apisixYAML, extra string) *gateway {
	t.Helper()
	return startGatewayConfig(t, apisixYAML, func(port int) string { return baseConfig(port, extra) })
}

// startGatewayConfig is startGateway with the whole config.yaml made by
// config for the listen port chosen.
func startGatewayConfig(t testing.TB, apisixYAML string, config func(port int) string) *gateway {
	t.Helper()
	return bindGateway(e2e.Start(t, e2e.Options{Bin: binPath, Config: config, APISIX: apisixYAML, Listen: true}))
}

func (g *gateway) url(path string) string { return g.URL(path) }

// stop ends the process it started (e2e.Gateway.Stop).
func (g *gateway) stop() { g.Stop() }

// rewrite replaces apisix.yaml atomically.
func (g *gateway) rewrite(apisixYAML string) {
	g.t.Helper()
	g.Rewrite(apisixYAML)
}

// waitLog waits until the gateway's output holds n lines that match re, and
// returns them.
func (g *gateway) waitLog(re string, n int, timeout time.Duration) []string {
	g.t.Helper()
	return g.WaitLog(re, n, timeout)
}

var (
	freePort      = e2e.FreePort
	deadAddr      = e2e.DeadAddr
	writeFile     = e2e.WriteFile
	eventually    = e2e.Eventually
	rawExchange   = e2e.RawExchange
	readResponses = e2e.ReadResponses
)
