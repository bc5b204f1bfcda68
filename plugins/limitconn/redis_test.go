package limitconn

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// redisConf is a redis-policy configuration for the Redis on port, with
// the fields of extra.
func redisConf(port int, extra string) string {
	return fmt.Sprintf(`{"default_conn_delay":0.1,"key":"remote_addr","policy":"redis","redis_host":"127.0.0.1","redis_port":%d%s}`, port, extra)
}

// arrive runs the access phase of a new request from ip at clock, its
// Redis calls settled.
func arrive(t *testing.T, p *plugins.Phases, clock int64, ip string) request {
	t.Helper()
	c := plugintest.NewCtx("GET", "/").WithRoute("r1").WithVar("remote_addr", ip)
	c.Clock = clock
	for _, a := range p.Access {
		if c.Exited() {
			break
		}
		a.Access(c)
		if !c.Settle() {
			t.Fatal("an Await was never woken")
		}
	}
	return request{c}
}

// waitInFlight waits (at most 10 s) until the requests of ip in flight
// in the Redis at addrs (one server, or a cluster's nodes) are n: a
// request's log phase tells Redis without waiting for it, as APISIX's
// does from a timer, so the next request may reach Redis first.
func waitInFlight(t *testing.T, addrs []string, ip string, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := 0
		for _, a := range addrs {
			keys, err := plugintest.RedisCommand(a, "KEYS", "limit_conn:*:"+ip)
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range strings.Fields(keys) {
				c, err := plugintest.RedisCommand(a, "ZCARD", k)
				if err != nil {
					t.Fatal(err)
				}
				got += atoi(c)
			}
		}
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d requests of %s in flight in Redis, want %d", got, ip, n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// inFlight is the count of the only key in the Redis at addr.
func inFlight(t *testing.T, addr string) string {
	t.Helper()
	keys, err := plugintest.RedisCommand(addr, "KEYS", "limit_conn:*")
	if err != nil || strings.Contains(keys, "\n") {
		t.Fatalf("keys %q, %v", keys, err)
	}
	if keys == "" {
		return "0"
	}
	n, err := plugintest.RedisCommand(addr, "ZCARD", keys)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestRedisInFlight: the redis policy counts the requests in flight in
// Redis, as APISIX: conn pass, burst more are delayed by
// default_conn_delay × (count-1)/conn, the rest are rejected with
// rejected_code and rejected_msg; a request's log phase takes it out of
// the count. The outcomes are the local policy's. The count is APISIX's
// sorted set, limit_conn:<route's key>:<conf version>:<key's value>, its
// members scored with now + key_ttl.
func TestRedisInFlight(t *testing.T) {
	port := plugintest.RedisServer(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	const limits = `,"conn":2,"burst":2,"rejected_code":429,"rejected_msg":"busy"`
	for _, policy := range []string{"redis", "local"} {
		conf := redisConf(port, limits)
		if policy == "local" {
			conf = `{"default_conn_delay":0.1,"key":"remote_addr"` + limits + `}`
		}
		p := build(t, plugins.NewLocalEnv(), conf)
		r := make([]request, 6)
		for i := range r {
			r[i] = arrive(t, p, t0, "127.0.0.1")
		}
		want(t, policy+": six at once", outcomes(r...), 0, 0, 100, 100, -429, -429)
		r[4].leave(p) // rejected: leaves nothing
		r[5].leave(p)
		want(t, policy+": a seventh", outcomes(arrive(t, p, t0, "127.0.0.1")), -429)
		r[0].leave(p)
		r[1].leave(p)
		if policy == "redis" {
			waitInFlight(t, []string{addr}, "127.0.0.1", 2)
		}
		more := []request{arrive(t, p, t0, "127.0.0.1"), arrive(t, p, t0, "127.0.0.1"), arrive(t, p, t0, "127.0.0.1")}
		want(t, policy+": after two left", outcomes(more...), 100, 100, -429)
		if policy == "local" {
			continue
		}
		// Four in flight; the rejected one left nothing.
		if n := inFlight(t, addr); n != "4" {
			t.Fatalf("in flight in Redis: %s, want 4", n)
		}
		keys, _ := plugintest.RedisCommand(addr, "KEYS", "*")
		if !strings.HasPrefix(keys, "limit_conn:/apisix/routes/r1:") || !strings.HasSuffix(keys, ":127.0.0.1") {
			t.Fatalf("keys %q", keys)
		}
		scores, err := plugintest.RedisCommand(addr, "ZRANGE", keys, "0", "-1", "WITHSCORES")
		if err != nil || !strings.HasSuffix(scores, "\n"+strconv.FormatInt(t0/int64(time.Second)+3600, 10)) {
			t.Fatalf("members and scores %q, %v; want now+3600", scores, err)
		}
		if ttl, err := plugintest.RedisCommand(addr, "TTL", keys); err != nil || atoi(ttl) <= 3500 || atoi(ttl) > 3600 {
			t.Fatalf("TTL %q, %v; want key_ttl 3600", ttl, err)
		}
		for _, q := range append(more[:2], r[2], r[3]) {
			q.leave(p)
		}
		waitInFlight(t, []string{addr}, "127.0.0.1", 0)
		want(t, "after all left", outcomes(arrive(t, p, t0, "127.0.0.1")), 0)
		if n := inFlight(t, addr); n != "1" {
			t.Fatalf("in flight in Redis: %s, want 1", n)
		}
	}
	// The rejection's answer.
	p := build(t, plugins.NewLocalEnv(), redisConf(port, `,"conn":1,"burst":0,"rejected_code":429,"rejected_msg":"busy"`))
	c := plugintest.NewCtx("GET", "/").WithRoute("r1")
	c.Clock = t0
	arrive(t, p, t0, "127.0.0.1") // stays
	plugintest.Run(p, c)
	if c.Status() != 429 || string(c.Body) != `{"error_msg":"busy"}`+"\n" {
		t.Fatalf("rejected: %d %q", c.Status(), c.Body)
	}
}

// TestRedisKeyTTL: a request never taken away (its gateway died) counts
// until key_ttl seconds after it came.
func TestRedisKeyTTL(t *testing.T) {
	port := plugintest.RedisServer(t)
	p := build(t, plugins.NewLocalEnv(), redisConf(port, `,"conn":1,"burst":0,"key_ttl":60`))
	want(t, "the lost one", outcomes(arrive(t, p, t0, "127.0.0.1")), 0)
	sec := int64(time.Second)
	want(t, "within key_ttl", outcomes(arrive(t, p, t0+59*sec, "127.0.0.1")), -503)
	want(t, "past key_ttl", outcomes(arrive(t, p, t0+61*sec, "127.0.0.1")), 0)
}

// TestRedisShared: two gateways whose limit-conn uses one Redis share the
// count; one's request leaving makes room on the other.
func TestRedisShared(t *testing.T) {
	port := plugintest.RedisServer(t)
	conf := redisConf(port, `,"conn":1,"burst":1`)
	gw1 := build(t, plugins.NewLocalEnv(), conf)
	gw2 := build(t, plugins.NewLocalEnv(), conf)
	a := arrive(t, gw1, t0, "10.0.0.1")
	b := arrive(t, gw2, t0, "10.0.0.1")
	want(t, "two gateways", outcomes(a, b, arrive(t, gw1, t0, "10.0.0.1"), arrive(t, gw2, t0, "10.0.0.1")), 0, 100, -503, -503)
	a.leave(gw1)
	waitInFlight(t, []string{"127.0.0.1:" + strconv.Itoa(port)}, "10.0.0.1", 1)
	want(t, "after one left", outcomes(arrive(t, gw2, t0, "10.0.0.1"), arrive(t, gw1, t0, "10.0.0.1")), 100, -503)
}

// TestRedisDown: without Redis (or with a wrong password) the limiter
// fails: 500, as APISIX's "failed to limit conn", or the request passes
// with allow_degradation, counted nowhere.
func TestRedisDown(t *testing.T) {
	port := plugintest.FreePort(t) // nothing listens there
	strict := build(t, plugins.NewLocalEnv(), redisConf(port, `,"conn":1,"burst":0,"redis_timeout":200`))
	open := build(t, plugins.NewLocalEnv(), redisConf(port, `,"conn":1,"burst":0,"redis_timeout":200,"allow_degradation":true`))
	want(t, "fail-closed", outcomes(arrive(t, strict, t0, "127.0.0.1"), arrive(t, strict, t0, "127.0.0.1")), -500, -500)
	r := []request{arrive(t, open, t0, "127.0.0.1"), arrive(t, open, t0, "127.0.0.1")}
	want(t, "fail-open", outcomes(r...), 0, 0)
	for _, q := range r {
		if _, ok := q.c.Kept(open.Access[0]); ok {
			t.Fatal("a request Redis did not count is kept as counted")
		}
		q.leave(open)
	}

	auth := plugintest.RedisServer(t, "--requirepass", "s3cret")
	want(t, "a wrong password", outcomes(arrive(t, build(t, plugins.NewLocalEnv(), redisConf(auth, `,"conn":1,"burst":0,"redis_password":"wrong"`)), t0, "127.0.0.1")), -500)
	good := build(t, plugins.NewLocalEnv(), redisConf(auth, `,"conn":1,"burst":0,"redis_password":"s3cret"`))
	want(t, "the password", outcomes(arrive(t, good, t0, "127.0.0.1"), arrive(t, good, t0, "127.0.0.1")), 0, -503)
}

// abandoning is a request that leaves while its Redis call is out: its
// Await hands out a Waker of its own, and the test calls Abandon.
type abandoning struct {
	*plugintest.Ctx
	r     plugins.Resumer
	woken chan struct{}
}

type chanWaker chan struct{}

func (w chanWaker) Wake() { w <- struct{}{} }

func (a *abandoning) Await(r plugins.Resumer) (plugins.Waker, bool) {
	a.r = r
	return chanWaker(a.woken), true
}

// TestRedisAbandon: a request that left while Redis counted it is taken
// out of the count.
func TestRedisAbandon(t *testing.T) {
	port := plugintest.RedisServer(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := build(t, plugins.NewLocalEnv(), redisConf(port, `,"conn":1,"burst":0`))
	a := &abandoning{Ctx: plugintest.NewCtx("GET", "/").WithRoute("r1"), woken: make(chan struct{}, 1)}
	a.Clock = t0
	p.Access[0].Access(a)
	select {
	case <-a.woken:
	case <-time.After(plugintest.AwaitTimeout):
		t.Fatal("never woken")
	}
	if n := inFlight(t, addr); n != "1" {
		t.Fatalf("in flight in Redis: %s, want 1", n)
	}
	a.r.Abandon()
	waitInFlight(t, []string{addr}, "127.0.0.1", 0)
	want(t, "after the abandoned one", outcomes(arrive(t, p, t0, "127.0.0.1")), 0)
	if n := inFlight(t, addr); n != "1" {
		t.Fatalf("in flight in Redis: %s, want 1", n)
	}
}

// TestRedisCluster: the redis-cluster policy keeps each count on the
// node that owns its key's slot.
func TestRedisCluster(t *testing.T) {
	nodes := plugintest.RedisCluster(t, 3)
	conf := fmt.Sprintf(`{"conn":1,"burst":1,"default_conn_delay":0.1,"key":"remote_addr","policy":"redis-cluster","redis_cluster_name":"c1","redis_cluster_nodes":["%s"]}`, nodes[0])
	p := build(t, plugins.NewLocalEnv(), conf)
	owners := map[string]bool{}
	for i := range 12 {
		ip := "10.0.0." + strconv.Itoa(i+1)
		r := []request{arrive(t, p, t0, ip), arrive(t, p, t0, ip), arrive(t, p, t0, ip)}
		want(t, ip, outcomes(r...), 0, 100, -503)
		r[0].leave(p)
		waitInFlight(t, nodes, ip, 1)
		want(t, ip+" after one left", outcomes(arrive(t, p, t0, ip)), 100)
		for _, n := range nodes {
			if keys, err := plugintest.RedisCommand(n, "KEYS", "limit_conn:*"+ip); err == nil && keys != "" {
				owners[n] = true
			}
		}
	}
	if len(owners) < 2 {
		t.Fatalf("12 clients' counts on %d node(s), want them spread over the cluster", len(owners))
	}
}

// TestRedisCheck: the Redis fields are checked; valid redis and
// redis-cluster configurations pass; redis-sentinel is not in the schema.
func TestRedisCheck(t *testing.T) {
	base := `"conn":1,"burst":1,"default_conn_delay":1,"key":"remote_addr"`
	plugintest.CheckRedisFields(t, Name, base)
	for _, tc := range []struct{ conf, want string }{
		{`{` + base + `,"policy":"redis","redis_host":"127.0.0.1","key_ttl":"1"}`, "key_ttl"},
		{`{` + base + `,"policy":"redis-sentinel"}`, `property "policy" validation failed`},
	} {
		if err := plugins.Check(Name, json.RawMessage(tc.conf)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error naming %q", tc.conf, err, tc.want)
		}
	}
	if conf := redisConf(6379, `,"conn":1,"burst":1,"key_ttl":60`); plugins.Check(Name, json.RawMessage(conf)) != nil {
		t.Errorf("%s refused", conf)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

// TestRedisLeaveReuse: the log phase's Redis calls come back to their
// instance from the client's goroutine and serve again: requests that
// come and go one after another use one.
func TestRedisLeaveReuse(t *testing.T) {
	port := plugintest.RedisServer(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	p := build(t, plugins.NewLocalEnv(), redisConf(port, `,"conn":1,"burst":0`))
	in := p.Access[0].(*instance)
	for i := range 50 {
		r := arrive(t, p, t0, "127.0.0.1")
		want(t, "request "+strconv.Itoa(i+1), outcomes(r), 0)
		r.leave(p)
		waitInFlight(t, []string{addr}, "127.0.0.1", 0)
	}
	// The last one's call is back once Redis answered it, shortly after
	// its removal.
	deadline := time.Now().Add(10 * time.Second)
	for {
		n := len(in.leaves)
		for l := in.returned.Load(); l != nil; l = l.nextFree {
			n++
		}
		if n == 1 {
			break
		}
		if n > 1 || time.Now().After(deadline) {
			t.Fatalf("%d leave calls made for 50 requests one after another, want 1", n)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRedisRules: TestRules with the counts in Redis: each rule a call,
// in order, the next only once the previous one let the request through.
func TestRedisRules(t *testing.T) {
	port := plugintest.RedisServer(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	conf := strings.TrimSuffix(rulesConf, "}") + fmt.Sprintf(`,"policy":"redis","redis_host":"127.0.0.1","redis_port":%d}`, port)
	p := build(t, plugins.NewLocalEnv(), conf)
	enter := func(headers ...string) request {
		c := plugintest.NewCtx("GET", "/").WithRoute("r1")
		c.Clock = t0
		for i := 0; i+1 < len(headers); i += 2 {
			c.WithHeader(headers[i], headers[i+1])
		}
		for _, a := range p.Access {
			a.Access(c)
			if !c.Settle() {
				t.Fatal("an Await was never woken")
			}
		}
		return request{c}
	}
	// total is the requests counted in Redis, every key together.
	total := func(n int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for {
			got, err := plugintest.RedisCommand(addr, "EVAL",
				"local n = 0 for _, k in ipairs(redis.call('keys', 'limit_conn:*')) do n = n + redis.call('zcard', k) end return n", "0")
			if err != nil {
				t.Fatal(err)
			}
			if got == strconv.Itoa(n) {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s requests counted in Redis, want %d", got, n)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	r1 := enter("X-User", "ann", "X-Org", "o")
	r2 := enter("X-User", "bob", "X-Org", "o")
	r3 := enter("X-User", "cid", "X-Org", "o")
	r4 := enter("X-User", "ann", "X-Org", "p")
	r5 := enter()
	r6 := enter("X-User", "dan")
	want(t, "six", outcomes(r1, r2, r3, r4, r5, r6), 0, 0, -429, -429, -500, 0)
	if r3.c.Awaits != 2 || r4.c.Awaits != 1 || r5.c.Awaits != 0 {
		t.Fatalf("Redis calls: %d, %d, %d; want 2, 1, 0", r3.c.Awaits, r4.c.Awaits, r5.c.Awaits)
	}
	// ann and bob twice (user, org), cid's user count, dan's.
	total(6)
	r3.leave(p)
	total(5)
	want(t, "cid again", outcomes(enter("X-User", "cid", "X-Org", "q")), 0)
	r1.leave(p)
	total(5)
	want(t, "after ann left", outcomes(enter("X-User", "ann", "X-Org", "o")), 0)
}
