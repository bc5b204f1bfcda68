package main

import (
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"coregate/internal/e2e"
	"coregate/plugins/plugintest"
)

// limit-count's Redis policies over three nodes: exactly the limit
// admitted between them, within a window and across window edges; Redis
// killed under load and started again.

// redisPolicy is the limit-count configuration of policy ("redis" or
// "redis-cluster") on the Redis at addrs (one address for "redis").
func redisPolicy(policy string, addrs []string, extra obj) obj {
	c := obj{"policy": policy, "key_type": "constant", "key": "all", "rejected_msg": "limited", "redis_timeout": 1000}
	if policy == "redis" {
		host, port, _ := strings.Cut(addrs[0], ":")
		p, _ := strconv.Atoi(port)
		c["redis_host"], c["redis_port"] = host, p
	} else {
		c["redis_cluster_nodes"], c["redis_cluster_name"] = addrs, "test"
	}
	for k, v := range extra {
		c[k] = v
	}
	return c
}

// threeNodes starts three gateways of one worker each on routes and
// returns perNode connections to each.
func threeNodes(t *testing.T, routes string, perNode int) []*limitConn {
	var conns []*limitConn
	for range 3 {
		g := startGateway(t, routes, "")
		conns = append(conns, dialLimit(t, g.Addr(), perNode)...)
	}
	return conns
}

// TestLimitCountRedisThreeNodes: with policy redis and redis-cluster, a
// limit of N per 300 s over three nodes, a control plane and two data
// planes on one external etcd, the route written through the control
// plane's Admin API, admits exactly N of the requests sent at once over
// them all; every answer carries APISIX's headers: X-RateLimit-Limit N,
// X-RateLimit-Remaining (0 on the 503s), and X-RateLimit-Reset, the
// seconds left in the window (up to 300, to the hundredth as APISIX
// prints them).
func TestLimitCountRedisThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts etcd, three gateways and Redis servers")
	}
	for _, policy := range []string{"redis", "redis-cluster"} {
		t.Run(policy, func(t *testing.T) {
			var addrs []string
			if policy == "redis" {
				addrs = []string{"127.0.0.1:" + strconv.Itoa(plugintest.RedisServer(t))}
			} else {
				addrs = plugintest.RedisCluster(t, 3)
			}
			etcd := e2e.NewEtcd(t)
			etcd.Start()
			up := textUpstream(t, "ok")
			const limit = 90
			cpAdmin := freePort(t)
			gs := []*supGateway{startSupervisor(t, "", clusterConfig("control_plane", []string{etcd.Client}, 0, cpAdmin, freePort(t)), 1)}
			for range 2 {
				gs = append(gs, startSupervisor(t, "", clusterConfig("data_plane", []string{etcd.Client}, 0, freePort(t), freePort(t)), 1))
			}
			route, err := json.Marshal(obj{"uri": "/limited", "upstream": upstreamOf(nodes(up.Addr()), nil),
				"plugins": obj{"limit-count": redisPolicy(policy, addrs, obj{"count": limit, "time_window": 300})}})
			if err != nil {
				t.Fatal(err)
			}
			c := newClient(t)
			if r := legacyAdmin(cpAdmin).do(t, c, "PUT", "routes/limited", string(route)); r.status != 201 {
				t.Fatalf("PUT the route on the control plane: %d %s", r.status, r.body)
			}
			// Served on every node: the requests that tell it are
			// counted too.
			probes := 0
			for _, g := range gs {
				eventually(t, 30*time.Second, func() error {
					r, err := tryDo(c, "GET", g.url("/limited"), "", nil, nil)
					if err != nil || r.status != 200 {
						return fmt.Errorf("GET /limited = %d, %v", r.status, err)
					}
					probes++
					return nil
				})
			}
			var conns []*limitConn
			for _, g := range gs {
				conns = append(conns, dialLimit(t, g.Addr(), 4)...)
			}
			var remaining [limit]atomic.Int32
			passed, rejected := sendAll(t, conns, "/limited", 2*limit, func(a limitAnswer) (bool, error) {
				reset, err := strconv.ParseFloat(a.reset, 64)
				if a.limit != strconv.Itoa(limit) || err != nil || reset <= 0 || reset > 300 {
					return false, fmt.Errorf("headers: X-RateLimit-Limit %q, X-RateLimit-Reset %q; want %d and up to 300", a.limit, a.reset, limit)
				}
				switch {
				case a.status == 200:
					r, err := strconv.Atoi(a.remaining)
					if err != nil || r < 0 || r >= limit-probes {
						return false, fmt.Errorf("admitted with X-RateLimit-Remaining %q", a.remaining)
					}
					remaining[r].Add(1)
					return true, nil
				case a.status == 503 && a.remaining == "0" && a.body == `{"error_msg":"limited"}`+"\n":
					return false, nil
				}
				return false, fmt.Errorf("unexpected answer %+v", a)
			})
			if passed != limit-probes || rejected != limit+probes {
				t.Fatalf("%d passed and %d were rejected over three nodes after %d probes, want %d and %d",
					passed, rejected, probes, limit-probes, limit+probes)
			}
			// Each admitted request had a count of its own.
			for r := range limit - probes {
				if n := remaining[r].Load(); n != 1 {
					t.Fatalf("X-RateLimit-Remaining %d answered %d times, want once", r, n)
				}
			}
		})
	}
}

// TestLimitCountRedisWindowEdge: a limit of N per 1 s window over three
// nodes under load for several windows: each window admits exactly N,
// requests in flight at the window's edge counted in the window Redis
// put them in. A window is told by the admitted requests'
// X-RateLimit-Remaining: each of N-1 … 0 once per window, N-1 first.
func TestLimitCountRedisWindowEdge(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gateways and a Redis server for a few seconds")
	}
	addr := "127.0.0.1:" + strconv.Itoa(plugintest.RedisServer(t))
	up := textUpstream(t, "ok")
	const limit = 20
	routes := routesYAML(obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up.Addr()), nil),
		"plugins": obj{"limit-count": redisPolicy("redis", []string{addr}, obj{"count": limit, "time_window": 1})}})
	conns := threeNodes(t, routes, 2)
	var counts [limit]atomic.Int32
	var passed, rejected atomic.Int32
	var stop atomic.Bool
	var wg sync.WaitGroup
	errs := make(chan error, len(conns))
	for _, lc := range conns {
		wg.Go(func() {
			// Paced: fewer requests than a connection may carry
			// (keepalive_requests, 1000), many more than the limit.
			for n := 0; !stop.Load() && n < 900; n++ {
				time.Sleep(4 * time.Millisecond)
				a, err := lc.get("/limited")
				switch {
				case err != nil:
				case a.status == 200:
					r, perr := strconv.Atoi(a.remaining)
					if perr != nil || r < 0 || r >= limit {
						err = fmt.Errorf("admitted with X-RateLimit-Remaining %q", a.remaining)
						break
					}
					counts[r].Add(1)
					passed.Add(1)
					continue
				case a.status == 503 && a.remaining == "0":
					rejected.Add(1)
					continue
				default:
					err = fmt.Errorf("unexpected answer %+v", a)
				}
				errs <- err
				return
			}
		})
	}
	time.Sleep(3500 * time.Millisecond)
	stop.Store(true)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	var c []int32
	for r := range counts {
		c = append(c, counts[r].Load())
	}
	slices.Reverse(c) // N-1 first: the order a window counts in
	windows := c[0]
	t.Logf("%d admitted, %d rejected over %d windows; admitted per count left, N-1 first: %v", passed.Load(), rejected.Load(), windows, c)
	if windows < 3 || rejected.Load() == 0 {
		t.Fatalf("%d windows, %d rejected: the load did not fill several windows", windows, rejected.Load())
	}
	// Windows filled but perhaps the last: every count of a window is
	// seen once per window, the last window stopping somewhere.
	for i := 1; i < limit; i++ {
		if c[i] > c[i-1] || c[i] < windows-1 {
			t.Fatalf("admitted per count left %v: not N per window over %d windows", c, windows)
		}
	}
	if int(passed.Load()) > limit*int(windows) {
		t.Fatalf("%d admitted over %d windows of %d", passed.Load(), windows, limit)
	}
}

// outageAnswer is one answer of TestLimitCountRedisKilled's load.
type outageAnswer struct {
	at, took  time.Duration // since the load began
	path      string
	status    int
	remaining string
	body      string
	err       error
}

// TestLimitCountRedisKilled: Redis (a Redis Cluster's master holding the
// key) killed under load over three nodes, then started again on its
// port, or Redis hung (SIGSTOP, then SIGCONT): meanwhile /limited answers
// APISIX's 500 {"error_msg":"failed to limit count"} and /open,
// allow_degradation, passes without the headers; no request waits past
// redis_timeout (1 s), and most fail at once, not each after the timeout
// (a failed dial, refused or timed out, is tried again a second later,
// the calls between failing at once); once Redis is back both count
// again by themselves, within a few seconds, no node restarted.
func TestLimitCountRedisKilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gateways and Redis servers for several seconds")
	}
	for _, tc := range []struct {
		name, policy string
		hang         bool // SIGSTOP and SIGCONT, not SIGKILL and a restart
	}{{"redis", "redis", false}, {"redis-hung", "redis", true}, {"redis-cluster", "redis-cluster", false}} {
		policy := tc.policy
		t.Run(tc.name, func(t *testing.T) {
			var victim *plugintest.RedisNode
			var addrs []string
			var all []*plugintest.RedisNode
			if policy == "redis" {
				victim = plugintest.RedisNodeOf(t)
				all = []*plugintest.RedisNode{victim}
			} else {
				all = plugintest.RedisClusterNodes(t, 3)
			}
			for _, n := range all {
				addrs = append(addrs, n.Addr())
			}
			up := textUpstream(t, "ok")
			// One hash tag: both routes' keys in one slot, on one master.
			conf := func(degrade bool) obj {
				return redisPolicy(policy, addrs, obj{"count": 1000000, "time_window": 300, "key": "{edge}", "allow_degradation": degrade})
			}
			routes := routesYAML(
				obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up.Addr()), nil), "plugins": obj{"limit-count": conf(false)}},
				obj{"id": "open", "uri": "/open", "upstream": upstreamOf(nodes(up.Addr()), nil), "plugins": obj{"limit-count": conf(true)}},
			)
			var gs []*gateway
			for range 3 {
				gs = append(gs, startGateway(t, routes, ""))
			}
			c := newClient(t)
			for _, g := range gs {
				for _, p := range []string{"/limited", "/open"} {
					if r := do(t, c, "GET", g.url(p), "", nil, nil); r.status != 200 || r.header.Get("X-RateLimit-Remaining") == "" {
						t.Fatalf("%s before the outage: %d %q", p, r.status, r.header.Get("X-RateLimit-Remaining"))
					}
				}
			}
			if victim == nil {
				for _, n := range all {
					if keys, err := plugintest.RedisCommand(n.Addr(), "KEYS", "plugin-limit-count:*"); err == nil && keys != "" {
						victim = n
					}
				}
				if victim == nil {
					t.Fatal("no master holds the counters")
				}
			}
			pids := map[*gateway][]workerProc{}
			for _, g := range gs {
				pids[g] = workerProcs(t, g.PID())
			}

			begin := time.Now()
			var stop atomic.Bool
			var mu sync.Mutex
			var answers []outageAnswer
			var wg sync.WaitGroup
			for _, g := range gs {
				for i := range 4 {
					path := []string{"/limited", "/open"}[i%2]
					cl := newClient(t)
					wg.Go(func() {
						for n := 0; !stop.Load() && n < 5000; n++ {
							start := time.Now()
							r, err := tryDo(cl, "GET", g.url(path), "", nil, nil)
							a := outageAnswer{at: start.Sub(begin), took: time.Since(start), path: path, status: r.status,
								remaining: r.header.Get("X-RateLimit-Remaining"), body: r.body, err: err}
							mu.Lock()
							answers = append(answers, a)
							mu.Unlock()
							time.Sleep(5 * time.Millisecond)
						}
					})
				}
			}
			time.Sleep(500 * time.Millisecond)
			killed := time.Since(begin)
			if tc.hang {
				if err := victim.Process().Signal(syscall.SIGSTOP); err != nil {
					t.Fatal(err)
				}
			} else {
				victim.Kill()
			}
			time.Sleep(3 * time.Second)
			restarted := time.Since(begin)
			if tc.hang {
				if err := victim.Process().Signal(syscall.SIGCONT); err != nil {
					t.Fatal(err)
				}
			} else {
				victim.Restart()
			}
			// Back by itself: every node counts /limited again.
			var recovered time.Duration
			eventually(t, 15*time.Second, func() error {
				for _, g := range gs {
					if r, err := tryDo(c, "GET", g.url("/limited"), "", nil, nil); err != nil || r.status != 200 || r.header.Get("X-RateLimit-Remaining") == "" {
						return fmt.Errorf("/limited with Redis back: %d %q, %v", r.status, r.header.Get("X-RateLimit-Remaining"), err)
					}
				}
				recovered = time.Since(begin)
				return nil
			})
			time.Sleep(500 * time.Millisecond)
			stop.Store(true)
			wg.Wait()

			const timeout = time.Second // redis_timeout
			var failed, failedSlow, degraded, after int
			var worst time.Duration
			var fails []time.Duration
			for _, a := range answers {
				worst = max(worst, a.took)
				switch {
				case a.err != nil:
					t.Errorf("%s at %v: %v", a.path, a.at, a.err)
				case a.took > timeout+timeout/2:
					t.Errorf("%s at %v: answered %d after %v, past redis_timeout %v", a.path, a.at, a.status, a.took, timeout)
				case a.path == "/open" && a.status != 200:
					t.Errorf("/open at %v: %d %q, want 200 (allow_degradation)", a.at, a.status, a.body)
				case a.path == "/open" && a.remaining == "":
					// Degraded: in flight at the outage, or asked
					// before every node counted again.
					switch {
					case a.at+a.took < killed:
						t.Errorf("/open at %v: passed uncounted with Redis up (killed at %v)", a.at, killed)
					case a.at > recovered+timeout:
						after++
					default:
						degraded++
					}
				case a.path == "/limited" && a.status == 500:
					if a.body != `{"error_msg":"failed to limit count"}`+"\n" {
						t.Errorf("/limited at %v: 500 %q", a.at, a.body)
					}
					// In flight at the kill, or asked before every
					// node counted again.
					if a.at+a.took < killed || a.at > recovered {
						t.Errorf("/limited at %v: 500 with Redis up (killed at %v, started again at %v, counted again at %v)",
							a.at, killed, restarted, recovered)
					}
					failed++
					fails = append(fails, a.took)
					if a.took > timeout/2 {
						failedSlow++
					}
				case a.path == "/limited" && a.status != 200:
					t.Errorf("/limited at %v: %d %q", a.at, a.status, a.body)
				case a.at > recovered+timeout && a.remaining == "":
					after++ // /limited passed uncounted
				}
			}
			slices.Sort(fails)
			var median time.Duration
			if len(fails) > 0 {
				median = fails[len(fails)/2]
			}
			t.Logf("%d answers; Redis killed at %v, started again at %v, counted again on every node at %v (%v after); "+
				"%d requests failed (500), %d of them after more than %v, median %v; %d passed degraded; slowest answer %v",
				len(answers), killed.Round(time.Millisecond), restarted.Round(time.Millisecond), recovered.Round(time.Millisecond),
				(recovered - restarted).Round(time.Millisecond), failed, failedSlow, timeout/2, median, degraded, worst.Round(time.Millisecond))
			if failed == 0 || degraded == 0 {
				t.Errorf("%d failed, %d degraded: the outage was not seen", failed, degraded)
			}
			if median > 100*time.Millisecond {
				t.Errorf("the median failed request waited %v: each pays the timeout while Redis is down", median)
			}
			if after > 0 {
				t.Errorf("%d answers without the count after the recovery", after)
			}
			if d := recovered - restarted; d > 5*time.Second {
				t.Errorf("counted again %v after Redis was back, want within 5 s", d)
			}
			for _, g := range gs {
				if got := workerProcs(t, g.PID()); !slices.Equal(got, pids[g]) {
					t.Errorf("workers %v, were %v", got, pids[g])
				}
			}
		})
	}
}
