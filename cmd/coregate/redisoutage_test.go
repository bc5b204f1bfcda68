package main

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

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
// limit of N per 300 s over three nodes admits exactly N of 2N requests
// sent at once over them all; every answer carries APISIX's headers:
// X-RateLimit-Limit N, X-RateLimit-Remaining (0 on the 503s), and
// X-RateLimit-Reset, the seconds left in the window (up to 300, to the
// hundredth as APISIX prints them).
func TestLimitCountRedisThreeNodes(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three gateways and Redis servers")
	}
	for _, policy := range []string{"redis", "redis-cluster"} {
		t.Run(policy, func(t *testing.T) {
			var addrs []string
			if policy == "redis" {
				addrs = []string{"127.0.0.1:" + strconv.Itoa(plugintest.RedisServer(t))}
			} else {
				addrs = plugintest.RedisCluster(t, 3)
			}
			up := textUpstream(t, "ok")
			const limit = 90
			routes := routesYAML(obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up.Addr()), nil),
				"plugins": obj{"limit-count": redisPolicy(policy, addrs, obj{"count": limit, "time_window": 300})}})
			conns := threeNodes(t, routes, 4)
			var remaining [limit]atomic.Int32
			passed, rejected := sendAll(t, conns, "/limited", 2*limit, func(a limitAnswer) (bool, error) {
				reset, err := strconv.ParseFloat(a.reset, 64)
				if a.limit != strconv.Itoa(limit) || err != nil || reset <= 0 || reset > 300 {
					return false, fmt.Errorf("headers: X-RateLimit-Limit %q, X-RateLimit-Reset %q; want %d and up to 300", a.limit, a.reset, limit)
				}
				switch {
				case a.status == 200:
					r, err := strconv.Atoi(a.remaining)
					if err != nil || r < 0 || r >= limit {
						return false, fmt.Errorf("admitted with X-RateLimit-Remaining %q", a.remaining)
					}
					remaining[r].Add(1)
					return true, nil
				case a.status == 503 && a.remaining == "0" && a.body == `{"error_msg":"limited"}`+"\n":
					return false, nil
				}
				return false, fmt.Errorf("unexpected answer %+v", a)
			})
			if passed != limit || rejected != limit {
				t.Fatalf("%d passed and %d were rejected over three nodes, want %d and %d", passed, rejected, limit, limit)
			}
			// Each admitted request had a count of its own.
			for r := range remaining {
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
