package main

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// TestPerCoreKeepaliveRebalance: kept-alive client connections do not stay
// on one worker for good. A worker is killed while its supervisor is
// stopped, so that every client connects to the other worker; once the
// killed one is back, keepalive_requests closes each connection after its
// n-th request, the clients reconnect, and the selector spreads the new
// connections over both workers again.
func TestPerCoreKeepaliveRebalance(t *testing.T) {
	cpus := requirePerCore(t)
	up := textUpstream(t, "ok")
	const perConn, clients, rounds = 20, 16, 10
	g := startSupervisor(t, routesYAML(obj{"uri": "/ka", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		func(port int) string {
			return strings.Replace(perCoreConfig(port, 2), "  error_log_level: info\n",
				"  error_log_level: info\n  http:\n    keepalive_requests: "+strconv.Itoa(perConn)+"\n", 1)
		}, 2, "--cpus", cpuList(cpus))
	sup := g.cmd.Process.Pid
	ws := waitWorkers(t, sup, 2, 5*time.Second)
	victim, survivor := ws[0], ws[1]

	// The supervisor stopped, the killed worker is not replaced; once it
	// has exited whole (a zombie, its listener closed) every new
	// connection goes to the survivor.
	if err := syscall.Kill(sup, syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := true
	resume := func() {
		if stopped {
			stopped = false
			if err := syscall.Kill(sup, syscall.SIGCONT); err != nil {
				t.Error(err)
			}
		}
	}
	t.Cleanup(resume) // before the gateway's own cleanup stops it
	if err := syscall.Kill(victim.pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !e2e.Exited(victim.pid) {
		if time.Now().After(deadline) {
			t.Fatalf("worker %d did not exit within 5 s of SIGKILL", victim.pid)
		}
		time.Sleep(5 * time.Millisecond)
	}

	type client struct {
		c      net.Conn
		br     *bufio.Reader
		served int // requests on c
	}
	dial := func() *client {
		c, err := net.DialTimeout("tcp", g.Addr(), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		return &client{c: c, br: bufio.NewReader(c)}
	}
	cls := make([]*client, clients)
	for i := range cls {
		cls[i] = dial()
	}
	t.Cleanup(func() {
		for _, cl := range cls {
			cl.c.Close()
		}
	})
	ports := func() []int {
		out := make([]int, len(cls))
		for i, cl := range cls {
			out[i] = localPort(cl.c)
		}
		return out
	}
	// request sends one request on cl, and on the connection's last
	// answer (Connection: close) checks that it came after exactly
	// perConn requests and opens a new connection.
	request := func(i int) {
		cl := cls[i]
		status, closed, err := exchange(cl.c, cl.br, "/ka", false)
		if err != nil || status != 200 {
			t.Fatalf("client %d, request %d on its connection: %d, %v", i, cl.served+1, status, err)
		}
		cl.served++
		if closed != (cl.served == perConn) {
			t.Fatalf("client %d: Connection: close %v on the connection's request %d (keepalive_requests %d)", i, closed, cl.served, perConn)
		}
		if closed {
			cl.c.Close()
			cls[i] = dial()
		}
	}
	for i := range cls {
		request(i)
	}
	if by := countBy(acceptedBy(t, g.port, ports(), []int{survivor.pid}, 5*time.Second)); by[survivor.pid] != clients {
		t.Fatalf("with one worker left, %d of %d connections on it", by[survivor.pid], clients)
	}

	resume()
	g.waitLog(`msg="worker respawned".* id=`+strconv.Itoa(victim.id)+` `, 1, 10*time.Second)
	ws = waitWorkers(t, sup, 2, 5*time.Second)
	fresh := ws[0]
	if fresh.pid == survivor.pid {
		fresh = ws[1]
	}
	if fresh.pid == victim.pid || fresh.pid == survivor.pid {
		t.Fatalf("after the restart: workers %v (victim %d, survivor %d)", ws, victim.pid, survivor.pid)
	}

	// Each round ends every connection (its perConn-th request) and opens
	// a new one; after each, where the new connections landed.
	onFresh, samples := 0, 0
	for r := range rounds {
		for i := range cls {
			for cls[i].served < perConn-1 {
				request(i)
			}
			request(i) // the last: cls[i] is a new connection now
		}
		for i := range cls {
			request(i) // accepted, and past its first answer
		}
		by := countBy(acceptedBy(t, g.port, ports(), []int{fresh.pid, survivor.pid}, 5*time.Second))
		t.Logf("round %d: %d of %d connections on the restarted worker", r+1, by[fresh.pid], clients)
		onFresh += by[fresh.pid]
		samples += clients
	}
	// The kernel's hash picks either worker with probability 1/2 for each
	// new connection: fewer than a quarter of 160 has probability < 1e-9.
	// Without the bound, all 160 stay on the survivor.
	if onFresh < samples/4 {
		t.Errorf("%d of %d new connections went to the restarted worker, want ≥ %d", onFresh, samples, samples/4)
	}
}
