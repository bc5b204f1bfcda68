package main

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"coregate/bpf"
	"coregate/internal/syncbuf"
	"coregate/node/supervisor"
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

// perCoreConfig is a config.yaml listening on 127.0.0.1:port with n workers.
func perCoreConfig(port, n int) string {
	return fmt.Sprintf(`apisix:
  node_listen:
    - ip: 127.0.0.1
      port: %d
  enable_admin: false
deployment:
  role: data_plane
  role_data_plane:
    config_provider: yaml
nginx_config:
  worker_processes: %d
  error_log_level: info
plugin_attr:
  prometheus:
    enable_export_server: false
`, port, n)
}

// supGateway is a gateway started with command-line flags; a test that
// stops it itself sets stopped.
type supGateway struct {
	*gateway
	stopped atomic.Bool
}

// startSupervisor starts `coregate -c config.yaml args...` with the config
// config(port) makes, and waits until `ready` workers logged they are ready
// (0: do not wait).
func startSupervisor(t *testing.T, apisixYAML string, config func(port int) string, ready int, args ...string) *supGateway {
	t.Helper()
	g := &supGateway{gateway: &gateway{t: t, dir: t.TempDir(), port: freePort(t), out: &syncbuf.Buffer{}, done: make(chan struct{})}}
	writeFile(t, filepath.Join(g.dir, "config.yaml"), config(g.port))
	writeFile(t, filepath.Join(g.dir, "apisix.yaml"), apisixYAML)
	g.cmd = exec.Command(binPath, append([]string{"-c", filepath.Join(g.dir, "config.yaml")}, args...)...)
	g.cmd.Stdout, g.cmd.Stderr = g.out, g.out
	// A race-enabled build otherwise waits 1 s at every exit, which would
	// blur the timings measured here.
	g.cmd.Env = append(os.Environ(), "GORACE=atexit_sleep_ms=0")
	if err := g.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = g.cmd.Wait(); close(g.done) }()
	t.Cleanup(func() {
		if !g.stopped.Load() {
			g.stop()
			return
		}
		select {
		case <-g.done:
		case <-time.After(5 * time.Second):
			t.Errorf("the gateway did not stop")
			ws := workerProcs(t, g.cmd.Process.Pid)
			_ = g.cmd.Process.Kill()
			for _, w := range ws {
				_ = syscall.Kill(w.pid, syscall.SIGKILL)
			}
			<-g.done
		}
		if t.Failed() {
			t.Logf("gateway output:\n%s", g.out.String())
		}
	})
	if ready > 0 {
		g.waitLog(`msg="worker ready"`, ready, 10*time.Second)
	}
	return g
}

// waitLog waits until the gateway's output holds n lines that match re, and
// returns them.
func (g *gateway) waitLog(re string, n int, timeout time.Duration) []string {
	g.t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(timeout)
	for {
		var got []string
		for _, l := range strings.Split(g.out.String(), "\n") {
			if rx.MatchString(l) {
				got = append(got, l)
			}
		}
		if len(got) >= n {
			return got
		}
		select {
		case <-g.done:
			g.t.Fatalf("gateway exited while waiting for %d lines matching %q:\n%s", n, re, g.out.String())
		default:
		}
		if time.Now().After(deadline) {
			g.t.Fatalf("after %v: %d lines match %q, want %d", timeout, len(got), re, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// logField returns the value of key in a log line (logfmt), "" if absent.
func logField(line, key string) string {
	rx := regexp.MustCompile(`(?:^| )` + regexp.QuoteMeta(key) + `=("[^"]*"|\S*)`)
	m := rx.FindStringSubmatch(line)
	if m == nil {
		return ""
	}
	return strings.Trim(m[1], `"`)
}

// workerProc is a worker process as /proc shows it.
type workerProc struct {
	pid, id, cpu int
}

// workerProcs lists the live worker processes that are children of the
// supervisor, by reading /proc/*/stat (parent pid) and /proc/*/cmdline.
func workerProcs(t testing.TB, supPID int) []workerProc {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var out []workerProc
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		f := procStat(pid)
		if len(f) < 2 || f[1] != strconv.Itoa(supPID) || f[0] == "Z" {
			continue
		}
		cmdline, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil {
			continue
		}
		args := strings.Split(strings.TrimRight(string(cmdline), "\x00"), "\x00")
		if len(args) < 2 || args[1] != "worker" {
			continue
		}
		w := workerProc{pid: pid, id: -1, cpu: -1}
		for i := 2; i+1 < len(args); i++ {
			switch args[i] {
			case "--id":
				w.id, _ = strconv.Atoi(args[i+1])
			case "--cpu":
				w.cpu, _ = strconv.Atoi(args[i+1])
			}
		}
		out = append(out, w)
	}
	return out
}

// procStat returns the fields of /proc/<pid>/stat after the command
// name: state, ppid, … (utime and stime are the 12th and 13th); nil when
// the process is gone. The name may hold spaces, so it cuts at the last ')'.
func procStat(pid int) []string {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return nil
	}
	s := string(b)
	return strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
}

// waitWorkers waits until the supervisor has exactly n worker children.
func waitWorkers(t testing.TB, supPID, n int, timeout time.Duration) []workerProc {
	t.Helper()
	var ws []workerProc
	deadline := time.Now().Add(timeout)
	for {
		ws = workerProcs(t, supPID)
		if len(ws) == n {
			return ws
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d worker processes (%v), want %d", timeout, len(ws), ws, n)
		}
		time.Sleep(20 * time.Millisecond)
	}
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

// tcpEntry is a TCP socket as the kernel's sock_diag reports it.
type tcpEntry struct {
	localPort, remotePort int
	state                 int // 1 ESTABLISHED, 8 CLOSE_WAIT, ...
	inode                 uint64
}

// serverSockets returns the server side of the connections to the gateway
// port, by the client's port. An inode of 0 means no process accepted the
// connection yet (it waits in an accept queue). It asks sock_diag for
// every state but TIME_WAIT and LISTEN (reading /proc/net/tcp instead would
// walk the tens of thousands of TIME_WAIT sockets load tests leave behind).
func serverSockets(t testing.TB, port int) map[int]tcpEntry {
	t.Helper()
	out := map[int]tcpEntry{}
	for _, family := range []uint8{unix.AF_INET, unix.AF_INET6} {
		entries, err := diagTCP(family, 0xfff&^(1<<6|1<<10))
		if err != nil {
			t.Fatalf("sock_diag: %v", err)
		}
		for _, e := range entries {
			if e.localPort == port {
				out[e.remotePort] = e
			}
		}
	}
	return out
}

// diagTCP dumps the TCP sockets of family whose state is in the states bit
// mask, through NETLINK_SOCK_DIAG (struct inet_diag_req_v2 in, struct
// inet_diag_msg out).
func diagTCP(family uint8, states uint32) ([]tcpEntry, error) {
	fd, err := unix.Socket(unix.AF_NETLINK, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, unix.NETLINK_SOCK_DIAG)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	_ = unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_RCVTIMEO, &unix.Timeval{Sec: 5})
	req := make([]byte, unix.NLMSG_HDRLEN+56)
	binary.NativeEndian.PutUint32(req[0:], uint32(len(req)))
	binary.NativeEndian.PutUint16(req[4:], unix.SOCK_DIAG_BY_FAMILY)
	binary.NativeEndian.PutUint16(req[6:], unix.NLM_F_REQUEST|unix.NLM_F_DUMP)
	binary.NativeEndian.PutUint32(req[8:], 1)
	r := req[unix.NLMSG_HDRLEN:]
	r[0], r[1] = family, unix.IPPROTO_TCP
	binary.NativeEndian.PutUint32(r[4:], states)
	if err := unix.Sendto(fd, req, 0, &unix.SockaddrNetlink{Family: unix.AF_NETLINK}); err != nil {
		return nil, err
	}
	var out []tcpEntry
	buf := make([]byte, 1<<16)
	// Bounded: a dump of a million sockets ends well within 100000 reads.
	for range 100000 {
		n, _, err := unix.Recvfrom(fd, buf, 0)
		if err != nil {
			return nil, err
		}
		msgs, err := syscall.ParseNetlinkMessage(buf[:n])
		if err != nil {
			return nil, err
		}
		for _, m := range msgs {
			switch m.Header.Type {
			case unix.NLMSG_DONE:
				return out, nil
			case unix.NLMSG_ERROR:
				return nil, fmt.Errorf("netlink error %v", m.Data)
			}
			d := m.Data
			if len(d) < 72 {
				continue
			}
			out = append(out, tcpEntry{
				state:      int(d[1]),
				localPort:  int(binary.BigEndian.Uint16(d[4:])),
				remotePort: int(binary.BigEndian.Uint16(d[6:])),
				inode:      uint64(binary.NativeEndian.Uint32(d[68:])),
			})
		}
	}
	return nil, errors.New("sock_diag: the dump did not end")
}

// socketOwners maps socket inodes to the pid among pids that holds them.
func socketOwners(pids []int) map[uint64]int {
	out := map[uint64]int{}
	for _, pid := range pids {
		dir := "/proc/" + strconv.Itoa(pid) + "/fd"
		ents, err := os.ReadDir(dir)
		if err != nil {
			continue
		}
		for _, e := range ents {
			link, err := os.Readlink(filepath.Join(dir, e.Name()))
			if err != nil || !strings.HasPrefix(link, "socket:[") {
				continue
			}
			inode, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimPrefix(link, "socket:["), "]"), 10, 64)
			if err == nil {
				out[inode] = pid
			}
		}
	}
	return out
}

// acceptedBy waits until the gateway accepted every connection whose client
// port is in ports, and returns the worker pid that holds each (by port).
func acceptedBy(t testing.TB, gwPort int, ports []int, pids []int, timeout time.Duration) map[int]int {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		socks := serverSockets(t, gwPort)
		owners := socketOwners(pids)
		got := map[int]int{}
		missing := 0
		for _, p := range ports {
			e, ok := socks[p]
			if !ok || e.inode == 0 {
				missing++
				continue
			}
			if pid, ok := owners[e.inode]; ok {
				got[p] = pid
			} else {
				missing++
			}
		}
		if missing == 0 {
			return got
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %d of %d connections not held by a worker", timeout, missing, len(ports))
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// localPort is the client-side port of c.
func localPort(c net.Conn) int { return c.LocalAddr().(*net.TCPAddr).Port }

// dialPinned opens n connections to addr from a thread pinned to cpu: on
// loopback the SYN is processed on the CPU of the thread that calls connect.
func dialPinned(t testing.TB, addr string, cpu, n int) []net.Conn {
	t.Helper()
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var old, set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &old); err != nil {
		t.Fatal(err)
	}
	set.Set(cpu)
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = unix.SchedSetaffinity(0, &old) }()
	conns := make([]net.Conn, 0, n)
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			closeAll(conns)
			t.Fatalf("dial from cpu %d: %v", cpu, err)
		}
		conns = append(conns, c)
	}
	return conns
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		_ = c.Close()
	}
}

// countBy counts the values of m.
func countBy(m map[int]int) map[int]int {
	out := map[int]int{}
	for _, v := range m {
		out[v]++
	}
	return out
}

// exchange sends one GET for path on c and reads the whole answer,
// checking that the body is as long as Content-Length says.
func exchange(c net.Conn, br *bufio.Reader, path string, closeConn bool) (status int, close bool, err error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: pc.test\r\n"
	if closeConn {
		req += "Connection: close\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, false, &exchangeError{stage: "write", err: err}
	}
	if _, err := br.Peek(1); err != nil {
		return 0, false, &exchangeError{stage: "await", err: err}
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		return 0, false, &exchangeError{stage: "head", err: err, started: true}
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return resp.StatusCode, false, &exchangeError{stage: "body", err: err, started: true}
	}
	if resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength {
		return resp.StatusCode, false, &exchangeError{stage: "body", err: fmt.Errorf("%d bytes of %d", len(body), resp.ContentLength), started: true}
	}
	return resp.StatusCode, resp.Close, nil
}

// exchangeError says where an exchange failed: started is set when part of
// an answer had arrived.
type exchangeError struct {
	stage   string
	err     error
	started bool
}

func (e *exchangeError) Error() string { return e.stage + ": " + e.err.Error() }
func (e *exchangeError) Unwrap() error { return e.err }

// isRefused reports a refused connection.
func isRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// loadOutcome is what one connection of a load loop ended with.
type loadOutcome struct {
	seq    uint64 // the connection's number in the load, from 1
	port   int    // client port, 0 when the dial failed
	status int
	err    error
}

// newConnLoad runs n goroutines that each open a new connection, send one
// request for path with Connection: close and read the whole answer, until
// stop is closed. Every connection's outcome is sent to out.
type newConnLoad struct {
	wg   sync.WaitGroup
	stop chan struct{}
	mu   sync.Mutex
	res  []loadOutcome
	seq  atomic.Uint64
	// inflight maps the client ports of the connections waiting for an
	// answer now to their seq.
	inflight map[int]uint64
}

func startNewConnLoad(addr, path string, n int, stopOnRefused bool) *newConnLoad {
	l := &newConnLoad{stop: make(chan struct{}), inflight: map[int]uint64{}}
	for range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			// Bounded: at most 100000 connections, each within 6 s.
			for range 100000 {
				select {
				case <-l.stop:
					return
				default:
				}
				o := l.one(addr, path)
				l.mu.Lock()
				l.res = append(l.res, o)
				l.mu.Unlock()
				if stopOnRefused && o.port == 0 && isRefused(o.err) {
					return
				}
			}
		}()
	}
	return l
}

func (l *newConnLoad) one(addr, path string) loadOutcome {
	seq := l.seq.Add(1)
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return loadOutcome{seq: seq, err: err}
	}
	defer c.Close()
	port := localPort(c)
	l.mu.Lock()
	l.inflight[port] = seq
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.inflight, port)
		l.mu.Unlock()
	}()
	_ = c.SetDeadline(time.Now().Add(6 * time.Second))
	status, _, err := exchange(c, bufio.NewReader(c), path, true)
	return loadOutcome{seq: seq, port: port, status: status, err: err}
}

// inFlight returns the connections waiting for an answer now: client port
// to seq.
func (l *newConnLoad) inFlight() map[int]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int]uint64, len(l.inflight))
	for p, seq := range l.inflight {
		out[p] = seq
	}
	return out
}

// finish stops the load and returns every outcome.
func (l *newConnLoad) finish() []loadOutcome {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res
}
