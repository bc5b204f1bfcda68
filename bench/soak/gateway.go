package soak

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"coregate/bench/harness"
	"coregate/bench/procstat"
)

// Env is a running gateway with its upstream, in a temporary directory.
type Env struct {
	Dir          string
	Coregate     string // the gateway binary
	Self         string // this program, run as "Self upstream"
	Workers      int
	GatewayAddr  string
	UpstreamAddr string
	GatewayPort  uint16
	UpstreamPort uint16
	// TLSPort is the gateway's TLS listener's (apisix.ssl.listen, on
	// 127.0.0.1), a free port too: it listens through the reloads, kills
	// and takeovers, though no load uses it.
	TLSPort uint16

	gw       *harness.Proc
	up       *harness.Proc
	restarts int // supervisors killed and started again
	gen      int // config.yaml generation: reloads alternate between two
	logf     func(string, ...any)
}

// StartEnv writes the gateway's config.yaml and apisix.yaml into dir,
// starts the upstream and the gateway with `workers` workers on free
// loopback ports (its listen port and its TLS port), and waits until GET
// /hello answers 200.
func StartEnv(dir, coregate, self string, workers int, logf func(string, ...any)) (*Env, error) {
	e := &Env{Dir: dir, Coregate: coregate, Self: self, Workers: workers, logf: logf}
	if err := e.StartUpstream("127.0.0.1:0"); err != nil {
		return nil, err
	}
	ports, err := freePorts(2)
	if err != nil {
		e.Close()
		return nil, err
	}
	port := ports[0]
	e.GatewayPort, e.TLSPort = uint16(port), uint16(ports[1])
	e.GatewayAddr = "127.0.0.1:" + strconv.Itoa(port)
	if err := os.WriteFile(filepath.Join(dir, "apisix.yaml"), e.routes(), 0o644); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.writeConfig(); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.startSupervisor("coregate.log"); err != nil {
		e.Close()
		return nil, err
	}
	if err := harness.WaitReady(e.gw, e.GatewayAddr, "/hello", "", 30*time.Second); err != nil {
		e.Close()
		return nil, err
	}
	if err := e.WaitWorkers(20 * time.Second); err != nil {
		e.Close()
		return nil, err
	}
	return e, nil
}

// config renders config.yaml; the two generations differ in the client
// keep-alive timeout only, so that a reload replaces every worker.
// The upstream pool's idle timeout is short, so that the pool is empty at
// the quiet points where open fds are counted.
func (e *Env) config() []byte {
	return fmt.Appendf(nil, `apisix:
  node_listen: [%d]
  ssl:
    listen:
      - ip: 127.0.0.1
        port: %d
  enable_admin: false
  enable_control: false
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
nginx_config:
  worker_processes: %d
  error_log_level: warn
  http:
    enable_access_log: false
    keepalive_timeout: %ds
    upstream:
      keepalive: 320
      keepalive_timeout: 2s
plugin_attr:
  prometheus:
    enable_export_server: false
`, e.GatewayPort, e.TLSPort, e.Workers, 60+e.gen%2)
}

// freePorts returns n distinct loopback TCP ports that were free a moment
// ago (harness.FreePort, called twice, may return one port twice: the
// kernel's next pick is often the port just closed).
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer ln.Close()
		ports = append(ports, ln.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// routes renders apisix.yaml: /hello and /big to the upstream.
func (e *Env) routes() []byte {
	var b strings.Builder
	b.WriteString("routes:\n")
	for i, uri := range []string{"/hello", BigPath} {
		fmt.Fprintf(&b, "  - id: %d\n    uri: %s\n    upstream:\n      type: roundrobin\n      nodes:\n        \"%s\": 1\n",
			i+1, uri, e.UpstreamAddr)
	}
	b.WriteString("#END\n")
	return []byte(b.String())
}

// startSupervisor starts the gateway's supervisor, its output in log.
func (e *Env) startSupervisor(log string) error {
	var err error
	e.gw, _, err = harness.Start("coregate", nil, nil, filepath.Join(e.Dir, log), false,
		e.Coregate, "-c", filepath.Join(e.Dir, "config.yaml"))
	return err
}

// RestartSupervisor kills the supervisor with SIGKILL, waits for it to be
// gone and, after, starts another on the same config.yaml, which takes
// the workers over (its output in coregate-N.log). It returns once the new
// one said so.
func (e *Env) RestartSupervisor(after, timeout time.Duration) error {
	e.restarts++
	_ = syscall.Kill(e.gw.PID(), syscall.SIGKILL)
	// Reaped, not stopped: Stop would end its workers too.
	for t0 := time.Now(); !e.gw.Exited(); {
		if time.Since(t0) > exitWait {
			return fmt.Errorf("soak: the supervisor still runs %v after SIGKILL", exitWait)
		}
		time.Sleep(time.Millisecond)
	}
	e.gw.Stop(0)
	time.Sleep(after)
	if err := e.startSupervisor(fmt.Sprintf("coregate-%d.log", e.restarts+1)); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for !strings.Contains(e.gw.Tail(50), "took over the workers") {
		if e.gw.Exited() || time.Now().After(deadline) {
			return fmt.Errorf("soak: the supervisor started again did not take the workers over:\n%s", e.gw.Tail(20))
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

func (e *Env) writeConfig() error {
	p := filepath.Join(e.Dir, "config.yaml")
	if err := os.WriteFile(p+".tmp", e.config(), 0o644); err != nil {
		return err
	}
	return os.Rename(p+".tmp", p)
}

// Reload changes config.yaml and sends the gateway SIGHUP.
func (e *Env) Reload() error {
	e.gen++
	if err := e.writeConfig(); err != nil {
		return err
	}
	return syscall.Kill(e.gw.PID(), syscall.SIGHUP)
}

// StartUpstream runs "Self upstream -listen addr" and records the address
// it reports.
func (e *Env) StartUpstream(addr string) error {
	p, out, err := harness.Start("upstream", nil, nil, filepath.Join(e.Dir, "upstream.log"), true, e.Self, "upstream", "-listen", addr)
	if err != nil {
		return err
	}
	a, err := harness.UpstreamAddr(p, out)
	if err != nil {
		return fmt.Errorf("soak: %w", err)
	}
	_, ps, _ := net.SplitHostPort(a)
	n, _ := strconv.Atoi(ps)
	e.up, e.UpstreamAddr, e.UpstreamPort = p, a, uint16(n)
	return nil
}

// KillUpstream kills the upstream with SIGKILL and waits for it to be gone.
func (e *Env) KillUpstream() {
	_ = syscall.Kill(e.up.PID(), syscall.SIGKILL)
	e.up.Stop(5 * time.Second) // reaps it; nothing left to signal
}

// SignalUpstream sends the upstream a signal (SIGUSR1: answer 503,
// SIGUSR2: answer normally).
func (e *Env) SignalUpstream(s syscall.Signal) error { return syscall.Kill(e.up.PID(), s) }

// GatewayPIDs returns the supervisor and its workers.
func (e *Env) GatewayPIDs() []int { return append([]int{e.gw.PID()}, e.WorkerPIDs()...) }

// GatewayAlive reports whether the supervisor is still running.
func (e *Env) GatewayAlive() bool { return !e.gw.Exited() }

// WorkerPIDs returns the live worker processes (`coregate worker ... -c
// DIR/config.yaml`), draining ones included: the supervisor's children,
// or those a supervisor started again took over, which are not.
func (e *Env) WorkerPIDs() []int {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	conf := filepath.Join(e.Dir, "config.yaml")
	var out []int
	for _, ent := range ents {
		p, err := strconv.Atoi(ent.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", ent.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
		if len(args) > 2 && args[1] == "worker" && args[len(args)-2] == "-c" && args[len(args)-1] == conf {
			if st, err := procstat.ReadStat(p); err == nil && st.State != 'Z' {
				out = append(out, p)
			}
		}
	}
	return out
}

// WaitWorkers waits until exactly e.Workers workers run (none draining).
func (e *Env) WaitWorkers(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		n := len(e.WorkerPIDs())
		if n == e.Workers {
			return nil
		}
		if e.gw.Exited() {
			return fmt.Errorf("soak: the gateway exited:\n%s", e.gw.Tail(20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: %d workers running after %v, want %d", n, timeout, e.Workers)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// ReloadAndWait reloads and waits until every worker running before has
// been replaced and the configured number runs.
func (e *Env) ReloadAndWait(timeout time.Duration) error {
	old := map[int]bool{}
	for _, p := range e.WorkerPIDs() {
		old[p] = true
	}
	if err := e.Reload(); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for {
		pids := e.WorkerPIDs()
		replaced := len(pids) == e.Workers
		for _, p := range pids {
			replaced = replaced && !old[p]
		}
		if replaced {
			return nil
		}
		if e.gw.Exited() {
			return fmt.Errorf("soak: the gateway exited:\n%s", e.gw.Tail(20))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("soak: the workers were not replaced within %v of a reload", timeout)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// LogTail returns the last n lines of the gateway's log.
func (e *Env) LogTail(n int) string { return e.gw.Tail(n) }

// Close stops the gateway and the upstream.
func (e *Env) Close() {
	if e.gw != nil {
		e.gw.Stop(15 * time.Second)
	}
	if e.up != nil {
		e.up.Stop(3 * time.Second)
	}
}
