package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"coregate/bpf"
	"coregate/internal/e2e"
	"coregate/node/supervisor"
	"coregate/worker"

	"golang.org/x/sys/unix"
)

// Helpers of the per-core worker tests: they look at the gateway only from
// outside, through /proc, the way an operator would.

// requirePerCore returns two CPUs of this process's affinity mask, and skips
// the test when the machine cannot run the per-core model (fewer than two
// CPUs, or no eBPF selector) unless CI=true, where that is a failure.
func requirePerCore(t *testing.T) []int {
	t.Helper()
	skip := func(format string, args ...any) {
		t.Helper()
		if os.Getenv("CI") == "true" {
			t.Fatalf(format, args...)
		}
		t.Skipf(format, args...)
	}
	cpus, err := supervisor.AllowedCPUs()
	if err != nil {
		t.Fatal(err)
	}
	if len(cpus) < 2 {
		skip("per-core tests need 2 CPUs, have %v", cpus)
	}
	if kind, err := bpf.Probe(); kind != bpf.KindEBPF {
		skip("per-core tests need the eBPF selector; probe: %v (%v)", kind, err)
	}
	return cpus[:2]
}

// perCoreConfig is a config.yaml listening on 127.0.0.1:port with n workers,
// and for TLS on e2e.TLSPort(port).
func perCoreConfig(port, n int) string {
	return fmt.Sprintf(`apisix:
  node_listen:
    - ip: 127.0.0.1
      port: %d
  enable_admin: false
  enable_control: false
%sdeployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
nginx_config:
  worker_processes: %d
  error_log_level: info
plugin_attr:
  prometheus:
    enable_export_server: false
`, port, e2e.SSLListen(port), n)
}

// supGateway is a gateway started with command-line flags; a test that
// stops it itself sets stopped (e2e.Gateway.Stopped).
type supGateway struct {
	*gateway
	stopped *atomic.Bool
}

// startSupervisor starts `coregate -c config.yaml args...` with the config
// config(port) makes, and waits until `ready` workers logged they are ready
// (0: do not wait).
func startSupervisor(t *testing.T, apisixYAML string, config func(port int) string, ready int, args ...string) *supGateway {
	t.Helper()
	return bindSupervisor(e2e.Start(t, e2e.Options{Bin: binPath, Config: config, APISIX: apisixYAML, Args: args,
		// A race-enabled build otherwise waits 1 s at every exit, which
		// would blur the timings measured here.
		Env:   []string{"GORACE=atexit_sleep_ms=0"},
		Ready: ready}))
}

// restart stops g (unless the test stopped it) and starts the binary again
// on its config directory and port with args, as startSupervisor starts
// it, waiting until ready workers are ready (0: not).
func (g *supGateway) restart(t *testing.T, ready int, args ...string) *supGateway {
	t.Helper()
	return bindSupervisor(g.Restart(t, e2e.Options{Bin: binPath, Args: args,
		Env: []string{"GORACE=atexit_sleep_ms=0"}, Ready: ready, ReadyTimeout: 30 * time.Second}))
}

func bindSupervisor(g *e2e.Gateway) *supGateway {
	return &supGateway{gateway: bindGateway(g), stopped: &g.Stopped}
}

var logField = e2e.LogField

// workerProc is a worker process as /proc shows it.
type workerProc struct {
	pid, id, cpu int
}

func workerProcsOf(ws []e2e.WorkerProc) []workerProc {
	out := make([]workerProc, 0, len(ws))
	for _, w := range ws {
		out = append(out, workerProc{pid: w.PID, id: w.ID, cpu: w.CPU})
	}
	return out
}

// workerProcs lists the live worker processes that are children of the
// supervisor.
func workerProcs(t testing.TB, supPID int) []workerProc {
	t.Helper()
	return workerProcsOf(e2e.Workers(t, supPID))
}

// waitWorkers waits until the supervisor has exactly n worker children.
func waitWorkers(t testing.TB, supPID, n int, timeout time.Duration) []workerProc {
	t.Helper()
	return workerProcsOf(e2e.WaitWorkers(t, supPID, n, timeout))
}

// checkPinned checks that every thread of the worker is allowed to run on
// its CPU only.
func checkPinned(t testing.TB, w workerProc) {
	t.Helper()
	threads, err := supervisor.ThreadCPUs(w.pid)
	if err != nil {
		t.Fatalf("worker %d (pid %d): %v", w.id, w.pid, err)
	}
	if len(threads) < 2 {
		t.Errorf("worker %d (pid %d): %d threads, a Go process has several", w.id, w.pid, len(threads))
	}
	want := strconv.Itoa(w.cpu)
	for tid, list := range threads {
		if list != want {
			t.Errorf("worker %d (pid %d) thread %d: Cpus_allowed_list %q, want %q", w.id, w.pid, tid, list, want)
		}
	}
}

// checkSlice checks that every thread of the worker asks for the
// worker's time slice (worker.Slice), and that the supervisor's first
// thread does not: it keeps the kernel's default. A kernel without custom
// slices (before 6.12) reports none: the check is skipped there.
func checkSlice(t testing.TB, supPID int, w workerProc) {
	t.Helper()
	sup, err := unix.SchedGetAttr(supPID, 0)
	if err != nil {
		t.Fatal(err)
	}
	if sup.Runtime == 0 {
		t.Log("no custom time slices on this kernel: not checked")
		return
	}
	if sup.Runtime == uint64(worker.Slice) {
		t.Errorf("supervisor %d asks for the workers' slice, %d ns", supPID, sup.Runtime)
	}
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", w.pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		a, err := unix.SchedGetAttr(tid, 0)
		if err != nil {
			continue // the thread ended
		}
		if a.Runtime != uint64(worker.Slice) {
			t.Errorf("worker %d (pid %d) thread %d: slice %d ns, want %d", w.id, w.pid, tid, a.Runtime, uint64(worker.Slice))
		}
	}
}

// threadNices reads the nice value of every thread of pid (field 19 of
// /proc/PID/task/TID/stat), by thread.
func threadNices(t testing.TB, pid int) map[int]int {
	t.Helper()
	dir := fmt.Sprintf("/proc/%d/task", pid)
	tasks, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, e := range tasks {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(fmt.Sprintf("%s/%d/stat", dir, tid))
		if err != nil {
			continue // the thread ended
		}
		f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+1:]))
		if len(f) < 17 {
			t.Fatalf("thread %d: stat %q", tid, b)
		}
		n, err := strconv.Atoi(f[16]) // field 19, the third after the name's is 4
		if err != nil {
			t.Fatal(err)
		}
		out[tid] = n
	}
	return out
}

// checkNice checks that every thread of the supervisor but one (the one
// its workers are started from) runs supervisor.Nice below that one, and
// that every thread of each worker runs at that one's nice value but its
// build thread, at worker.BackgroundNice.
func checkNice(t testing.TB, supPID int, ws []workerProc) {
	t.Helper()
	sup := threadNices(t, supPID)
	byNice := map[int]int{}
	for _, n := range sup {
		byNice[n]++
	}
	self, err := unix.Getpriority(unix.PRIO_PROCESS, 0)
	if err != nil {
		t.Fatal(err)
	}
	want := 20 - self // this test's nice value, which the gateway started with
	lowered := min(want+supervisor.Nice, 19)
	if byNice[want] != 1 || byNice[lowered] != len(sup)-1 {
		t.Errorf("supervisor %d: threads by nice value %v, want one at %d and the other %d at %d", supPID, byNice, want, len(sup)-1, lowered)
	}
	for _, w := range ws {
		build := 0
		for tid, n := range threadNices(t, w.pid) {
			switch n {
			case want:
			case worker.BackgroundNice:
				build++
			default:
				t.Errorf("worker %d (pid %d) thread %d: nice %d, want %d", w.id, w.pid, tid, n, want)
			}
		}
		if build > 1 {
			t.Errorf("worker %d (pid %d): %d threads at nice %d, want the build thread only", w.id, w.pid, build, worker.BackgroundNice)
		}
	}
}

// The sockets, connections and loads the per-core tests look at.
type exchangeError = e2e.ExchangeError

var (
	serverSockets    = e2e.ServerSockets
	socketOwners     = e2e.SocketOwners
	acceptedBy       = e2e.AcceptedBy
	localPort        = e2e.LocalPort
	dialPinned       = e2e.DialPinned
	closeAll         = e2e.CloseAll
	countBy          = e2e.CountBy
	exchange         = e2e.Exchange
	isRefused        = e2e.IsRefused
	startNewConnLoad = e2e.StartNewConnLoad
)
