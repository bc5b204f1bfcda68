package limitcount

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// redisConf is a redis-policy configuration for the Redis on port, with
// the fields of extra.
func redisConf(port int, extra string) string {
	return fmt.Sprintf(`{"count":3,"time_window":60,"policy":"redis","redis_host":"127.0.0.1","redis_port":%d%s}`, port, extra)
}

// resetOK reports whether an X-RateLimit-Reset is a window's seconds left:
// at most 60, and more than 50 in a test that takes less than 10 s.
func resetOK(s string) bool {
	f, err := strconv.ParseFloat(s, 64)
	return err == nil && f > 50 && f <= 60
}

// TestRedisWindow: the redis policy counts in Redis, as APISIX: the
// count, the headers (the reset from the key's TTL), the rejection; two
// gateways sharing the Redis share the limit; the key is APISIX's.
func TestRedisWindow(t *testing.T) {
	port := plugintest.RedisServer(t)
	conf := redisConf(port, `,"rejected_code":429,"rejected_msg":"over"`)
	gw1 := build(t, plugins.NewLocalEnv(), conf)
	gw2 := build(t, plugins.NewLocalEnv(), conf) // another gateway: its own local table
	c := newCtx("GET", "/hello").WithRoute("r1")
	for i, want := range []struct {
		p         *plugins.Phases
		status    int
		remaining string
	}{{gw1, 200, "2"}, {gw2, 200, "1"}, {gw1, 200, "0"}, {gw2, 429, "0"}, {gw1, 429, "0"}} {
		a := run(want.p, c)
		if a.Status != want.status || a.Limit != "3" || a.Remaining != want.remaining || !resetOK(a.Reset) {
			t.Fatalf("request %d: %+v, want status %d, remaining %s", i+1, a, want.status, want.remaining)
		}
		if c.Awaits != 1 {
			t.Fatalf("request %d: %d Awaits, want 1", i+1, c.Awaits)
		}
		if want.status == 429 && a.Body != `{"error_msg":"over"}`+"\n" {
			t.Fatalf("request %d: body %q", i+1, a.Body)
		}
	}
	keys, err := plugintest.RedisCommand("127.0.0.1:"+strconv.Itoa(port), "KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(keys, "plugin-limit-count:v1:/apisix/routes/r1:") || !strings.HasSuffix(keys, ":127.0.0.1") || strings.Contains(keys, "\n") {
		t.Fatalf("keys %q", keys)
	}
	if v, err := plugintest.RedisCommand("127.0.0.1:"+strconv.Itoa(port), "GET", keys); err != nil || v != "5" {
		t.Fatalf("the counter: %q, %v; want 5 (rejected requests count too, as APISIX's script)", v, err)
	}
	// Another client, another key.
	other := newCtx("GET", "/hello").WithRoute("r1").WithVar("remote_addr", "10.0.0.9")
	if a := run(gw1, other); a.Status != 200 || a.Remaining != "2" {
		t.Fatalf("another client: %+v", a)
	}
	// A script Redis forgot (a restart, SCRIPT FLUSH) is sent again.
	if _, err := plugintest.RedisCommand("127.0.0.1:"+strconv.Itoa(port), "SCRIPT", "FLUSH"); err != nil {
		t.Fatal(err)
	}
	if a := run(gw1, other); a.Status != 200 || a.Remaining != "1" {
		t.Fatalf("after SCRIPT FLUSH: %+v", a)
	}
}

// TestRedisExact: concurrent requests on many gateways admit exactly the
// limit.
func TestRedisExact(t *testing.T) {
	port := plugintest.RedisServer(t)
	conf := fmt.Sprintf(`{"count":50,"time_window":60,"key_type":"constant","key":"all","policy":"redis","redis_host":"127.0.0.1","redis_port":%d}`, port)
	const gateways, each = 4, 40
	var mu sync.Mutex
	passed := 0
	var wg sync.WaitGroup
	for range gateways {
		p := build(t, plugins.NewLocalEnv(), conf)
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newCtx("GET", "/").WithRoute("r1") // one route, every gateway
			n := 0
			for range each {
				if run(p, c).Status == 200 {
					n++
				}
			}
			mu.Lock()
			passed += n
			mu.Unlock()
		}()
	}
	wg.Wait()
	if passed != 50 {
		t.Fatalf("%d requests passed, want exactly 50", passed)
	}
}

// TestRedisAuthAndDatabase: redis_password and redis_database reach
// Redis: the counter is in the database named.
func TestRedisAuthAndDatabase(t *testing.T) {
	port := plugintest.RedisServer(t, "--requirepass", "s3cret")
	p := build(t, plugins.NewLocalEnv(), redisConf(port, `,"redis_password":"s3cret","redis_database":3`))
	c := newCtx("GET", "/").WithRoute("r1")
	if a := run(p, c); a.Status != 200 || a.Remaining != "2" {
		t.Fatalf("%+v", a)
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	got, err := plugintest.RedisCommands(addr, []string{"AUTH", "s3cret"}, []string{"DBSIZE"}, []string{"SELECT", "3"}, []string{"DBSIZE"})
	if err != nil || got[1] != "0" || got[3] != "1" {
		t.Fatalf("keys in databases 0 and 3: %q, %v; want 0 and 1", got, err)
	}
	wrong := build(t, plugins.NewLocalEnv(), redisConf(port, `,"redis_password":"wrong"`))
	if a := run(wrong, c); a.Status != 500 || a.Body != string(failBody) {
		t.Fatalf("a wrong password: %+v", a)
	}
}

// TestRedisDown: without Redis, allow_degradation lets requests through
// with no headers; without it they get 500 {"error_msg":"failed to limit
// count"}, as APISIX.
func TestRedisDown(t *testing.T) {
	port := plugintest.FreePort(t) // nothing listens there
	strict := build(t, plugins.NewLocalEnv(), redisConf(port, `,"redis_timeout":200`))
	open := build(t, plugins.NewLocalEnv(), redisConf(port, `,"redis_timeout":200,"allow_degradation":true`))
	c := newCtx("GET", "/").WithRoute("r1")
	c.UpstreamBody = []byte("up")
	check(t, "fail-closed", run(strict, c), answer{Status: 500, Body: string(failBody)})
	check(t, "fail-closed again", run(strict, c), answer{Status: 500, Body: string(failBody)})
	check(t, "fail-open", run(open, c), answer{Status: 200, Body: "up"})
}

// TestRedisCluster: the redis-cluster policy counts on the cluster node
// that owns the key's slot; keys of different clients land on different
// nodes and each keeps its own count.
func TestRedisCluster(t *testing.T) {
	nodes := plugintest.RedisCluster(t, 3)
	conf := fmt.Sprintf(`{"count":2,"time_window":60,"policy":"redis-cluster","redis_cluster_name":"c1","redis_cluster_nodes":["%s"]}`, nodes[0])
	p := build(t, plugins.NewLocalEnv(), conf)
	owners := map[string]bool{}
	for i := range 12 {
		ip := "10.0.0." + strconv.Itoa(i+1)
		c := newCtx("GET", "/").WithRoute("r1").WithVar("remote_addr", ip)
		for j, want := range []int{200, 200, 503} {
			if a := run(p, c); a.Status != want {
				t.Fatalf("client %s, request %d: %+v, want %d", ip, j+1, a, want)
			}
		}
		for _, n := range nodes {
			if keys, err := plugintest.RedisCommand(n, "KEYS", "*"+ip); err == nil && keys != "" {
				owners[n] = true
			}
		}
	}
	if len(owners) < 2 {
		t.Fatalf("12 clients' counters on %d node(s), want them spread over the cluster", len(owners))
	}
}

// TestRedisCheck: the Redis fields are checked; redis-sentinel, in
// limit-count's schema, is refused as not supported yet.
func TestRedisCheck(t *testing.T) {
	plugintest.CheckRedisFields(t, Name, `"count":1,"time_window":1`)
	conf := `{"count":1,"time_window":1,"policy":"redis-sentinel","redis_sentinels":[{"host":"127.0.0.1","port":1}],"redis_master_name":"m"}`
	if err := plugins.Check(Name, []byte(conf)); err == nil || !strings.Contains(err.Error(), "not supported yet") {
		t.Errorf("%s: %v, want it refused as not supported yet", conf, err)
	}
	if err := plugins.Check(Name, []byte(redisConf(6379, ""))); err != nil {
		t.Errorf("a valid redis configuration: %v", err)
	}
}
