package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"coregate/bpf"
	"coregate/internal/e2e"
	"coregate/worker/control"
)

// TestPerCoreStoppedWorker: a worker stopped with SIGSTOP is taken out of
// the socket selector once it misses its heartbeats, so that new
// connections go to the other worker at once; its state shows in the log
// and the metrics. What was already in its accept queue waits, and is
// served once it runs again (SIGCONT), when it speaks again it is back in
// the selector and takes new connections.
func TestPerCoreStoppedWorker(t *testing.T) {
	cpus := requirePerCore(t)
	up := textUpstream(t, "ok")
	mport := freePort(t)
	g := startSupervisor(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		exportConfig(2, mport), 2, "--cpus", cpuList(cpus))
	ws := waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	victim, survivor := ws[0], ws[1]
	if victim.id != 0 {
		victim, survivor = survivor, victim
	}
	metrics := scraper(t, fmt.Sprintf("http://127.0.0.1:%d/m", mport))
	eventually(t, 5*time.Second, func() error {
		return wantWorkerState(metrics(), "0", "running")
	})

	// Busy is not stalled: under as much load as the clients can make,
	// both workers keep beating.
	load := startNewConnLoad(g.Addr(), "/hello", 8, false)
	time.Sleep(2 * time.Second)
	served := 0
	for _, o := range load.Finish() {
		if o.Err == nil && o.Status == 200 {
			served++
		}
	}
	if strings.Contains(g.out.String(), "worker stalled") {
		t.Errorf("a worker under load (%d exchanges) was taken for stalled:\n%s", served, g.out.String())
	}
	t.Logf("busy phase: %d exchanges", served)

	stopped := time.Now()
	if err := syscall.Kill(victim.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = syscall.Kill(victim.pid, syscall.SIGCONT)
		}
	})
	e2e.WaitStopped(t, victim.pid)
	// Connections opened at once land partly in the stopped worker's
	// accept queue, before anything can notice: they wait.
	early := startExchanges(g.Addr(), 16, 30*time.Second)

	// From 1.5 s after the stop, every new connection is served promptly,
	// by the other worker: the stopped one left the selector within about
	// a second.
	time.Sleep(time.Until(stopped.Add(1500 * time.Millisecond)))
	var ports []int
	for i := range 40 {
		start := time.Now()
		c, err := net.DialTimeout("tcp", g.Addr(), time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		defer c.Close()
		ports = append(ports, localPort(c))
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		status, _, err := exchange(c, bufio.NewReader(c), "/hello", false)
		if err != nil || status != 200 {
			t.Errorf("connection %d with worker 0 stopped: status %d, %v after %v", i, status, err, time.Since(start))
		}
	}
	lines := g.waitLog(`level=WARN msg="worker stalled.*" .*id=0 `, 1, time.Second)
	t.Logf("%s", lines[0])
	if err := wantWorkerState(metrics(), "0", "stalled"); err != nil {
		t.Error(err)
	}
	if err := wantWorkerState(metrics(), "1", "running"); err != nil {
		t.Error(err)
	}
	if owners := countBy(acceptedBy(t, g.port, ports, []int{victim.pid, survivor.pid}, 2*time.Second)); owners[survivor.pid] != len(ports) {
		t.Errorf("with worker 0 stopped, connections held by pid: %v, want all %d by %d", owners, len(ports), survivor.pid)
	}

	// Running again, it is back in the selector and serves what waited.
	if err := syscall.Kill(victim.pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed = true
	back := g.waitLog(`level=WARN msg="worker resumed.*" .*id=0 `, 1, 5*time.Second)
	t.Logf("%s", back[0])
	eventually(t, 5*time.Second, func() error { return wantWorkerState(metrics(), "0", "running") })
	for i, err := range early.wait() {
		if err != nil {
			t.Errorf("connection %d opened as the worker stopped: %v", i, err)
		}
	}
	conns := make([]net.Conn, 0, 40)
	defer func() { closeAll(conns) }()
	ports = ports[:0]
	for range 40 {
		c, err := net.DialTimeout("tcp", g.Addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		ports = append(ports, localPort(c))
	}
	if owners := countBy(acceptedBy(t, g.port, ports, []int{victim.pid, survivor.pid}, 5*time.Second)); owners[victim.pid] == 0 {
		t.Errorf("after SIGCONT, connections held by pid: %v: worker 0 (pid %d) takes none", owners, victim.pid)
	}
	if now := workerProcs(t, g.cmd.Process.Pid); len(now) != 2 || (now[0].pid != victim.pid && now[1].pid != victim.pid) {
		t.Errorf("workers %v: the stopped worker (pid %d) was replaced, want it kept", now, victim.pid)
	}
}

// TestPerCoreStoppedWorkerReplaced: a worker that stays stopped past the
// restart threshold (--stall-restart) is killed and replaced through the
// usual restart path; the connections in its accept queue move to the
// live worker when it is killed, and are served.
func TestPerCoreStoppedWorkerReplaced(t *testing.T) {
	cpus := requirePerCore(t)
	up := textUpstream(t, "ok")
	mport := freePort(t)
	g := startSupervisor(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		exportConfig(2, mport), 2, "--cpus", cpuList(cpus), "--stall-restart", "3s")
	ws := waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	victim, survivor := ws[0], ws[1]
	if victim.id != 0 {
		victim, survivor = survivor, victim
	}
	metrics := scraper(t, fmt.Sprintf("http://127.0.0.1:%d/m", mport))

	stopped := time.Now()
	if err := syscall.Kill(victim.pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = syscall.Kill(victim.pid, syscall.SIGCONT) })
	e2e.WaitStopped(t, victim.pid)
	early := startExchanges(g.Addr(), 16, 30*time.Second)

	g.waitLog(`level=WARN msg="worker stalled.*" .*id=0 `, 1, 3*time.Second)
	kill := g.waitLog(`msg="worker silent too long.*" .*id=0 `, 1, 10*time.Second)
	t.Logf("%s (after %v)", kill[0], time.Since(stopped).Round(time.Millisecond))
	died := g.waitLog(`msg="worker died".* id=0 `, 1, 5*time.Second)
	if why := logField(died[0], "why"); why != "signal: killed" {
		t.Errorf("worker died why=%q, want %q", why, "signal: killed")
	}
	g.waitLog(`msg="worker respawned".* id=0 `, 1, 10*time.Second)
	// The silence counts from the last beat, which came at most one
	// beat interval before the stop.
	if took := time.Since(stopped); took < 3*time.Second-control.StatsEvery {
		t.Errorf("replaced after %v, before the 3 s threshold", took)
	}
	for i, err := range early.wait() {
		if err != nil {
			t.Errorf("connection %d opened as the worker stopped: %v", i, err)
		}
	}

	ws = waitWorkers(t, g.cmd.Process.Pid, 2, 5*time.Second)
	var fresh workerProc
	for _, w := range ws {
		if w.pid != survivor.pid {
			fresh = w
		}
	}
	if fresh.pid == victim.pid || fresh.id != 0 {
		t.Fatalf("after the restart: workers %v, want a new id 0 beside %v", ws, survivor)
	}
	eventually(t, 5*time.Second, func() error { return wantWorkerState(metrics(), "0", "running") })
	text := metrics()
	if !strings.Contains(text, "\ncoregate_worker_restarts_total 1\n") || !strings.Contains(text, "\ncoregate_worker_stalls_total 1\n") {
		t.Errorf("after the replacement, metrics lack one restart and one stall:\n%s", text)
	}
	// The new worker takes its share again.
	conns := make([]net.Conn, 0, 40)
	defer func() { closeAll(conns) }()
	var ports []int
	for range 40 {
		c, err := net.DialTimeout("tcp", g.Addr(), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		conns = append(conns, c)
		ports = append(ports, localPort(c))
	}
	if owners := countBy(acceptedBy(t, g.port, ports, []int{fresh.pid, survivor.pid}, 5*time.Second)); owners[fresh.pid] == 0 {
		t.Errorf("connections held by pid: %v: the new worker 0 (pid %d) takes none", owners, fresh.pid)
	}
}

// scraper returns a function that fetches the export server's text.
func scraper(t *testing.T, url string) func() string {
	return func() string {
		t.Helper()
		c := http.Client{Timeout: 5 * time.Second}
		resp, err := c.Get(url)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return string(b)
	}
}

// wantWorkerState checks that the metrics say worker id is in state, and
// in no other.
func wantWorkerState(text, id, state string) error {
	rx := regexp.MustCompile(`(?m)^coregate_worker_state\{state="([a-z]+)",worker="` + id + `"\} ([01])$`)
	var in []string
	for _, m := range rx.FindAllStringSubmatch(text, -1) {
		if m[2] == "1" {
			in = append(in, m[1])
		}
	}
	if len(in) != 1 || in[0] != state {
		return fmt.Errorf("worker %s in states %v, want %s:\n%s", id, in, state, text)
	}
	return nil
}

// exchanges is a batch of connections, each opened at once and sending
// one request, whose answers are awaited together.
type exchanges struct {
	wg   sync.WaitGroup
	errs []error
}

// startExchanges opens n connections to addr now (each must be accepted
// into a queue before it returns) and awaits each one's answer in the
// background, for at most timeout.
func startExchanges(addr string, n int, timeout time.Duration) *exchanges {
	e := &exchanges{errs: make([]error, n)}
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			e.errs[i] = err
			continue
		}
		e.wg.Add(1)
		go func() {
			defer e.wg.Done()
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(timeout))
			status, _, err := exchange(c, bufio.NewReader(c), "/hello", true)
			if err == nil && status != 200 {
				err = fmt.Errorf("status %d", status)
			}
			e.errs[i] = err
		}()
	}
	return e
}

// wait returns each connection's outcome.
func (e *exchanges) wait() []error {
	e.wg.Wait()
	return e.errs
}

// TestStoppedOnlyWorkerQueues: the only worker, stopped, is taken out of
// the socket selector like any stalled one, yet a connection made
// meanwhile is not refused: with no slot to select, the program leaves
// the choice to the kernel's hash over the listeners, the stopped
// worker's, so the connection completes its handshake, waits in that
// worker's accept queue, and its request is answered as soon as the
// worker runs again.
func TestStoppedOnlyWorkerQueues(t *testing.T) {
	t.Parallel()
	if kind, err := bpf.Probe(); kind != bpf.KindEBPF {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the eBPF selector is not available: %v (%v)", kind, err)
		}
		t.Skipf("the eBPF selector is not available: %v (%v)", kind, err)
	}
	up := textUpstream(t, "ok")
	g := startGateway(t, routesYAML(obj{"uri": "/hello", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	ws := waitWorkers(t, g.cmd.Process.Pid, 1, 5*time.Second)
	if err := syscall.Kill(ws[0].pid, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resumed := false
	t.Cleanup(func() {
		if !resumed {
			_ = syscall.Kill(ws[0].pid, syscall.SIGCONT)
		}
	})
	g.waitLog(`msg="worker stalled: out of the selector"`, 1, 5*time.Second)
	// Under the 1 s after which a dropped SYN is sent again.
	c, err := net.DialTimeout("tcp", g.Addr(), 900*time.Millisecond)
	if err != nil {
		t.Fatalf("a connection to the gateway whose only worker is stopped: %v", err)
	}
	defer c.Close()
	if _, err := io.WriteString(c, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	time.Sleep(300 * time.Millisecond)
	cont := time.Now()
	resumed = true
	if err := syscall.Kill(ws[0].pid, syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("no answer once the worker runs again: %v", err)
	}
	resp.Body.Close()
	t.Logf("answered %v after SIGCONT", time.Since(cont).Round(time.Millisecond))
	if resp.StatusCode != 200 {
		t.Fatalf("status %d", resp.StatusCode)
	}
	g.waitLog(`msg="worker resumed: back in the selector"`, 1, 5*time.Second)
}
