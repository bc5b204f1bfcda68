package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/admin/spec"
	"coregate/worker"
)

// End-to-end tests of the per-core worker model: the supervisor, pinning,
// the eBPF socket selector, restarts and graceful stops. They look at the
// gateway from outside (/proc, sockets, its log). None runs in parallel:
// steering and timing depend on which CPUs are busy.

// TestPerCorePinned: two workers, each a child of the supervisor, every
// thread pinned to its own CPU, at the nice value the gateway started
// with, the supervisor's threads below them.
func TestPerCorePinned(t *testing.T) {
	cpus := requirePerCore(t)
	g := startSupervisor(t, routesYAML(), func(port int) string { return perCoreConfig(port, 1) }, 2,
		"--workers", "2", "--cpus", cpuList(cpus))
	ws := waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	sort.Slice(ws, func(i, j int) bool { return ws[i].id < ws[j].id })
	got := []string{}
	for _, w := range ws {
		got = append(got, fmt.Sprintf("id %d cpu %d", w.id, w.cpu))
		checkPinned(t, w)
		checkSlice(t, g.cmd.Process.Pid, w)
		env, err := readEnviron(w.pid)
		if err != nil {
			t.Fatal(err)
		}
		if want := strconv.Itoa(worker.Procs); env["GOMAXPROCS"] != want {
			t.Errorf("worker %d: GOMAXPROCS=%q, want %s", w.id, env["GOMAXPROCS"], want)
		}
	}
	want := []string{fmt.Sprintf("id 0 cpu %d", cpus[0]), fmt.Sprintf("id 1 cpu %d", cpus[1])}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}
	checkNice(t, g.cmd.Process.Pid, ws)
}

// TestPerCoreSteering: cpu mode sends a client's connections to the worker
// on the client's CPU (loopback SYNs are processed there), hash mode spreads
// them over both workers, least_conn sends new connections to the worker
// that holds fewer.
func TestPerCoreSteering(t *testing.T) {
	cpus := requirePerCore(t)
	start := func(t *testing.T, mode string) (*supGateway, []workerProc) {
		g := startSupervisor(t, routesYAML(), func(port int) string { return perCoreConfig(port, 2) }, 2,
			"--cpus", cpuList(cpus), "--selector", mode)
		return g, waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	}
	pidsOf := func(ws []workerProc) []int {
		var pids []int
		for _, w := range ws {
			pids = append(pids, w.pid)
		}
		return pids
	}
	const dials = 200

	t.Run("cpu", func(t *testing.T) {
		g, ws := start(t, "cpu")
		for _, w := range ws {
			conns := dialPinned(t, g.Addr(), w.cpu, dials)
			ports := make([]int, len(conns))
			for i, c := range conns {
				ports[i] = localPort(c)
			}
			by := countBy(acceptedBy(t, g.port, ports, pidsOf(ws), 5*time.Second))
			closeAll(conns)
			share := float64(by[w.pid]) / dials
			t.Logf("client on cpu %d: %d of %d connections to worker %d (cpu %d): %.1f %%", w.cpu, by[w.pid], dials, w.id, w.cpu, 100*share)
			if share < 0.99 {
				t.Errorf("client on cpu %d: %.1f %% to the worker on that cpu, want ≥ 99 %% (by pid: %v)", w.cpu, 100*share, by)
			}
		}
	})

	t.Run("hash", func(t *testing.T) {
		g, ws := start(t, "hash")
		conns := make([]net.Conn, 0, dials)
		for range dials {
			c, err := net.DialTimeout("tcp", g.Addr(), 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conns = append(conns, c)
		}
		defer closeAll(conns)
		ports := make([]int, len(conns))
		for i, c := range conns {
			ports[i] = localPort(c)
		}
		by := countBy(acceptedBy(t, g.port, ports, pidsOf(ws), 5*time.Second))
		for _, w := range ws {
			t.Logf("hash: worker %d got %d of %d", w.id, by[w.pid], dials)
			// Binomial(200, 1/2) < 40 has probability < 1e-17.
			if by[w.pid] < dials/5 {
				t.Errorf("hash: worker %d got %d of %d connections, want ≥ %d", w.id, by[w.pid], dials, dials/5)
			}
		}
	})

	t.Run("least_conn", func(t *testing.T) {
		g, ws := start(t, "least_conn")
		pids := pidsOf(ws)
		// Spread 60 idle connections, then close those of one worker: the
		// other one (heavy) holds about 30, the light one none.
		conns := map[int]net.Conn{}
		var ports []int
		for range 60 {
			c, err := net.DialTimeout("tcp", g.Addr(), 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conns[localPort(c)] = c
			ports = append(ports, localPort(c))
		}
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		owner := acceptedBy(t, g.port, ports, pids, 5*time.Second)
		by := countBy(owner)
		heavy, light := pids[0], pids[1]
		if by[light] > by[heavy] {
			heavy, light = light, heavy
		}
		t.Logf("least_conn: 60 connections spread %d / %d", by[heavy], by[light])
		for p, pid := range owner {
			if pid == light {
				conns[p].Close()
				delete(conns, p)
			}
		}
		held := by[heavy]
		if held < 20 {
			t.Fatalf("least_conn: the heavier worker holds %d of 60, want ≥ 20", held)
		}
		eventually(t, 5*time.Second, func() error {
			socks := serverSockets(t, g.port)
			owners := socketOwners([]int{light})
			for _, e := range socks {
				if _, ok := owners[e.Inode]; ok && e.State == 1 {
					return fmt.Errorf("the light worker still holds a connection")
				}
			}
			return nil
		})
		time.Sleep(100 * time.Millisecond) // the close reaches the worker's counter
		// Each new connection is answered (so the worker counted it) before
		// the next one is opened: all should go to the light worker until
		// it holds as many as the heavy one.
		n := held / 2
		toLight := 0
		for range n {
			c, err := net.DialTimeout("tcp", g.Addr(), 2*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			conns[localPort(c)] = c
			_ = c.SetDeadline(time.Now().Add(5 * time.Second))
			if status, _, err := exchange(c, bufio.NewReader(c), "/none", false); err != nil || status != 404 {
				t.Fatalf("least_conn: request: %d %v", status, err)
			}
			if acceptedBy(t, g.port, []int{localPort(c)}, pids, 2*time.Second)[localPort(c)] == light {
				toLight++
			}
		}
		t.Logf("least_conn: %d of %d new connections went to the worker holding fewer", toLight, n)
		if toLight*10 < n*9 {
			t.Errorf("least_conn: %d of %d new connections to the less loaded worker, want ≥ 90 %%", toLight, n)
		}
	})
}

func cpuList(cpus []int) string {
	s := ""
	for i, c := range cpus {
		if i > 0 {
			s += ","
		}
		s += strconv.Itoa(c)
	}
	return s
}

func readEnviron(pid int) (map[string]string, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return nil, err
	}
	env := map[string]string{}
	for _, kv := range strings.Split(string(b), "\x00") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			env[k] = v
		}
	}
	return env, nil
}

// TestPerCoreKillUnderLoad: a worker killed with SIGKILL while clients open
// new connections loses only the connections it had accepted; those waiting
// in its accept queue are served by the other worker, and the supervisor
// starts a new worker, pinned again, in under 200 ms.
func TestPerCoreKillUnderLoad(t *testing.T) {
	cpus := requirePerCore(t)
	up := textUpstream(t, strings.Repeat("k", 1024))
	g := startSupervisor(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string { return perCoreConfig(port, 2) }, 2, "--cpus", cpuList(cpus))
	ws := waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	victim, survivor := ws[0], ws[1]
	if victim.id != 0 {
		victim, survivor = survivor, victim
	}

	load := startNewConnLoad(g.Addr(), "/hello", 8, false)
	time.Sleep(500 * time.Millisecond)
	// Stopped, the victim accepts nothing more: the connections steered to
	// it from now on wait in its accept queue.
	if err := syscall.Kill(victim.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	socks := serverSockets(t, g.port)
	owners := socketOwners([]int{victim.pid})
	// By connection seq: those the victim accepted, those in its queue.
	accepted, queued := map[uint64]bool{}, map[uint64]bool{}
	for port, seq := range load.InFlight() {
		e, ok := socks[port]
		switch {
		case !ok:
		case e.Inode == 0:
			queued[seq] = true
		default:
			if _, ok := owners[e.Inode]; ok {
				accepted[seq] = true
			}
		}
	}
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(1500 * time.Millisecond)
	res := load.Finish()

	ok, bad := 0, 0
	servedQueued := 0
	for _, o := range res {
		switch {
		case o.Err == nil && o.Status == 200:
			ok++
			if queued[o.Seq] {
				servedQueued++
			}
		case accepted[o.Seq]:
			t.Logf("connection accepted by the killed worker failed (allowed): %v", o.Err)
		default:
			bad++
			if bad <= 10 {
				t.Errorf("connection %d (port %d, queued: %v): status %d, %v", o.Seq, o.Port, queued[o.Seq], o.Status, o.Err)
			}
		}
	}
	t.Logf("kill -9 under load: %d exchanges, %d ok, %d failed; at the kill the victim had accepted %d and had %d queued, %d of them served by the survivor",
		len(res), ok, bad, len(accepted), len(queued), servedQueued)
	if len(queued) == 0 {
		t.Errorf("no connection waited in the stopped worker's queue: the test proves nothing")
	}
	if servedQueued != len(queued) {
		t.Errorf("%d of %d queued connections served, want all", servedQueued, len(queued))
	}
	if ok < 100 {
		t.Errorf("only %d exchanges succeeded", ok)
	}

	lines := g.waitLog(`msg="worker respawned".* id=0 `, 1, 5*time.Second)
	ms, err := strconv.ParseFloat(logField(lines[0], "respawn_ms"), 64)
	if err != nil {
		t.Fatalf("respawn_ms in %q: %v", lines[0], err)
	}
	t.Logf("respawn: %.1f ms (%s)", ms, lines[0])
	// At once, not after a backoff: the supervisor did not delay it. How
	// long the new process takes to start is the machine's (and the race
	// detector's) and is measured, not asserted, beyond a sanity bound.
	if strings.Contains(g.out.String(), `msg="worker restart delayed"`) {
		t.Errorf("the first restart was delayed:\n%s", g.out.String())
	}
	if ms >= 2000 {
		t.Errorf("respawn took %.1f ms, want well under 2 s", ms)
	}
	died := g.waitLog(`msg="worker died".* id=0 `, 1, time.Second)
	if why := logField(died[0], "why"); why != "signal: killed" {
		t.Errorf("worker died why=%q, want %q", why, "signal: killed")
	}

	// The new worker is pinned like the old one and serves.
	ws = waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	var fresh workerProc
	for _, w := range ws {
		if w.pid != survivor.pid {
			fresh = w
		}
	}
	if fresh.pid == victim.pid || fresh.id != 0 || fresh.cpu != victim.cpu {
		t.Fatalf("after the restart: workers %v, want a new id 0 on cpu %d beside %v", ws, victim.cpu, survivor)
	}
	checkPinned(t, fresh)
	conns := dialPinned(t, g.Addr(), fresh.cpu, 20)
	defer closeAll(conns)
	served := 0
	for _, c := range conns {
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if status, _, err := exchange(c, bufio.NewReader(c), "/hello", false); err == nil && status == 200 {
			if acceptedBy(t, g.port, []int{localPort(c)}, []int{fresh.pid, survivor.pid}, 2*time.Second)[localPort(c)] == fresh.pid {
				served++
			}
		}
	}
	if served == 0 {
		t.Errorf("the new worker served none of 20 connections")
	}
}

// TestPerCoreGracefulStop: SIGTERM under load. Every answer a client gets
// is whole, no connection that a worker accepted or queued is reset (a
// refused dial once the listeners are gone is fine, and so is a clean close
// of a keep-alive connection between two requests), a request that takes
// 1 s completes, and the supervisor exits 0 within the drain deadline.
func TestPerCoreGracefulStop(t *testing.T) {
	cpus := requirePerCore(t)
	body := strings.Repeat("g", 1024)
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(time.Second)
		}
		_, _ = io.WriteString(w, body)
	})
	route := func(uri string) obj {
		return obj{"uri": uri, "upstream": upstreamOf(nodes(up.Addr()), nil)}
	}
	const deadline = 4 * time.Second
	g := startSupervisor(t, routesYAML(route("/hello"), route("/slow")),
		func(port int) string { return perCoreConfig(port, 2) }, 2,
		"--cpus", cpuList(cpus), "--shutdown-timeout", deadline.String())

	ka := startKeepAliveLoad(g.Addr(), "/hello", 3)
	nc := startNewConnLoad(g.Addr(), "/hello", 3, true)
	time.Sleep(500 * time.Millisecond)
	slow := make(chan error, 1)
	go func() {
		c, err := net.DialTimeout("tcp", g.Addr(), time.Second)
		if err != nil {
			slow <- err
			return
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		status, _, err := exchange(c, bufio.NewReader(c), "/slow", false)
		if err == nil && status != 200 {
			err = fmt.Errorf("status %d", status)
		}
		slow <- err
	}()
	time.Sleep(200 * time.Millisecond)

	g.stopped.Store(true)
	sent := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.done:
	case <-time.After(deadline + 3*time.Second):
		t.Fatalf("the supervisor did not exit within %v of SIGTERM", deadline+3*time.Second)
	}
	took := time.Since(sent)
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d, want 0", code)
	}
	if took > deadline {
		t.Errorf("the stop took %v, more than the %v deadline", took, deadline)
	}
	if err := <-slow; err != nil {
		t.Errorf("the 1 s request in flight at SIGTERM: %v", err)
	}
	if left := workerProcs(t, g.cmd.Process.Pid); len(left) != 0 {
		t.Errorf("workers left behind: %v", left)
	}

	kaStats := ka.finish()
	ncRes := nc.Finish()
	ncOK, refused := 0, 0
	for _, o := range ncRes {
		switch {
		case o.Err == nil && o.Status == 200:
			ncOK++
		case o.Port == 0 && isRefused(o.Err):
			refused++
		default:
			t.Errorf("new connection %d (port %d): status %d, %v", o.Seq, o.Port, o.Status, o.Err)
		}
	}
	for _, err := range kaStats.errs {
		t.Errorf("keep-alive client: %v", err)
	}
	t.Logf("SIGTERM under load: stopped in %v; new connections: %d answered whole, %d refused after the listeners closed; "+
		"keep-alive: %d answered whole, %d closed by the gateway with Connection: close, %d closed cleanly while idle, %d refused",
		took.Round(time.Millisecond), ncOK, refused, kaStats.ok, kaStats.closeHeader, kaStats.idleClosed, kaStats.refused)
	if ncOK == 0 || kaStats.ok == 0 {
		t.Errorf("no load got through")
	}
}

// keepAliveLoad runs clients that send requests one after the other on a
// kept-alive connection, opening a new one when the gateway closes it.
type keepAliveLoad struct {
	wg    sync.WaitGroup
	stop  chan struct{}
	mu    sync.Mutex
	stats keepAliveStats
}

type keepAliveStats struct {
	ok          int // whole answers
	closeHeader int // answers with Connection: close, after which the client reconnects
	idleClosed  int // the gateway closed the connection cleanly (EOF) before an answer started, on a reused connection
	refused     int // a new connection was refused: the clients stop
	errs        []error
}

func startKeepAliveLoad(addr, path string, n int) *keepAliveLoad {
	l := &keepAliveLoad{stop: make(chan struct{})}
	for range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			var c net.Conn
			var br *bufio.Reader
			reused := false
			defer func() {
				if c != nil {
					c.Close()
				}
			}()
			// Bounded: at most 100000 requests, each within 6 s.
			for range 100000 {
				select {
				case <-l.stop:
					return
				default:
				}
				if c == nil {
					var err error
					if c, err = net.DialTimeout("tcp", addr, 3*time.Second); err != nil {
						l.mu.Lock()
						if isRefused(err) {
							l.stats.refused++
						} else {
							l.stats.errs = append(l.stats.errs, fmt.Errorf("dial: %w", err))
						}
						l.mu.Unlock()
						return
					}
					br, reused = bufio.NewReader(c), false
				}
				_ = c.SetDeadline(time.Now().Add(6 * time.Second))
				status, closed, err := exchange(c, br, path, false)
				l.mu.Lock()
				var ee *exchangeError
				switch {
				case err == nil && status == 200:
					l.stats.ok++
					if closed {
						l.stats.closeHeader++
					}
				case reused && errors.As(err, &ee) && !ee.Started && errors.Is(err, io.EOF):
					l.stats.idleClosed++
					closed = true
				default:
					l.stats.errs = append(l.stats.errs, fmt.Errorf("port %d, reused %v: status %d: %w", localPort(c), reused, status, err))
					closed = true
				}
				l.mu.Unlock()
				reused = true
				if closed {
					c.Close()
					c = nil
				}
			}
		}()
	}
	return l
}

func (l *keepAliveLoad) finish() keepAliveStats {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stats
}

// TestPerCoreReloadWorkers: SIGHUP after worker_processes changed in
// config.yaml starts a worker (1 → 2) and retires one gracefully (2 → 1)
// while clients keep opening connections.
func TestPerCoreReloadWorkers(t *testing.T) {
	cpus := requirePerCore(t)
	up := textUpstream(t, strings.Repeat("r", 1024))
	g := startSupervisor(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string { return perCoreConfig(port, 1) }, 1, "--cpus", cpuList(cpus))
	pid := g.cmd.Process.Pid
	waitWorkers(t, pid, 1, 5*time.Second)
	cfgPath := filepath.Join(g.dir, "config.yaml")

	writeFile(t, cfgPath, perCoreConfig(g.port, 2))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker ready".* id=1 `, 1, 5*time.Second)
	ws := waitWorkers(t, pid, 2, 5*time.Second)
	for _, w := range ws {
		checkPinned(t, w)
	}
	if ws[0].cpu == ws[1].cpu {
		t.Errorf("both workers on cpu %d", ws[0].cpu)
	}

	load := startNewConnLoad(g.Addr(), "/hello", 3, false)
	time.Sleep(300 * time.Millisecond)
	writeFile(t, cfgPath, perCoreConfig(g.port, 1))
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker retired".* id=1 `, 1, 5*time.Second)
	ws = waitWorkers(t, pid, 1, 5*time.Second)
	time.Sleep(300 * time.Millisecond)
	res := load.Finish()
	if ws[0].id != 0 {
		t.Errorf("worker %d stayed, want 0", ws[0].id)
	}
	ok := 0
	for _, o := range res {
		if o.Err == nil && o.Status == 200 {
			ok++
			continue
		}
		t.Errorf("connection %d (port %d) while a worker retired: status %d, %v", o.Seq, o.Port, o.Status, o.Err)
	}
	t.Logf("2 → 1 workers under load: %d exchanges, %d ok", len(res), ok)
	if ok == 0 {
		t.Errorf("no load got through")
	}
}

// TestPerCoreCrashLoop: a worker that cannot start (its second listen port
// is taken by another program) is restarted with a growing delay, the
// supervisor stays up, and the worker serves once the port is free.
func TestPerCoreCrashLoop(t *testing.T) {
	cpus := requirePerCore(t)
	blocker, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer blocker.Close()
	taken := blocker.Addr().(*net.TCPAddr).Port
	g := startSupervisor(t, routesYAML(), func(port int) string {
		return strings.Replace(perCoreConfig(port, 1), "  enable_admin:",
			fmt.Sprintf("    - ip: 127.0.0.1\n      port: %d\n  enable_admin:", taken), 1)
	}, 0, "--cpus", strconv.Itoa(cpus[0]))

	delayed := g.waitLog(`msg="worker restart delayed"`, 4, 10*time.Second)
	var got []string
	for _, l := range delayed {
		got = append(got, logField(l, "after"))
	}
	if diff := cmp.Diff([]string{"100ms", "200ms", "400ms", "800ms"}, got); diff != "" {
		t.Errorf("restart delays (-want +got):\n%s", diff)
	}
	died := g.waitLog(`msg="worker died"`, 4, time.Second)
	for _, l := range died {
		if why := logField(l, "why"); why != "exit status 1" {
			t.Errorf("worker died why=%q, want exit status 1", why)
		}
		if e := logField(l, "err"); !strings.Contains(e, "address already in use") {
			t.Errorf("worker died err=%q, want the cause (address already in use)", e)
		}
	}
	select {
	case <-g.done:
		t.Fatalf("the supervisor exited with its worker")
	default:
	}

	blocker.Close()
	g.waitLog(`msg="worker respawned"`, 1, 5*time.Second)
	n := len(strings.Split(g.out.String(), `msg="worker died"`)) - 1
	t.Logf("the worker died %d times before its port was freed; delays %v", n, got)
	c := dialGateway(t, g.gateway)
	if status, _, err := exchange(c, bufio.NewReader(c), "/none", false); err != nil || status != 404 {
		t.Errorf("after recovery: status %d, %v; want 404", status, err)
	}
}

// TestPerCoreQuit: SIGQUIT stops at once, a request in flight included, and
// leaves no worker behind.
func TestPerCoreQuit(t *testing.T) {
	cpus := requirePerCore(t)
	release := make(chan struct{})
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-release:
		case <-time.After(3 * time.Second):
		}
		_, _ = io.WriteString(w, "late")
	})
	t.Cleanup(func() { close(release) })
	g := startSupervisor(t, routesYAML(obj{"uri": "/slow", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string { return perCoreConfig(port, 2) }, 2, "--cpus", cpuList(cpus))
	ws := waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	c := dialGateway(t, g.gateway)
	if _, err := io.WriteString(c, "GET /slow HTTP/1.1\r\nHost: q\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(100 * time.Millisecond)
	g.stopped.Store(true)
	sent := time.Now()
	if err := g.cmd.Process.Signal(syscall.SIGQUIT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.done:
	case <-time.After(2 * time.Second):
		t.Fatal("the supervisor did not exit within 2 s of SIGQUIT")
	}
	t.Logf("SIGQUIT: supervisor gone in %v", time.Since(sent).Round(time.Millisecond))
	if n, err := c.Read(make([]byte, 1)); n > 0 || err == nil {
		t.Errorf("the request in flight got an answer after SIGQUIT")
	}
	eventually(t, 2*time.Second, func() error {
		for _, w := range ws {
			b, err := os.ReadFile("/proc/" + strconv.Itoa(w.pid) + "/stat")
			if err == nil && !strings.Contains(string(b), ") Z ") {
				return fmt.Errorf("worker %d (pid %d) still runs", w.id, w.pid)
			}
		}
		return nil
	})
}

// TestPerCoreSIGHUPRollsWorkers: a config.yaml setting other than
// worker_processes changes on SIGHUP by replacing each worker (the new one
// joins the slot, the old one drains): the new setting shows, and load
// running across the swap sees no error.
func TestPerCoreSIGHUPRollsWorkers(t *testing.T) {
	cpus := requirePerCore(t)
	up := textUpstream(t, strings.Repeat("s", 512))
	g := startSupervisor(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string { return perCoreConfig(port, 2) }, 2, "--cpus", cpuList(cpus))
	pid := g.cmd.Process.Pid
	before := waitWorkers(t, pid, 2, 5*time.Second)
	server := func() string {
		resp, err := http.Get(g.url("/hello"))
		if err != nil {
			return err.Error()
		}
		resp.Body.Close()
		return resp.Header.Get("Server")
	}
	if got := server(); got != "APISIX/"+spec.CompatVersion {
		t.Fatalf("Server before = %q", got)
	}

	load := startNewConnLoad(g.Addr(), "/hello", 3, false)
	time.Sleep(300 * time.Millisecond)
	cfg := strings.Replace(perCoreConfig(g.port, 2), "  enable_admin: false\n", "  enable_admin: false\n  enable_server_tokens: false\n", 1)
	writeFile(t, filepath.Join(g.dir, "config.yaml"), cfg)
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker replaced"`, 2, 10*time.Second)
	g.waitLog(`msg="replaced worker exited"`, 2, 10*time.Second)
	time.Sleep(300 * time.Millisecond)
	res := load.Finish()

	if got := server(); got != "APISIX" {
		t.Errorf("Server after SIGHUP = %q, want APISIX", got)
	}
	after := waitWorkers(t, pid, 2, 5*time.Second)
	for _, w := range after {
		checkPinned(t, w)
		for _, b := range before {
			if w.pid == b.pid {
				t.Errorf("worker %d (pid %d) was not replaced", w.id, w.pid)
			}
		}
	}
	ok := 0
	for _, o := range res {
		if o.Err == nil && o.Status == 200 {
			ok++
			continue
		}
		t.Errorf("connection %d (port %d) across the roll: status %d, %v", o.Seq, o.Port, o.Status, o.Err)
	}
	t.Logf("rolling restart under load: %d exchanges, %d ok", len(res), ok)
	if ok == 0 {
		t.Error("no load got through")
	}
}

// TestPerCoreSIGHUPBurst: SIGHUPs that come faster than a worker starts
// (config.yaml changing at each) start one process at a time per slot: a
// slot whose new process is still starting is replaced once it is ready,
// instead of gaining a process per reload that competes for the slot's CPU
// with the others and leaves the old process serving alone until the
// reloads stop. The last config.yaml is what serves in the end.
func TestPerCoreSIGHUPBurst(t *testing.T) {
	cpus := requirePerCore(t)
	up := textUpstream(t, "burst")
	g := startSupervisor(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string { return perCoreConfig(port, 2) }, 2, "--cpus", cpuList(cpus))
	pid := g.cmd.Process.Pid
	waitWorkers(t, pid, 2, 5*time.Second)
	cfgPath := filepath.Join(g.dir, "config.yaml")
	tokensOff := strings.Replace(perCoreConfig(g.port, 2), "  enable_admin: false\n", "  enable_admin: false\n  enable_server_tokens: false\n", 1)
	keepAlive := strings.Replace(perCoreConfig(g.port, 2), "nginx_config:\n", "nginx_config:\n  http:\n    keepalive_timeout: 61s\n", 1)

	// The worker processes of each slot are listed between the signals
	// and until the burst has settled, each list with the time it was
	// complete; which of them were still starting is told afterwards, from
	// the supervisor's log.
	type listing struct {
		at   time.Time
		pids map[int][]int // slot -> its processes
	}
	var listings []listing
	sample := func() {
		l := listing{pids: map[int][]int{}}
		for _, w := range workerProcs(t, pid) {
			l.pids[w.id] = append(l.pids[w.id], w.pid)
		}
		l.at = time.Now()
		listings = append(listings, l)
	}
	const reloads = 30
	for i := range reloads {
		cfg := keepAlive
		if i%2 == 1 {
			cfg = tokensOff // the last one: i = reloads-1
		}
		writeFile(t, cfgPath, cfg)
		if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		sample()
		time.Sleep(5 * time.Millisecond)
	}
	eventually(t, 15*time.Second, func() error {
		sample()
		resp, err := http.Get(g.url("/hello"))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if got := resp.Header.Get("Server"); got != "APISIX" {
			return fmt.Errorf("Server %q, want APISIX (the last config.yaml)", got)
		}
		if ws := workerProcs(t, pid); len(ws) != 2 {
			return fmt.Errorf("%d worker processes, want 2", len(ws))
		}
		return nil
	})
	replaced := len(g.waitLog(`msg="worker replaced"`, 1, time.Second))
	// A process is ready from the supervisor's line saying so, which it
	// logs before it starts the slot's next process: a process listed
	// beside its successor was ready before the listing was complete.
	// The line's time is cut to the millisecond, never later than the
	// moment it stands for.
	readyAt := map[int]time.Time{}
	for _, line := range g.waitLog(`msg="worker (ready|replaced|respawned)"`, 2, time.Second) {
		at, err := time.Parse(time.RFC3339Nano, logField(line, "time"))
		p, perr := strconv.Atoi(logField(line, "pid"))
		if err != nil || perr != nil {
			t.Fatalf("log line without time or pid: %s", line)
		}
		readyAt[p] = at
	}
	// Per slot: the process serving, at most one starting, and those it
	// replaced, draining (a replaced process lives until its connections
	// are closed and its process has exited, which can outlast the start
	// of the next one: with starts quicker than that, two or more are seen
	// at once; they are all gone in the end, as checked above). Before a
	// slot started one process at a time, each SIGHUP added a starting
	// process that never got ready: 31 per slot after 30 SIGHUPs.
	most, mostStarting, told, sawStarting := map[int]int{}, map[int]int{}, map[int]bool{}, false
	for _, l := range listings {
		for id, pids := range l.pids {
			var starting []int
			for _, p := range pids {
				if at, ok := readyAt[p]; !ok || !at.Before(l.at) {
					starting = append(starting, p)
				}
			}
			most[id] = max(most[id], len(pids))
			mostStarting[id] = max(mostStarting[id], len(starting))
			sawStarting = sawStarting || len(starting) > 0
			if len(starting) > 1 && !told[id] {
				told[id] = true // the first time; the most are logged below
				t.Errorf("at %s slot %d had %d processes starting at once (%v of %v), want at most 1",
					l.at.Format("15:04:05.000000"), id, len(starting), starting, pids)
			}
		}
	}
	t.Logf("%d SIGHUPs: %d replacements; most processes at once per slot: %v, of them starting: %v",
		reloads, replaced, most, mostStarting)
	if !sawStarting {
		t.Error("no process was seen starting: the SIGHUPs did not come faster than a worker starts")
	}
	if replaced >= 2*reloads {
		t.Errorf("%d replacements for %d SIGHUPs: a slot was replaced at every one", replaced, reloads)
	}
	for _, w := range waitWorkers(t, pid, 2, time.Second) {
		checkPinned(t, w)
	}
}

// TestPerCoreRollWithoutBinary: a reload whose new workers cannot start
// (the binary gone, as in the middle of an upgrade) leaves the old
// workers serving, and the restart path replaces them once it is back.
func TestPerCoreRollWithoutBinary(t *testing.T) {
	cpus := requirePerCore(t)
	exe := filepath.Join(t.TempDir(), "coregate")
	b, err := os.ReadFile(binPath)
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, exe, string(b))
	if err := os.Chmod(exe, 0o755); err != nil {
		t.Fatal(err)
	}
	saved := binPath
	binPath = exe // the supervisor starts its workers from its own path
	up := textUpstream(t, "upgrade")
	g := startSupervisor(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string { return perCoreConfig(port, 2) }, 2, "--cpus", cpuList(cpus))
	binPath = saved
	pid := g.cmd.Process.Pid
	before := waitWorkers(t, pid, 2, 5*time.Second)
	server := func() (int, string) {
		resp, err := http.Get(g.url("/hello"))
		if err != nil {
			return 0, err.Error()
		}
		resp.Body.Close()
		return resp.StatusCode, resp.Header.Get("Server")
	}

	if err := os.Rename(exe, exe+".away"); err != nil {
		t.Fatal(err)
	}
	cfg := strings.Replace(perCoreConfig(g.port, 2), "  enable_admin: false\n", "  enable_admin: false\n  enable_server_tokens: false\n", 1)
	writeFile(t, filepath.Join(g.dir, "config.yaml"), cfg)
	if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker: start"`, 2, 5*time.Second) // both slots' new processes failed
	time.Sleep(300 * time.Millisecond)
	if status, srv := server(); status != 200 || srv != "APISIX/"+spec.CompatVersion {
		t.Errorf("with the binary gone: %d, Server %q; want the old workers serving", status, srv)
	}
	if err := os.Rename(exe+".away", exe); err != nil {
		t.Fatal(err)
	}
	g.waitLog(`msg="worker replaced"`, 2, 10*time.Second)
	eventually(t, 5*time.Second, func() error {
		if status, srv := server(); status != 200 || srv != "APISIX" {
			return fmt.Errorf("%d, Server %q, want the new config.yaml's APISIX", status, srv)
		}
		return nil
	})
	after := waitWorkers(t, pid, 2, 5*time.Second)
	for _, w := range after {
		for _, b := range before {
			if w.pid == b.pid {
				t.Errorf("worker %d (pid %d) was not replaced", w.id, w.pid)
			}
		}
	}
}
