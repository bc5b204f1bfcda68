package main

import (
	"bufio"
	"net"
	"strconv"
	"testing"
	"time"

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
	conf := func(extra obj) obj {
		c := obj{"count": count, "time_window": 300, "rejected_msg": "limited", "key_type": "constant", "key": "all",
			"policy": "redis", "redis_host": "127.0.0.1", "redis_port": port, "redis_timeout": 3000}
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

func dialLimit(t *testing.T, addr string, n int) []*limitConn {
	t.Helper()
	var conns []*limitConn
	for range n {
		c, err := net.DialTimeout("tcp", addr, 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = c.Close() })
		conns = append(conns, &limitConn{c: c, br: bufio.NewReader(c)})
	}
	return conns
}

func TestLimitCountRedisAcrossGateways(t *testing.T) {
	if testing.Short() {
		t.Skip("starts gateways with several workers and a redis-server")
	}
	port := plugintest.RedisServer(t)
	up := textUpstream(t, "ok")
	const limit = 120
	routes := redisLimitRoutes(up.addr(), port, limit)
	a := startSupervisor(t, routes, func(p int) string { return perCoreConfig(p, 2) }, 2)
	b := startGateway(t, routes, "")
	conns := append(dialSpread(t, a, 2, 4), dialLimit(t, b.addr(), 8)...)
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
	g := startGateway(t, redisLimitRoutes(up.addr(), port, 100), "")
	conns := dialLimit(t, g.addr(), 2)
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
	up := textUpstream(t, "ok")
	g := startGateway(t, redisLimitRoutes(up.addr(), freePort(t), 100), "")
	c := dialLimit(t, g.addr(), 1)[0]
	for range 2 {
		if a, err := c.get("/limited"); err != nil || a.status != 500 || a.body != `{"error_msg":"failed to limit count"}`+"\n" {
			t.Fatalf("/limited: %+v, %v", a, err)
		}
		if a, err := c.get("/open"); err != nil || a.status != 200 || a.limit != "" || a.body != "ok" {
			t.Fatalf("/open: %+v, %v", a, err)
		}
	}
}
