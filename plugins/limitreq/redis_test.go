package limitreq

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

// redisConf is a redis-policy configuration for the Redis on port, with
// the fields of extra.
func redisConf(port int, extra string) string {
	return fmt.Sprintf(`{"key":"remote_addr","policy":"redis","redis_host":"127.0.0.1","redis_port":%d%s}`, port, extra)
}

// bucketSequence runs the requests of one client through p: a burst at
// one instant, then more as the clock moves on; it returns their answers.
// The bucket's TTL in Redis, ceil(burst/rate)+1 seconds of real time,
// outlasts the test's requests.
func bucketSequence(p *plugins.Phases) []answer {
	c := newCtx("/").WithRoute("r1")
	var got []answer
	for range 23 {
		got = append(got, run(p, c))
	}
	c.Clock += 1500 * ms
	got = append(got, run(p, c), run(p, c))
	c.Clock += 101 * ms
	got = append(got, run(p, c))
	return got
}

// TestRedisBucket: the redis policy keeps APISIX's leaky bucket in
// Redis: at one instant the first request passes at once, burst more pass
// delayed by excess/rate, the rest are rejected with rejected_code and
// rejected_msg; the bucket drains at the rate. The answers are the local
// policy's, and the bucket is APISIX's hash, limit_req:<route's
// key>:<conf version>:<key's value>, with its excess and last fields.
func TestRedisBucket(t *testing.T) {
	port := plugintest.RedisServer(t)
	const limits = `,"rate":1,"burst":20,"rejected_code":429,"rejected_msg":"slow"`
	reject := answer{Status: 429, Body: `{"error_msg":"slow"}` + "\n"}
	var want []answer
	for i := range 21 {
		want = append(want, answer{200, "", time.Duration(i) * time.Second})
	}
	// 1.5 s later 1500 of the 20000 drained: one passes with 19500 (19.5
	// s), then the bucket is over the burst; 101 ms later 101 drained:
	// 20399 is still over it.
	want = append(want, reject, reject, answer{200, "", 19500 * time.Millisecond}, reject, reject)
	got := bucketSequence(build(t, plugins.NewLocalEnv(), redisConf(port, limits)))
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("redis answers (-want +got):\n%s", d)
	}
	local := bucketSequence(build(t, plugins.NewLocalEnv(), `{"key":"remote_addr"`+limits+`}`))
	if d := cmp.Diff(local, got); d != "" {
		t.Fatalf("redis vs local answers (-local +redis):\n%s", d)
	}

	addr := "127.0.0.1:" + strconv.Itoa(port)
	keys, err := plugintest.RedisCommand(addr, "KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(keys, "limit_req:/apisix/routes/r1:") || !strings.HasSuffix(keys, ":127.0.0.1") || strings.Contains(keys, "\n") {
		t.Fatalf("keys %q", keys)
	}
	fields, err := plugintest.RedisCommand(addr, "HMGET", keys, "excess", "last")
	want2 := fmt.Sprintf("19500\n%d", (t0+1500*ms)/ms)
	if err != nil || fields != want2 {
		t.Fatalf("the bucket: %q, %v; want %q", fields, err, want2)
	}
	if ttl, err := plugintest.RedisCommand(addr, "TTL", keys); err != nil || atoi(ttl) <= 0 || atoi(ttl) > 21 {
		t.Fatalf("the bucket's TTL: %q, %v; want at most 21 s", ttl, err)
	}
}

// TestRedisFraction: an excess that is not a whole number of
// thousandths is kept whole in Redis (as APISIX keeps it), and delays as
// much; nodelay admits within the burst undelayed.
func TestRedisFraction(t *testing.T) {
	port := plugintest.RedisServer(t)
	p := build(t, plugins.NewLocalEnv(), redisConf(port, `,"rate":0.3,"burst":30`))
	c := newCtx("/").WithRoute("r1")
	runAll(t, p, c, []answer{{200, "", 0}})
	// Each 1 ms later: 0.3 thousandths drained, 1000 added; the excess
	// computed as the script does, in doubles, then in millionths.
	rate, excess := 300.0, 0.0
	for range 2 {
		c.Clock += ms
		excess = max(excess-rate*1/1000+1000, 0)
		d := time.Duration(math.Floor(excess*1000) / 1000 / rate * float64(time.Second))
		runAll(t, p, c, []answer{{200, "", d}})
	}
	// 1999.4 thousandths, stored unrounded.
	keys, err := plugintest.RedisCommand("127.0.0.1:"+strconv.Itoa(port), "KEYS", "*")
	if err != nil {
		t.Fatal(err)
	}
	v, err := plugintest.RedisCommand("127.0.0.1:"+strconv.Itoa(port), "HGET", keys, "excess")
	if f, _ := strconv.ParseFloat(v, 64); err != nil || math.Abs(f-excess) > 1e-9 {
		t.Fatalf("the stored excess: %q, %v; want %v", v, err, excess)
	}

	nd := build(t, plugins.NewLocalEnv(), redisConf(port, `,"rate":1,"burst":1,"nodelay":true`))
	runAll(t, nd, newCtx("/").WithRoute("r2"), []answer{{200, "", 0}, {200, "", 0}, {Status: 503}})
}

// TestRedisShared: two gateways whose limit-req uses one Redis share the
// bucket.
func TestRedisShared(t *testing.T) {
	port := plugintest.RedisServer(t)
	conf := redisConf(port, `,"rate":1,"burst":2`)
	gw1 := build(t, plugins.NewLocalEnv(), conf)
	gw2 := build(t, plugins.NewLocalEnv(), conf)
	c := newCtx("/").WithRoute("r1")
	var got []answer
	for _, p := range []*plugins.Phases{gw1, gw2, gw1, gw2, gw1} {
		got = append(got, run(p, c))
		if c.Awaits != 1 {
			t.Fatalf("%d Awaits, want 1", c.Awaits)
		}
	}
	want := []answer{{200, "", 0}, {200, "", time.Second}, {200, "", 2 * time.Second}, {Status: 503}, {Status: 503}}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("answers (-want +got):\n%s", d)
	}
}

// TestRedisDown: without Redis (or with a wrong password) the limiter
// fails: 500, as APISIX's "failed to limit req", or the request passes
// with allow_degradation.
func TestRedisDown(t *testing.T) {
	port := plugintest.FreePort(t) // nothing listens there
	c := newCtx("/").WithRoute("r1")
	runAll(t, build(t, plugins.NewLocalEnv(), redisConf(port, `,"rate":1,"burst":0,"redis_timeout":200`)), c,
		[]answer{{Status: 500}, {Status: 500}})
	runAll(t, build(t, plugins.NewLocalEnv(), redisConf(port, `,"rate":1,"burst":0,"redis_timeout":200,"allow_degradation":true`)), c,
		[]answer{{200, "", 0}, {200, "", 0}})

	auth := plugintest.RedisServer(t, "--requirepass", "s3cret")
	runAll(t, build(t, plugins.NewLocalEnv(), redisConf(auth, `,"rate":1,"burst":0,"redis_password":"wrong"`)), c,
		[]answer{{Status: 500}})
	runAll(t, build(t, plugins.NewLocalEnv(), redisConf(auth, `,"rate":1,"burst":0,"redis_password":"s3cret"`)), c,
		[]answer{{200, "", 0}, {Status: 503}})
}

// TestRedisCluster: the redis-cluster policy keeps each bucket on the
// node that owns its key's slot.
func TestRedisCluster(t *testing.T) {
	nodes := plugintest.RedisCluster(t, 3)
	conf := fmt.Sprintf(`{"rate":1,"burst":1,"key":"remote_addr","policy":"redis-cluster","redis_cluster_name":"c1","redis_cluster_nodes":["%s"]}`, nodes[0])
	p := build(t, plugins.NewLocalEnv(), conf)
	owners := map[string]bool{}
	for i := range 12 {
		ip := "10.0.0." + strconv.Itoa(i+1)
		c := newCtx("/").WithRoute("r1").WithVar("remote_addr", ip)
		runAll(t, p, c, []answer{{200, "", 0}, {200, "", time.Second}, {Status: 503}})
		for _, n := range nodes {
			if keys, err := plugintest.RedisCommand(n, "KEYS", "limit_req:*"+ip); err == nil && keys != "" {
				owners[n] = true
			}
		}
	}
	if len(owners) < 2 {
		t.Fatalf("12 clients' buckets on %d node(s), want them spread over the cluster", len(owners))
	}
}

// TestRedisCheck: the Redis fields are checked; valid redis and
// redis-cluster configurations pass; redis-sentinel is not in the schema.
func TestRedisCheck(t *testing.T) {
	plugintest.CheckRedisFields(t, Name, `"rate":1,"burst":1,"key":"remote_addr"`)
	conf := `{"rate":1,"burst":1,"key":"remote_addr","policy":"redis-sentinel"}`
	if err := plugins.Check(Name, json.RawMessage(conf)); err == nil || !strings.Contains(err.Error(), `property "policy" validation failed`) {
		t.Errorf("%s: %v, want the schema's refusal of the policy", conf, err)
	}
}

func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}
