package main

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/adminapi"
	"coregate/plugins/plugintest"
)

// limit-count's redis policy end to end: two gateways (one of two workers,
// one of one) share a Redis and admit exactly the limit between them; a
// request waiting for Redis does not hold up the worker's other clients;
// Redis gone, requests get 500 or, with allow_degradation, go through.

// redisLimitRoutes is apisix.yaml with /limited limited to count per 300 s
// in the Redis on port, /open the same with allow_degradation, and /other
// unlimited.
func redisLimitRoutes(up string, port, count int) string {
	return redisLimitRoutesTimeout(up, port, count, 3000)
}

// redisLimitRoutesTimeout is redisLimitRoutes with redis_timeout ms.
func redisLimitRoutesTimeout(up string, port, count, ms int) string {
	conf := func(extra obj) obj {
		c := obj{"count": count, "time_window": 300, "rejected_msg": "limited", "key_type": "constant", "key": "all",
			"policy": "redis", "redis_host": "127.0.0.1", "redis_port": port, "redis_timeout": ms}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	return routesYAML(
		obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up), nil),
			"plugins": obj{"limit-count": conf(nil)}},
		obj{"id": "open", "uri": "/open", "upstream": upstreamOf(nodes(up), nil),
			"plugins": obj{"limit-count": conf(obj{"allow_degradation": true})}},
		obj{"id": "other", "uri": "/other", "upstream": upstreamOf(nodes(up), nil)},
	)
}

func TestLimitCountRedisAcrossGateways(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateways with several workers and a redis-server")
	}
	port := plugintest.RedisServer(t)
	up := textUpstream(t, "ok")
	const limit = 120
	routes := redisLimitRoutes(up.Addr(), port, limit)
	a := startSupervisor(t, routes, func(p int) string { return perCoreConfig(p, 2) }, 2)
	b := startGateway(t, routes, "")
	conns := append(dialSpread(t, a, 2, 4), dialLimit(t, b.Addr(), 8)...)
	passed, rejected := hammer(t, conns, "/limited", 2*limit, strconv.Itoa(limit))
	if passed != limit || rejected != limit {
		t.Fatalf("%d passed and %d were rejected over two gateways, want %d and %d", passed, rejected, limit, limit)
	}
	if v, err := plugintest.RedisCommand("127.0.0.1:"+strconv.Itoa(port), "KEYS", "plugin-limit-count:v1:/apisix/routes/limited:*:all"); err != nil || v == "" {
		t.Fatalf("the counter's key: %q, %v", v, err)
	}
}

// TestLimitCountRedisDoesNotBlock: while Redis sleeps (DEBUG SLEEP), a
// request to the limited route waits, and the same worker answers another
// client's request meanwhile; the waiting one is answered once Redis is
// back.
func TestLimitCountRedisDoesNotBlock(t *testing.T) {
	port := plugintest.RedisServer(t, "--enable-debug-command", "yes")
	raddr := "127.0.0.1:" + strconv.Itoa(port)
	up := textUpstream(t, "ok")
	g := startGateway(t, redisLimitRoutes(up.Addr(), port, 100), "")
	conns := dialLimit(t, g.Addr(), 2)
	if a, err := conns[0].get("/limited"); err != nil || a.status != 200 {
		t.Fatalf("first request: %+v, %v", a, err) // connected to Redis
	}
	slept := make(chan error, 1)
	go func() {
		_, err := plugintest.RedisCommand(raddr, "DEBUG", "SLEEP", "1.5")
		slept <- err
	}()
	time.Sleep(200 * time.Millisecond) // the sleep has begun
	limited := make(chan limitAnswer, 1)
	go func() {
		a, err := conns[0].get("/limited")
		if err != nil {
			a.body = err.Error()
		}
		limited <- a
	}()
	time.Sleep(100 * time.Millisecond) // the request waits for Redis
	if a, err := conns[1].get("/other"); err != nil || a.status != 200 {
		t.Fatalf("the other client's request: %+v, %v", a, err)
	}
	select {
	case a := <-limited:
		t.Fatalf("the limited request was answered while Redis slept: %+v", a)
	default:
	}
	if err := <-slept; err != nil {
		t.Fatal(err)
	}
	select {
	case a := <-limited:
		if a.status != 200 || a.remaining != "98" {
			t.Fatalf("the limited request after Redis woke: %+v", a)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the limited request was not answered after Redis woke")
	}
}

// TestLimitCountRedisDown: with Redis unreachable the limited route
// answers 500 {"error_msg":"failed to limit count"}, the degrading one
// lets the request through without the headers.
func TestLimitCountRedisDown(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startGateway(t, redisLimitRoutes(up.Addr(), freePort(t), 100), "")
	c := dialLimit(t, g.Addr(), 1)[0]
	for range 2 {
		if a, err := c.get("/limited"); err != nil || a.status != 500 || a.body != `{"error_msg":"failed to limit count"}`+"\n" {
			t.Fatalf("/limited: %+v, %v", a, err)
		}
		if a, err := c.get("/open"); err != nil || a.status != 200 || a.limit != "" || a.body != "ok" {
			t.Fatalf("/open: %+v, %v", a, err)
		}
	}
	// The operator is told, by the worker, naming the server.
	eventually(t, 5*time.Second, func() error {
		if out := g.out.String(); !strings.Contains(out, `msg="redis calls failed"`) || !strings.Contains(out, "worker=0") {
			return fmt.Errorf("no log line of the failing Redis calls:\n%s", out)
		}
		return nil
	})
}

// TestLimitRedisHung: with Redis hung (SIGSTOP) and redis_timeout 1000,
// requests asked while others wait for Redis are each answered within
// the timeout of their own asking (limit-count and limit-req 500,
// limit-count and limit-conn with allow_degradation through), not after
// the timeouts of the requests before them too; once Redis goes on
// (SIGCONT) the limits count again by themselves, and the line that
// counts the calls failed meanwhile names their error.
func TestLimitRedisHung(t *testing.T) {
	if testing.Short() {
		t.Skip("waits out the 10 s between two lines of failed Redis calls")
	}
	port, proc := plugintest.RedisProcess(t)
	up := textUpstream(t, "ok")
	const timeout = time.Second
	redis := func(extra obj) obj {
		c := obj{"policy": "redis", "redis_host": "127.0.0.1", "redis_port": port, "redis_timeout": timeout.Milliseconds(),
			"key": "remote_addr"}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	routes := routesYAML(
		obj{"id": "count", "uri": "/count", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"limit-count": redis(obj{"count": 1000, "time_window": 300})}},
		obj{"id": "count-open", "uri": "/count-open", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"limit-count": redis(obj{"count": 1000, "time_window": 300, "allow_degradation": true})}},
		obj{"id": "req", "uri": "/req", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"limit-req": redis(obj{"rate": 1000, "burst": 0, "nodelay": true})}},
		obj{"id": "conn-open", "uri": "/conn-open", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"limit-conn": redis(obj{"conn": 100, "burst": 0, "default_conn_delay": 0.1, "allow_degradation": true})}},
	)
	g := startGateway(t, routes, "")
	paths := []string{"/count", "/count-open", "/req", "/conn-open"}
	want := map[string]int{"/count": 500, "/count-open": 200, "/req": 500, "/conn-open": 200}
	conns := dialLimit(t, g.Addr(), 8)
	for _, p := range paths { // connected to Redis
		if a, err := conns[0].get(p); err != nil || a.status != 200 {
			t.Fatalf("%s before the hang: %+v, %v", p, a, err)
		}
	}
	resume := plugintest.HangRedis(t, proc)
	// Two waves of eight requests: the first asked over half the timeout
	// while the first of them waits, the second once the first failed.
	for wave := range 2 {
		var wg sync.WaitGroup
		errs := make(chan string, len(conns))
		for i, lc := range conns {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * timeout / 16)
				p := paths[i%len(paths)]
				start := time.Now()
				a, err := lc.get(p)
				if took := time.Since(start); err != nil || a.status != want[p] || took > timeout*3/2 {
					errs <- fmt.Sprintf("wave %d, %s: %+v, %v after %v; want %d within %v", wave, p, a, err, took, want[p], timeout*3/2)
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
	if t.Failed() {
		return
	}
	var first time.Time // the first line of failed calls, once seen
	eventually(t, 5*time.Second, func() error {
		if !strings.Contains(g.out.String(), `msg="redis calls failed"`) {
			return fmt.Errorf("no line of the failed calls:\n%s", g.out.String())
		}
		first = time.Now()
		return nil
	})
	resume()
	eventually(t, 5*time.Second, func() error {
		for _, p := range paths {
			if a, err := conns[0].get(p); err != nil || a.status != 200 {
				return fmt.Errorf("%s after the hang: %+v, %v", p, a, err)
			}
		}
		return nil
	})
	if a, err := conns[0].get("/count"); err != nil || a.remaining == "" {
		t.Fatalf("/count is not counted after the hang: %+v, %v", a, err)
	}
	// The second wave's failures are logged with the next call past 10 s
	// from the first line.
	time.Sleep(time.Until(first.Add(10 * time.Second)))
	eventually(t, 5*time.Second, func() error {
		if a, err := conns[0].get("/count"); err != nil || a.status != 200 {
			return fmt.Errorf("/count: %+v, %v", a, err)
		}
		var lines []string
		for _, line := range strings.Split(g.out.String(), "\n") {
			if strings.Contains(line, `msg="redis calls failed"`) {
				lines = append(lines, line)
			}
		}
		if len(lines) < 2 {
			return fmt.Errorf("%d lines of the failed calls, want 2:\n%s", len(lines), strings.Join(lines, "\n"))
		}
		for _, line := range lines {
			// A round trip that waited out the timeout, or the calls
			// failed at once after a dial that did (redis: not connected:
			// and the dial's error) until the next dial.
			if strings.Contains(line, "err=<nil>") || !strings.Contains(line, "no reply within 1s") && !strings.Contains(line, `err="redis: not connected: `) {
				t.Fatalf("a line of the failed calls does not name their error: %s", line)
			}
		}
		return nil
	})
}

// TestLimitReqRedisAcrossGateways: limit-req's bucket in Redis is shared
// by two gateways: exactly burst+1 requests pass between them.
func TestLimitReqRedisAcrossGateways(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateways with several workers and a redis-server")
	}
	port := plugintest.RedisServer(t)
	up := textUpstream(t, "ok")
	const burst = 59
	routes := routesYAML(obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up.Addr()), nil),
		"plugins": obj{"limit-req": obj{"rate": 0.001, "burst": burst, "key": "remote_addr", "nodelay": true,
			"rejected_code": 429, "rejected_msg": "slow down", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": port}}})
	a := startSupervisor(t, routes, func(p int) string { return perCoreConfig(p, 2) }, 2)
	b := startGateway(t, routes, "")
	conns := append(dialSpread(t, a, 2, 3), dialLimit(t, b.Addr(), 6)...)
	passed, rejected := countReq(t, conns, "/limited", 3*(burst+1))
	if passed != burst+1 || rejected != 2*(burst+1) {
		t.Fatalf("%d passed and %d were rejected over two gateways, want %d and %d", passed, rejected, burst+1, 2*(burst+1))
	}
}

// TestLimitConnRedisAcrossGateways: limit-conn's count in Redis is shared
// by two gateways: exactly conn requests are in flight between them, the
// others rejected; each leaves the count in its log phase, so the next
// round admits conn again.
func TestLimitConnRedisAcrossGateways(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateways and a redis-server")
	}
	port := plugintest.RedisServer(t)
	const conn = 5
	var arrived atomic.Int32
	var release atomic.Pointer[chan struct{}]
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		arrived.Add(1)
		select {
		case <-*release.Load():
		case <-time.After(30 * time.Second):
		}
		_, _ = w.Write([]byte("ok"))
	})
	routes := routesYAML(obj{"id": "held", "uri": "/held", "upstream": upstreamOf(nodes(up.Addr()), nil),
		"plugins": obj{"limit-conn": obj{"conn": conn, "burst": 0, "default_conn_delay": 0.1, "key": "remote_addr",
			"rejected_code": 429, "rejected_msg": "busy", "policy": "redis", "redis_host": "127.0.0.1", "redis_port": port}}})
	a := startGateway(t, routes, "")
	b := startGateway(t, routes, "")
	conns := append(dialLimit(t, a.Addr(), 6), dialLimit(t, b.Addr(), 6)...)
	for round := range 2 {
		ch := make(chan struct{})
		release.Store(&ch)
		arrived.Store(0)
		var ok, busy, bad atomic.Int32
		var wg sync.WaitGroup
		for _, lc := range conns {
			wg.Go(func() {
				a, err := lc.get("/held")
				switch {
				case err == nil && a.status == 200 && a.body == "ok":
					ok.Add(1)
				case err == nil && a.status == 429 && a.body == `{"error_msg":"busy"}`+"\n":
					busy.Add(1)
				default:
					bad.Add(1)
				}
			})
		}
		eventually(t, 20*time.Second, func() error {
			if n := busy.Load(); int(n) != len(conns)-conn || arrived.Load() != conn {
				return fmt.Errorf("round %d: %d rejected, %d at the upstream; want %d and %d",
					round, n, arrived.Load(), len(conns)-conn, conn)
			}
			return nil
		})
		close(ch)
		wg.Wait()
		if ok.Load() != conn || bad.Load() != 0 {
			t.Fatalf("round %d: %d passed, %d unexpected answers; want %d and 0", round, ok.Load(), bad.Load(), conn)
		}
		// The log phases' removals reach Redis after the answers: wait
		// for the count to empty before the next round.
		eventually(t, 10*time.Second, func() error {
			n, err := plugintest.RedisCommand("127.0.0.1:"+strconv.Itoa(port), "EVAL",
				"local n = 0 for _, k in ipairs(redis.call('keys', 'limit_conn:*')) do n = n + redis.call('zcard', k) end return n", "0")
			if err == nil && n != "0" {
				err = fmt.Errorf("%s requests still counted", n)
			}
			return err
		})
	}
}

// syncLimitRoutes is apisix.yaml with /limited limited to count per 300 s
// in the Redis on port with sync_interval 0.2, /open the same with
// allow_degradation.
func syncLimitRoutes(up string, port, count int) string {
	conf := func(degrade bool) obj {
		return obj{"count": count, "time_window": 300, "rejected_msg": "limited", "key_type": "constant", "key": "all",
			"policy": "redis", "redis_host": "127.0.0.1", "redis_port": port, "redis_timeout": 500,
			"sync_interval": 0.2, "allow_degradation": degrade}
	}
	return routesYAML(
		obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up), nil),
			"plugins": obj{"limit-count": conf(false)}},
		obj{"id": "open", "uri": "/open", "upstream": upstreamOf(nodes(up), nil),
			"plugins": obj{"limit-count": conf(true)}},
	)
}

// TestLimitCountRedisSyncInterval: with sync_interval each worker counts
// locally and syncs with Redis every interval, so that two workers admit
// at least the limit and at most the limit each (the documented bound),
// and Redis ends up holding every admitted request, the rejected ones
// not.
func TestLimitCountRedisSyncInterval(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a gateway of two workers and a redis-server")
	}
	port := plugintest.RedisServer(t)
	up := textUpstream(t, "ok")
	const limit = 100
	a := startSupervisor(t, syncLimitRoutes(up.Addr(), port, limit), func(p int) string { return perCoreConfig(p, 2) }, 2)
	conns := dialSpread(t, a, 2, 4)
	passed, rejected := hammer(t, conns, "/limited", 3*limit, strconv.Itoa(limit))
	t.Logf("%d passed, %d rejected", passed, rejected)
	if passed < limit || passed > 2*limit || passed+rejected != 3*limit {
		t.Fatalf("%d passed and %d were rejected on two workers, want from %d to %d to pass", passed, rejected, limit, 2*limit)
	}
	raddr := "127.0.0.1:" + strconv.Itoa(port)
	eventually(t, 5*time.Second, func() error {
		key, err := plugintest.RedisCommand(raddr, "KEYS", "plugin-limit-count:v1:/apisix/routes/limited:*:all")
		if err != nil || key == "" {
			return fmt.Errorf("the counter's key: %q, %v", key, err)
		}
		if v, err := plugintest.RedisCommand(raddr, "GET", key); err != nil || v != strconv.Itoa(passed) {
			return fmt.Errorf("the count in Redis: %q, %v; want the %d admitted", v, err, passed)
		}
		return nil
	})
}

// TestLimitCountRedisSyncDown: with sync_interval and Redis unreachable,
// a worker counts in the node's counter table (APISIX's fallback
// limiter): the limit holds on both routes, allow_degradation or not;
// and a Redis that goes away once counting began leaves the limit
// holding too.
func TestLimitCountRedisSyncDown(t *testing.T) {
	up := textUpstream(t, "ok")
	g := startGateway(t, syncLimitRoutes(up.Addr(), freePort(t), 3), "")
	c := dialLimit(t, g.Addr(), 1)[0]
	for _, path := range []string{"/limited", "/open"} {
		for i, want := range []int{200, 200, 200, 503} {
			if a, err := c.get(path); err != nil || a.status != want || a.limit != "3" {
				t.Fatalf("%s, request %d: %+v, %v; want %d", path, i+1, a, err, want)
			}
		}
	}

	port, proc := plugintest.RedisProcess(t)
	g2 := startGateway(t, syncLimitRoutes(up.Addr(), port, 4), "")
	c2 := dialLimit(t, g2.Addr(), 1)[0]
	if a, err := c2.get("/limited"); err != nil || a.status != 200 || a.remaining != "3" {
		t.Fatalf("with Redis: %+v, %v", a, err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = proc.Wait()
	for i, want := range []int{200, 200, 200, 503} {
		if a, err := c2.get("/limited"); err != nil || a.status != want {
			t.Fatalf("Redis gone, request %d: %+v, %v; want %d", i+1, a, err, want)
		}
	}
}

// TestLimitCountRedisSyncAdmin: sync_interval through the Admin API: one
// below 0.1 is refused 400 with APISIX's message and not stored; a valid
// one limits the route, the requests after the first counted on the
// worker (Remaining 2, 1, 0, then 503).
func TestLimitCountRedisSyncAdmin(t *testing.T) {
	port := plugintest.RedisServer(t)
	up := textUpstream(t, "ok")
	adminPort := freePort(t)
	g := startSupervisor(t, "", etcdConfig(adminPort, adminapi.LegacyAdminKey), 1)
	c := newClient(t)
	admin := legacyAdmin(adminPort)
	route := func(interval string) string {
		return fmt.Sprintf(`{"uri":"/synced","plugins":{"limit-count":{"count":3,"time_window":60,"policy":"redis",`+
			`"redis_host":"127.0.0.1","redis_port":%d,"sync_interval":%s}},"upstream":{"nodes":{%q:1}}}`, port, interval, up.Addr())
	}
	r := admin.do(t, c, "PUT", "routes/synced", route("0.05"))
	if r.status != 400 || !strings.Contains(r.body, "sync_interval should not be smaller than 0.1") {
		t.Fatalf("PUT sync_interval 0.05: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "GET", "routes/synced", ""); r.status != 404 {
		t.Fatalf("the refused route was stored: %d %s", r.status, r.body)
	}
	if r := admin.do(t, c, "PUT", "routes/synced", route("0.2")); r.status != 201 {
		t.Fatalf("PUT sync_interval 0.2: %d %s", r.status, r.body)
	}
	eventually(t, 10*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/synced"), "", nil, nil); r.status != 200 || r.header.Get("X-RateLimit-Remaining") != "2" {
			return fmt.Errorf("GET /synced = %d, Remaining %q", r.status, r.header.Get("X-RateLimit-Remaining"))
		}
		return nil
	})
	for i, want := range []struct {
		status    int
		remaining string
	}{{200, "1"}, {200, "0"}, {503, "0"}} {
		if r := do(t, c, "GET", g.url("/synced"), "", nil, nil); r.status != want.status || r.header.Get("X-RateLimit-Remaining") != want.remaining {
			t.Fatalf("request %d: %d, Remaining %q; want %d, %s", i+2, r.status, r.header.Get("X-RateLimit-Remaining"), want.status, want.remaining)
		}
	}
}
