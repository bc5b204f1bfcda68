package main

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// The limit-count plugin end to end: the workers of one node share its
// counters (policy local), so exactly the limit passes per window however
// many workers serve the clients; counters survive a worker's restart and
// a reload that leaves the plugin alone.

// limitRoutes is apisix.yaml with /limited limited to count per 300 s
// (by client address: every client of the test is 127.0.0.1) and /other
// unlimited, both to up.
func limitRoutes(up string, count int) string {
	return routesYAML(
		obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up), nil),
			"plugins": obj{"limit-count": obj{"count": count, "time_window": 300, "rejected_msg": "limited"}}},
		obj{"id": "other", "uri": "/other", "upstream": upstreamOf(nodes(up), nil)},
	)
}

// limitAnswer is one answer, read off a kept-alive connection.
type limitAnswer struct {
	status                  int
	limit, remaining, reset string
	body                    string
}

// limitConn is one client connection and its reader.
type limitConn struct {
	c  net.Conn
	br *bufio.Reader
}

func (lc *limitConn) get(path string) (limitAnswer, error) {
	_ = lc.c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(lc.c, "GET "+path+" HTTP/1.1\r\nHost: limit.test\r\n\r\n"); err != nil {
		return limitAnswer{}, err
	}
	resp, err := http.ReadResponse(lc.br, nil)
	if err != nil {
		return limitAnswer{}, err
	}
	b, err := io.ReadAll(resp.Body)
	_ = resp.Body.Close()
	if err != nil {
		return limitAnswer{}, err
	}
	return limitAnswer{status: resp.StatusCode, limit: resp.Header.Get("X-RateLimit-Limit"),
		remaining: resp.Header.Get("X-RateLimit-Remaining"), reset: resp.Header.Get("X-RateLimit-Reset"), body: string(b)}, nil
}

// dialLimit opens n connections to addr, closed when the test ends.
func dialLimit(t *testing.T, addr string, n int) []*limitConn {
	t.Helper()
	var conns []*limitConn
	for _, c := range e2e.DialN(t, addr, n, 2*time.Second) {
		conns = append(conns, &limitConn{c: c, br: bufio.NewReader(c)})
	}
	return conns
}

// dialSpread opens connections until every worker holds perWorker of them
// at least (bounded), and returns them all.
func dialSpread(t *testing.T, g *supGateway, workers, perWorker int) []*limitConn {
	t.Helper()
	ws := waitWorkers(t, g.cmd.Process.Pid, workers, 10*time.Second)
	pids := make([]int, len(ws))
	for i, w := range ws {
		pids[i] = w.pid
	}
	var conns []*limitConn
	var ports []int
	for round := 0; round < 20; round++ {
		for _, lc := range dialLimit(t, g.Addr(), workers*perWorker) {
			conns = append(conns, lc)
			ports = append(ports, localPort(lc.c))
		}
		by := countBy(acceptedBy(t, g.port, ports, pids, 5*time.Second))
		enough := len(by) == workers
		for _, n := range by {
			enough = enough && n >= perWorker
		}
		if enough {
			t.Logf("%d connections over %d workers: %v", len(conns), workers, by)
			return conns
		}
	}
	t.Fatalf("could not spread %d connections over %d workers", len(conns), workers)
	return nil
}

// hammer sends requests to path over every connection at once until total
// were sent, and counts the answers by status. Every answer must be a 200
// or the rejection (503, Remaining 0, the rejected_msg body).
func hammer(t *testing.T, conns []*limitConn, path string, total int, limit string) (passed, rejected int) {
	t.Helper()
	return sendAll(t, conns, path, total, func(a limitAnswer) (bool, error) {
		switch {
		case a.limit != limit:
			return false, fmt.Errorf("X-RateLimit-Limit %q, want %q", a.limit, limit)
		case a.status == 200:
			return true, nil
		case a.status == 503 && a.remaining == "0" && a.body == `{"error_msg":"limited"}`+"\n":
			return false, nil
		}
		return false, fmt.Errorf("unexpected answer %+v", a)
	})
}

// sendAll sends requests for path over every connection at once until
// total were sent, and counts the answers classify passes and those it
// says are the rejection expected; the first error, a failed exchange or
// one classify returns, fails the test once every connection stopped.
func sendAll(t *testing.T, conns []*limitConn, path string, total int, classify func(limitAnswer) (passed bool, err error)) (passed, rejected int) {
	t.Helper()
	var sent, ok, no atomic.Int64
	var wg sync.WaitGroup
	var mu sync.Mutex
	var failure error
	for _, lc := range conns {
		wg.Go(func() {
			for sent.Add(1) <= int64(total) {
				a, err := lc.get(path)
				var pass bool
				if err == nil {
					pass, err = classify(a)
				}
				switch {
				case err != nil:
				case pass:
					ok.Add(1)
					continue
				default:
					no.Add(1)
					continue
				}
				mu.Lock()
				if failure == nil {
					failure = err
				}
				mu.Unlock()
				return
			}
		})
	}
	wg.Wait()
	if failure != nil {
		t.Fatal(failure)
	}
	return int(ok.Load()), int(no.Load())
}

func TestLimitCountExactAcrossWorkers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateways with several workers")
	}
	up := textUpstream(t, "ok")
	for _, workers := range []int{2, 4} {
		t.Run(strconv.Itoa(workers)+" workers", func(t *testing.T) {
			const limit = 150
			g := startSupervisor(t, limitRoutes(up.Addr(), limit), func(port int) string { return perCoreConfig(port, workers) }, workers)
			conns := dialSpread(t, g, workers, 4)
			first, err := conns[0].get("/limited")
			if err != nil {
				t.Fatal(err)
			}
			if first.status != 200 || first.limit != strconv.Itoa(limit) || first.remaining != strconv.Itoa(limit-1) {
				t.Fatalf("first answer: %+v", first)
			}
			passed, rejected := hammer(t, conns, "/limited", 3*limit, strconv.Itoa(limit))
			if passed+1 != limit || rejected != 3*limit-passed {
				t.Fatalf("%d workers: %d of %d requests passed, %d rejected; want exactly %d to pass",
					workers, passed+1, 3*limit+1, rejected, limit)
			}
			if workers != 2 {
				return
			}

			// A worker's restart: the counters are the supervisor's.
			ws := waitWorkers(t, g.cmd.Process.Pid, workers, 5*time.Second)
			if err := syscall.Kill(ws[0].pid, syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			g.waitLog(`msg="worker respawned"`, 1, 10*time.Second)
			conns = dialSpread(t, g, workers, 2)
			if p, _ := hammer(t, conns, "/limited", 4*workers, strconv.Itoa(limit)); p != 0 {
				t.Fatalf("after a worker's restart %d requests passed a spent limit", p)
			}

			// A reload that leaves the plugin alone keeps the counter.
			g.rewrite(routesYAML(
				obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up.Addr()), nil),
					"plugins": obj{"limit-count": obj{"count": limit, "time_window": 300, "rejected_msg": "limited"}}},
				obj{"id": "other", "uri": "/other", "upstream": upstreamOf(nodes(up.Addr()), nil)},
				obj{"id": "new", "uri": "/new", "upstream": upstreamOf(nodes(up.Addr()), nil)},
			))
			eventually(t, 15*time.Second, func() error {
				a, err := conns[0].get("/new")
				if err == nil && a.status != 200 {
					err = fmt.Errorf("/new: %d", a.status)
				}
				return err
			})
			if p, _ := hammer(t, conns, "/limited", 4*workers, strconv.Itoa(limit)); p != 0 {
				t.Fatalf("after a reload that left the plugin alone %d requests passed a spent limit", p)
			}

			// A changed configuration starts a new counter.
			// Every worker swaps its snapshot on its own: each connection
			// (all workers have some) waits for the new limit, and the
			// requests that saw it count against it.
			g.rewrite(limitRoutes(up.Addr(), limit+1))
			seen := 0
			for i, c := range conns {
				eventually(t, 15*time.Second, func() error {
					a, err := c.get("/limited")
					if err == nil && a.limit != strconv.Itoa(limit+1) {
						err = fmt.Errorf("connection %d: X-RateLimit-Limit %q", i, a.limit)
					}
					return err
				})
				seen++
			}
			passed, _ = hammer(t, conns, "/limited", 2*(limit+1), strconv.Itoa(limit+1))
			if passed+seen != limit+1 {
				t.Fatalf("after the change: %d passed, want %d", passed+seen, limit+1)
			}
		})
	}
}

// TestLimitCountFullTable: a counter table with room for one counter
// (--counters 1) counts the first user; a second user's request is a
// limiter failure, 500 with APISIX's body, or passes on a route with
// allow_degradation.
func TestLimitCountFullTable(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	conf := func(degrade bool) obj {
		return obj{"count": 5, "time_window": 300, "key": "http_x_user", "allow_degradation": degrade}
	}
	routes := routesYAML(
		obj{"id": "strict", "uri": "/strict", "upstream": upstreamOf(nodes(up.Addr()), nil), "plugins": obj{"limit-count": conf(false)}},
		obj{"id": "lenient", "uri": "/lenient", "upstream": upstreamOf(nodes(up.Addr()), nil), "plugins": obj{"limit-count": conf(true)}},
	)
	g := startSupervisor(t, routes, func(port int) string { return perCoreConfig(port, 1) }, 1, "--counters", "1")
	c := newClient(t)
	user := func(name string) map[string]string { return map[string]string{"X-User": name} }
	first := do(t, c, "GET", g.url("/strict"), "", user("ann"), nil)
	if first.status != 200 || first.header.Get("X-RateLimit-Remaining") != "4" {
		t.Fatalf("ann: %d %v", first.status, first.header)
	}
	full := do(t, c, "GET", g.url("/strict"), "", user("bob"), nil)
	if full.status != 500 || full.body != `{"error_msg":"failed to limit count"}`+"\n" || full.header.Get("X-RateLimit-Limit") != "" {
		t.Fatalf("bob on a full table: %d %q %v", full.status, full.body, full.header)
	}
	if r := do(t, c, "GET", g.url("/lenient"), "", user("bob"), nil); r.status != 200 || r.body != "ok" {
		t.Fatalf("bob on a full table, degraded: %d %q", r.status, r.body)
	}
	// ann's counter is still there.
	if r := do(t, c, "GET", g.url("/strict"), "", user("ann"), nil); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != "3" {
		t.Fatalf("ann again: %d %v", r.status, r.header)
	}
}
