package limitcount

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// syncConf is a redis-policy configuration of count per 60 s with
// sync_interval 0.1, for the Redis on port, with the fields of extra.
func syncConf(port, count int, extra string) string {
	return fmt.Sprintf(`{"count":%d,"time_window":60,"policy":"redis","redis_host":"127.0.0.1","redis_port":%d,"sync_interval":0.1%s}`, count, port, extra)
}

// runNow runs a request at the present time (the flusher's clock).
func runNow(p *plugins.Phases, c *plugintest.Ctx) answer {
	c.Clock = time.Now().UnixNano()
	return run(p, c)
}

// redisCount waits, up to 5 s, for the only key of the Redis on port to
// hold want, and fails the test if it does not.
func redisCount(t *testing.T, port int, want string) {
	t.Helper()
	addr := "127.0.0.1:" + strconv.Itoa(port)
	var got string
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		keys, err := plugintest.RedisCommand(addr, "KEYS", "*")
		if err != nil || keys == "" || strings.Contains(keys, "\n") {
			got = fmt.Sprintf("keys %q, %v", keys, err)
			continue
		}
		if got, _ = plugintest.RedisCommand(addr, "GET", keys); got == want {
			return
		}
	}
	t.Fatalf("the counter in Redis: %s, want %s", got, want)
}

// TestSyncWindow: with sync_interval the first request of a window awaits
// Redis and the others are counted locally, as APISIX's
// limit-count-redis-delayed-sync2.t: Remaining 6, 5, 4, 3 of 7, then
// 2, 1, 0 and a rejection with Remaining 0. The admitted requests reach
// Redis within the interval; the rejected one does not.
func TestSyncWindow(t *testing.T) {
	port := plugintest.RedisServer(t)
	p := build(t, plugins.NewLocalEnv(), syncConf(port, 7, `,"rejected_code":429`))
	c := newCtx("GET", "/echo").WithRoute("r1")
	for i, want := range []string{"6", "5", "4", "3"} {
		a := runNow(p, c)
		if a.Status != 200 || a.Limit != "7" || a.Remaining != want || !resetOK(a.Reset) {
			t.Fatalf("request %d: %+v, want Remaining %s", i+1, a, want)
		}
		if wantAwaits := map[bool]int{true: 1, false: 0}[i == 0]; c.Awaits != wantAwaits {
			t.Fatalf("request %d: %d Awaits, want %d", i+1, c.Awaits, wantAwaits)
		}
	}
	redisCount(t, port, "4")
	for i, want := range []answer{{Status: 200, Remaining: "2"}, {Status: 200, Remaining: "1"}, {Status: 200, Remaining: "0"}, {Status: 429, Remaining: "0"}} {
		a := runNow(p, c)
		if a.Status != want.Status || a.Remaining != want.Remaining || c.Awaits != 0 || !resetOK(a.Reset) {
			t.Fatalf("request %d: %+v (%d Awaits), want %+v and no Await", i+5, a, c.Awaits, want)
		}
	}
	redisCount(t, port, "7")
}

// TestSyncShared: two gateways sharing a Redis see each other's counts
// through it: the second's first request finds the first's three, and
// the first sees the second's after its next sync.
func TestSyncShared(t *testing.T) {
	port := plugintest.RedisServer(t)
	conf := syncConf(port, 6, "")
	gw1 := build(t, plugins.NewLocalEnv(), conf)
	gw2 := build(t, plugins.NewLocalEnv(), conf)
	c := newCtx("GET", "/").WithRoute("r1")
	for range 3 {
		if a := runNow(gw1, c); a.Status != 200 {
			t.Fatalf("gw1: %+v", a)
		}
	}
	redisCount(t, port, "3")
	if a := runNow(gw2, c); a.Status != 200 || a.Remaining != "2" {
		t.Fatalf("gw2's first request: %+v, want Remaining 2 (3 counted by gw1)", a)
	}
	redisCount(t, port, "4")
	// gw1 knows Redis's count as of its last sync (3): a key's count is
	// taken back by the sync that sends its requests, as APISIX's.
	if a := runNow(gw1, c); a.Status != 200 || a.Remaining != "2" {
		t.Fatalf("gw1 before its sync: %+v, want Remaining 2", a)
	}
	redisCount(t, port, "5")
	time.Sleep(300 * time.Millisecond) // gw1's sync is answered 5
	for i, want := range []answer{{Status: 200, Remaining: "0"}, {Status: 503, Remaining: "0"}} {
		if a := runNow(gw1, c); a.Status != want.Status || a.Remaining != want.Remaining {
			t.Fatalf("gw1, request %d after its sync: %+v, want %+v", i+1, a, want)
		}
	}
}

// TestSyncRedisDown: while Redis fails, a sync counts in the node's
// counter table, APISIX's fallback limiter: the limit holds with
// allow_degradation or without; with no counter table either, a
// request fails as without sync_interval. A Redis stopped after the
// window began leaves the local count going on, the deltas in the
// fallback table.
func TestSyncRedisDown(t *testing.T) {
	down := plugintest.FreePort(t) // nothing listens there
	for _, degrade := range []string{"false", "true"} {
		p := build(t, plugins.NewLocalEnv(), syncConf(down, 3, `,"redis_timeout":200,"allow_degradation":`+degrade))
		c := newCtx("GET", "/").WithRoute("r1")
		for i, want := range []answer{{Status: 200, Remaining: "2"}, {Status: 200, Remaining: "1"}, {Status: 200, Remaining: "0"}, {Status: 503, Remaining: "0"}} {
			if a := runNow(p, c); a.Status != want.Status || a.Remaining != want.Remaining {
				t.Fatalf("allow_degradation %s, request %d: %+v, want %+v", degrade, i+1, a, want)
			}
		}
	}
	none := plugins.Env{} // no counter table: nothing to fall back to
	strict := build(t, none, syncConf(down, 3, `,"redis_timeout":200`))
	open := build(t, none, syncConf(down, 3, `,"redis_timeout":200,"allow_degradation":true`))
	c := newCtx("GET", "/").WithRoute("r1")
	c.UpstreamBody = []byte("up")
	check(t, "no fallback, fail-closed", runNow(strict, c), answer{Status: 500, Body: string(failBody)})
	check(t, "no fallback, fail-open", runNow(open, c), answer{Status: 200, Body: "up"})

	port, proc := plugintest.RedisProcess(t)
	env := plugins.NewLocalEnv()
	p := build(t, env, syncConf(port, 4, `,"redis_timeout":200`))
	if a := runNow(p, c); a.Status != 200 || a.Remaining != "3" {
		t.Fatalf("with Redis: %+v", a)
	}
	redisCount(t, port, "1")
	key, err := plugintest.RedisCommand("127.0.0.1:"+strconv.Itoa(port), "KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	if err := proc.Kill(); err != nil {
		t.Fatal(err)
	}
	_, _ = proc.Wait()
	for i, want := range []int{200, 200, 200, 503} {
		if a := runNow(p, c); a.Status != want {
			t.Fatalf("Redis gone, request %d: %+v, want %d", i+1, a, want)
		}
	}
	// The flusher's failed sync puts the deltas in the fallback table.
	fb := []byte("limit-count\x00fallback\x00" + key)
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		now := time.Now().UnixNano()
		ctr, _ := env.Counters.Counter(fb, now, now+60e9)
		if n := ctr.Load(); n == 3 {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("the fallback counter: %d, want the 3 requests admitted after Redis went", n)
		}
	}
}

// TestSyncCheck: sync_interval as APISIX checks it, for the Redis policies
// only.
func TestSyncCheck(t *testing.T) {
	for conf, want := range map[string]string{
		syncConf(6379, 1, ``): "",
		`{"count":1,"time_window":60,"policy":"redis","redis_host":"127.0.0.1","sync_interval":-1}`:                                                 "",
		`{"count":1,"time_window":60,"policy":"redis","redis_host":"127.0.0.1","sync_interval":0.05}`:                                               "sync_interval should not be smaller than 0.1",
		`{"count":1,"time_window":60,"policy":"redis","redis_host":"127.0.0.1","sync_interval":0}`:                                                  "sync_interval should not be smaller than 0.1",
		`{"count":1,"time_window":60,"policy":"redis","redis_host":"127.0.0.1","sync_interval":60}`:                                                 "sync_interval should be smaller than time_window",
		`{"count":1,"time_window":"$arg_w","policy":"redis","redis_host":"127.0.0.1","sync_interval":60}`:                                           "",
		`{"count":1,"time_window":60,"policy":"redis-cluster","redis_cluster_name":"c","redis_cluster_nodes":["127.0.0.1:1"],"sync_interval":0.01}`: "sync_interval should not be smaller than 0.1",
		`{"count":1,"time_window":60,"sync_interval":0.01}`:                                                                                         "",
		`{"count":1,"time_window":60,"policy":"redis","redis_host":"127.0.0.1","sync_interval":"1"}`:                                                "sync_interval",
	} {
		err := plugins.Check(Name, []byte(conf))
		if want == "" && err != nil || want != "" && (err == nil || !strings.Contains(err.Error(), want)) {
			t.Errorf("%s: %v, want %q", conf, err, want)
		}
	}
}

// TestSyncShortWindow: a window no longer than sync_interval, which only
// a time_window resolved per request can give, is counted in Redis for
// every request, as APISIX falls back to the direct count.
func TestSyncShortWindow(t *testing.T) {
	port := plugintest.RedisServer(t)
	p := build(t, plugins.NewLocalEnv(), fmt.Sprintf(`{"count":5,"time_window":"$arg_w","policy":"redis","redis_host":"127.0.0.1","redis_port":%d,"sync_interval":1}`, port))
	for i, w := range []string{"1", "1", "10"} {
		c := newCtx("GET", "/?w="+w).WithRoute("r1")
		if a := runNow(p, c); a.Status != 200 || c.Awaits != 1 {
			t.Fatalf("request %d (window %s): %+v, %d Awaits", i+1, w, a, c.Awaits)
		}
	}
	c := newCtx("GET", "/?w=10").WithRoute("r1")
	if a := runNow(p, c); a.Status != 200 || c.Awaits != 0 {
		t.Fatalf("a 10 s window's second request: %+v, %d Awaits, want it counted locally", a, c.Awaits)
	}
}

// TestSyncPeers: a request that comes while its key's window-start sync
// is in flight waits for a round trip of its own and is then counted
// locally after the first: Remaining 6 then 5 of 7, both admitted
// requests sent to Redis by the next sync, none counted there at once.
func TestSyncPeers(t *testing.T) {
	port := plugintest.RedisServer(t)
	p := build(t, plugins.NewLocalEnv(), syncConf(port, 7, ""))
	first, second := newCtx("GET", "/").WithRoute("r1"), newCtx("GET", "/").WithRoute("r1")
	for _, c := range []*plugintest.Ctx{first, second} {
		c.Clock = time.Now().UnixNano()
		p.Access[0].Access(c)
		if !c.Awaiting() {
			t.Fatal("a request of a key not synced yet does not await")
		}
	}
	for i, c := range []*plugintest.Ctx{first, second} {
		if !c.Settle() {
			t.Fatalf("request %d: not woken", i+1)
		}
		if got, want := string(c.ResponseHeader(remainingHeader)), strconv.Itoa(6-i); got != want || c.Awaits != 1 {
			t.Fatalf("request %d: Remaining %q, %d Awaits; want %s and one Await", i+1, got, c.Awaits, want)
		}
	}
	redisCount(t, port, "2")
}

// TestSyncAbandoned: a window-start sync whose request left still gives
// the key its count: the next request is counted locally, with no Await.
func TestSyncAbandoned(t *testing.T) {
	port := plugintest.RedisServer(t)
	p := build(t, plugins.NewLocalEnv(), syncConf(port, 7, ""))
	gone := newCtx("GET", "/").WithRoute("r1")
	gone.Clock = time.Now().UnixNano()
	p.Access[0].Access(gone)
	if !gone.Leave() {
		t.Fatal("the first request did not await its sync")
	}
	c := newCtx("GET", "/").WithRoute("r1")
	if a := runNow(p, c); a.Status != 200 || a.Remaining != "6" || c.Awaits != 0 {
		t.Fatalf("after the abandoned sync: %+v, %d Awaits; want Remaining 6 and no Await", a, c.Awaits)
	}
}

// TestSyncCluster: sync_interval with the redis-cluster policy: the first
// request awaits the cluster, the others are counted locally, and the
// admitted ones reach the node that owns the key.
func TestSyncCluster(t *testing.T) {
	nodes := plugintest.RedisCluster(t, 3)
	p := build(t, plugins.NewLocalEnv(), fmt.Sprintf(`{"count":2,"time_window":60,"policy":"redis-cluster","redis_cluster_name":"c1","redis_cluster_nodes":["%s"],"sync_interval":0.1}`, nodes[0]))
	c := newCtx("GET", "/").WithRoute("r1")
	for i, want := range []answer{{Status: 200, Remaining: "1"}, {Status: 200, Remaining: "0"}, {Status: 503, Remaining: "0"}} {
		a := runNow(p, c)
		if a.Status != want.Status || a.Remaining != want.Remaining || c.Awaits != map[bool]int{true: 1, false: 0}[i == 0] {
			t.Fatalf("request %d: %+v, %d Awaits; want %+v", i+1, a, c.Awaits, want)
		}
	}
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		found := ""
		for _, n := range nodes {
			if keys, err := plugintest.RedisCommand(n, "KEYS", "*127.0.0.1"); err == nil && keys != "" {
				found, _ = plugintest.RedisCommand(n, "GET", keys)
			}
		}
		if found == "2" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the count in the cluster: %q, want 2", found)
		}
	}
}
