package worker

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// The balancers with retries, retry_timeout, a route's timeout over its
// upstream's and keepalive_pool: each test runs once per upstream type,
// through a worker on real sockets.

// balancerTypes are the upstream types, each with the hash fields it
// needs: chash hashes the k argument.
var balancerTypes = []struct{ name, fields string }{
	{"roundrobin", `"type":"roundrobin"`},
	{"chash", `"type":"chash","hash_on":"vars","key":"arg_k"`},
	{"least_conn", `"type":"least_conn"`},
	{"ewma", `"type":"ewma"`},
}

// hangServer listens on loopback and accepts connections that it never
// answers, counting them; they are closed with the test.
func hangServer(t *testing.T) (addr string, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepted = new(atomic.Int32)
	var mu sync.Mutex
	var conns []net.Conn
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
		}
	}()
	t.Cleanup(func() {
		l.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range conns {
			c.Close()
		}
	})
	return l.Addr().String(), accepted
}

// getStatus gets url and returns the status, the body and the
// X-APISIX-Upstream-Status field.
func getStatus(t *testing.T, c *http.Client, url string) (int, string, string) {
	t.Helper()
	resp, err := c.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), resp.Header.Get("X-APISIX-Upstream-Status")
}

// TestBalancersRetryToLive: with two dead nodes and one live one, each
// balancer's retries take every request to the live node, whatever node
// it picked first; with retries 0 a request whose node is dead fails.
func TestBalancersRetryToLive(t *testing.T) {
	for _, bt := range balancerTypes {
		t.Run(bt.name, func(t *testing.T) {
			addrs, hits := idServers(t, 1, nil)
			nodes := fmt.Sprintf(`{"%s":1,"%s":1,"%s":1}`, unusedAddr(t), unusedAddr(t), addrs[0])
			w := startWorker(t, nil,
				`{"id":"1","uri":"/retry","upstream":{`+bt.fields+`,"nodes":`+nodes+`}}`,
				`{"id":"2","uri":"/once","upstream":{`+bt.fields+`,"retries":0,"nodes":`+nodes+`}}`,
			)
			base := "http://" + w.Addr().String()
			c := &http.Client{Timeout: 10 * time.Second}
			const n = 30
			for k := 0; k < n; k++ {
				if st, body, _ := getStatus(t, c, fmt.Sprintf("%s/retry?k=%d", base, k)); st != 200 || body != "0" {
					t.Fatalf("key %d: %d %q, want the live node's 200", k, st, body)
				}
			}
			if got := hits(0); got != n {
				t.Fatalf("the live node answered %d requests of %d", got, n)
			}
			failed := 0
			for k := 0; k < n; k++ {
				st, body, ups := getStatus(t, c, fmt.Sprintf("%s/once?k=%d", base, k))
				switch {
				case st == 502 && ups == "502":
					failed++
				case st != 200 || body != "0":
					t.Fatalf("retries 0, key %d: %d %q (upstream status %q)", k, st, body, ups)
				}
			}
			// Round robin takes the nodes in turn: two of three fail.
			if failed == 0 || bt.name == "roundrobin" && failed != 2*n/3 {
				t.Fatalf("retries 0: %d of %d requests failed", failed, n)
			}
			t.Logf("retries 0: %d of %d requests went to a dead node", failed, n)
		})
	}
}

// TestBalancersRetryTimeout: three nodes that never answer, read timeout
// 0.3 s. retries 2 makes three attempts, each on another node; a
// retry_timeout of 0.5 s lets the second begin (0.3 s in) but not the
// third (0.6 s in).
func TestBalancersRetryTimeout(t *testing.T) {
	for _, bt := range balancerTypes {
		t.Run(bt.name, func(t *testing.T) {
			var addrs []string
			var accepted []*atomic.Int32
			for i := 0; i < 3; i++ {
				a, n := hangServer(t)
				addrs = append(addrs, a)
				accepted = append(accepted, n)
			}
			nodes := fmt.Sprintf(`{"%s":1,"%s":1,"%s":1}`, addrs[0], addrs[1], addrs[2])
			const to = `"timeout":{"connect":1,"send":1,"read":0.3}`
			w := startWorker(t, nil,
				`{"id":"1","uri":"/all","upstream":{`+bt.fields+`,`+to+`,"retries":2,"nodes":`+nodes+`}}`,
				`{"id":"2","uri":"/bounded","upstream":{`+bt.fields+`,`+to+`,"retries":2,"retry_timeout":0.5,"nodes":`+nodes+`}}`,
			)
			base := "http://" + w.Addr().String()
			c := &http.Client{Timeout: 10 * time.Second}
			total := func() (sum int32, each []int32) {
				for _, n := range accepted {
					sum += n.Load()
					each = append(each, n.Load())
				}
				return sum, each
			}
			for _, tc := range []struct {
				path     string
				attempts int32
				ups      string
				min, max time.Duration
			}{
				{"/all", 3, "504, 504, 504", 850 * time.Millisecond, 3 * time.Second},
				{"/bounded", 2, "504, 504", 550 * time.Millisecond, 850 * time.Millisecond},
			} {
				before, eachBefore := total()
				start := time.Now()
				st, _, ups := getStatus(t, c, base+tc.path+"?k=1")
				took := time.Since(start)
				if st != 504 || ups != tc.ups {
					t.Fatalf("%s: %d, upstream status %q, want 504 and %q", tc.path, st, ups, tc.ups)
				}
				if took < tc.min || took > tc.max {
					t.Errorf("%s: answered in %v, want %v to %v", tc.path, took, tc.min, tc.max)
				}
				// Each attempt opened one connection, to a node not tried
				// before.
				after, each := total()
				if after-before != tc.attempts {
					t.Fatalf("%s: %d connections, want %d", tc.path, after-before, tc.attempts)
				}
				for i := range each {
					if each[i]-eachBefore[i] > 1 {
						t.Fatalf("%s: node %d tried %d times", tc.path, i, each[i]-eachBefore[i])
					}
				}
			}
		})
	}
}

// TestBalancersRouteTimeout: a route's timeout overrides its upstream's,
// both ways, whichever balancer picks the node. The origins answer after
// 0.4 s.
func TestBalancersRouteTimeout(t *testing.T) {
	for _, bt := range balancerTypes {
		t.Run(bt.name, func(t *testing.T) {
			addrs, hits := idServers(t, 2, []time.Duration{400 * time.Millisecond, 400 * time.Millisecond})
			nodes := fmt.Sprintf(`{"%s":1,"%s":1}`, addrs[0], addrs[1])
			w := startWorker(t, []string{
				`{"id":"short",` + bt.fields + `,"retries":0,"timeout":{"connect":1,"send":1,"read":0.15},"nodes":` + nodes + `}`,
				`{"id":"long",` + bt.fields + `,"retries":0,"timeout":{"connect":1,"send":1,"read":5},"nodes":` + nodes + `}`,
			},
				`{"id":"1","uri":"/short","upstream_id":"short"}`,
				`{"id":"2","uri":"/short-long","upstream_id":"short","timeout":{"connect":1,"send":1,"read":5}}`,
				`{"id":"3","uri":"/long","upstream_id":"long"}`,
				`{"id":"4","uri":"/long-short","upstream_id":"long","timeout":{"connect":1,"send":1,"read":0.15}}`,
			)
			base := "http://" + w.Addr().String()
			c := &http.Client{Timeout: 10 * time.Second}
			for _, tc := range []struct {
				path string
				want int
			}{{"/short", 504}, {"/short-long", 200}, {"/long", 200}, {"/long-short", 504}} {
				for k := 0; k < 2; k++ {
					before := hits(0) + hits(1)
					start := time.Now()
					st, _, _ := getStatus(t, c, fmt.Sprintf("%s%s?k=%d", base, tc.path, k))
					took := time.Since(start)
					if st != tc.want {
						t.Fatalf("%s key %d: %d after %v, want %d", tc.path, k, st, took, tc.want)
					}
					if tc.want == 504 && took > 390*time.Millisecond {
						t.Errorf("%s: 504 after %v, want the read timeout's 0.15 s", tc.path, took)
					}
					if got := hits(0) + hits(1) - before; got != 1 {
						t.Fatalf("%s: %d requests reached the origins, want 1", tc.path, got)
					}
				}
			}
		})
	}
}

// connServers starts n HTTP servers on loopback that answer their number;
// open(i) is how many connections to server i are open, opened(i) how
// many it accepted and most(i) the most requests one of them carried.
func connServers(t *testing.T, n int, delay time.Duration) (addrs []string, open, opened, most func(i int) int) {
	t.Helper()
	var mu sync.Mutex
	openN, openedN, mostN := make([]int, n), make([]int, n), make([]int, n)
	perConn := make([]map[string]int, n)
	for i := 0; i < n; i++ {
		i := i
		perConn[i] = map[string]int{}
		s := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			perConn[i][r.RemoteAddr]++
			if c := perConn[i][r.RemoteAddr]; c > mostN[i] {
				mostN[i] = c
			}
			mu.Unlock()
			time.Sleep(delay)
			fmt.Fprint(w, i)
		}))
		s.Config.ConnState = func(c net.Conn, st http.ConnState) {
			mu.Lock()
			defer mu.Unlock()
			switch st {
			case http.StateNew:
				openN[i]++
				openedN[i]++
			case http.StateClosed, http.StateHijacked:
				openN[i]--
			}
		}
		s.Start()
		t.Cleanup(s.Close)
		addrs = append(addrs, hostPort(s.URL))
	}
	read := func(v []int) func(int) int {
		return func(i int) int {
			mu.Lock()
			defer mu.Unlock()
			return v[i]
		}
	}
	return addrs, read(openN), read(openedN), read(mostN)
}

// TestBalancersKeepalivePool: an upstream's keepalive_pool holds with each
// balancer, and only for that upstream: no connection carries more than
// requests, no more than size stay idle per node after a burst, and the
// idle ones close after idle_timeout. A second upstream on the same
// origins without keepalive_pool keeps the worker's defaults.
func TestBalancersKeepalivePool(t *testing.T) {
	for _, bt := range balancerTypes {
		t.Run(bt.name, func(t *testing.T) {
			addrs, open, opened, most := connServers(t, 2, 20*time.Millisecond)
			nodes := fmt.Sprintf(`{"%s":1,"%s":1}`, addrs[0], addrs[1])
			w := startWorker(t, nil,
				`{"id":"1","uri":"/pool","upstream":{`+bt.fields+`,"keepalive_pool":{"size":1,"idle_timeout":0.5,"requests":3},"nodes":`+nodes+`}}`,
			)
			base := "http://" + w.Addr().String()
			c := &http.Client{Timeout: 10 * time.Second}

			// One at a time: a connection carries 3 requests at most.
			const n = 12
			for k := 0; k < n; k++ {
				if st, _, _ := getStatus(t, c, fmt.Sprintf("%s/pool?k=%d", base, k%4)); st != 200 {
					t.Fatalf("request %d: %d", k, st)
				}
			}
			if most(0) > 3 || most(1) > 3 {
				t.Fatalf("a connection carried %d and %d requests, want at most 3", most(0), most(1))
			}
			if most(0) < 3 && most(1) < 3 {
				t.Fatalf("no connection carried 3 requests (%d, %d): the pool was not used", most(0), most(1))
			}
			if got := opened(0) + opened(1); got < n/3 || got > n/3+2 {
				t.Fatalf("%d requests one at a time opened %d connections, want %d to %d", n, got, n/3, n/3+2)
			}

			// Eight at once: then one connection at most stays per node.
			var wg sync.WaitGroup
			for k := 0; k < 8; k++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					cl := &http.Client{Timeout: 10 * time.Second}
					if st, _, _ := getStatus(t, cl, fmt.Sprintf("%s/pool?k=%d", base, k)); st != 200 {
						t.Errorf("burst request %d: %d", k, st)
					}
				}()
			}
			wg.Wait()
			waitFor(t, 300*time.Millisecond, "1 connection at most open per node after the burst (size 1)",
				func() bool { return open(0) <= 1 && open(1) <= 1 })
			if open(0)+open(1) == 0 {
				t.Fatal("after the burst no connection stayed open")
			}
			// idle_timeout 0.5 s: the idle ones close.
			waitFor(t, 2*time.Second, "the idle connections closed (idle_timeout 0.5 s)",
				func() bool { return open(0)+open(1) == 0 })
		})
	}
}

// TestBalancersReleaseOnRetry: a failed attempt gives its node back before
// the retry (APISIX's after_balance with before_retry): least_conn counts
// it out of the requests in flight, ewma takes no latency for it.
func TestBalancersReleaseOnRetry(t *testing.T) {
	nodes := `"nodes":{"127.0.0.1:1":1,"127.0.0.1:2":1}`
	lc := testBalancer(t, `{"type":"least_conn",`+nodes+`}`)
	var tried triedSet
	i := lc.pick(tried, 0, 0)
	lc.release(i, true, 0, 0)
	tried.add(i)
	j := lc.pick(tried, 0, 0)
	if j == i || j < 0 {
		t.Fatalf("retry picked %d after %d", j, i)
	}
	if lc.conns[i] != 0 || lc.conns[j] != 1 {
		t.Fatalf("in flight after a retry: %v, want the failed node's given back", lc.conns)
	}
	lc.release(j, false, 0, 0)
	if lc.conns[0] != 0 || lc.conns[1] != 0 {
		t.Fatalf("in flight after the request: %v", lc.conns)
	}

	ew := testBalancer(t, `{"type":"ewma",`+nodes+`}`)
	now := int64(time.Hour)
	i = ew.pick(0, 0, now)
	ew.release(i, true, int64(time.Second), now)
	if ew.lat[i] != (ewmaStat{}) {
		t.Fatalf("a failed attempt changed the node's latency: %+v", ew.lat[i])
	}
	ew.release(i, false, int64(time.Second), now)
	if ew.lat[i].v == 0 {
		t.Fatal("the request's end took no latency in")
	}
	if ew.lat[1-i] != (ewmaStat{}) {
		t.Fatalf("the other node's latency changed: %+v", ew.lat[1-i])
	}
}
