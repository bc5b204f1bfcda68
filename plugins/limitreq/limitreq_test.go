package limitreq

import (
	"encoding/json"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"coregate/plugins"
	"coregate/plugins/plugintest"
)

func build(t testing.TB, env plugins.Env, conf string) *plugins.Phases {
	t.Helper()
	p, err := plugins.Default.BuildPhases(map[string]json.RawMessage{Name: json.RawMessage(conf)}, env)
	if err != nil {
		t.Fatalf("build %s: %v", conf, err)
	}
	return &p
}

// answer is what one request got: its status, body and delay.
type answer struct {
	Status int
	Body   string
	Delay  time.Duration
}

func run(p *plugins.Phases, c *plugintest.Ctx) answer {
	c.Reset()
	plugintest.Run(p, c)
	return answer{Status: c.Status(), Body: string(c.Body), Delay: c.Delayed}
}

const (
	ms = int64(time.Millisecond)
	t0 = 1_700_000_000 * int64(time.Second)
)

func newCtx(target string) *plugintest.Ctx {
	c := plugintest.NewCtx("GET", target)
	c.Clock = t0
	return c
}

func runAll(t *testing.T, p *plugins.Phases, c *plugintest.Ctx, want []answer) {
	t.Helper()
	var got []answer
	for range want {
		got = append(got, run(p, c))
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Fatalf("answers (-want +got):\n%s", d)
	}
}

// TestBucket: at one instant, the first request passes at once, burst
// more pass delayed by excess/rate (1 s, 2 s at a rate of 1/s), the next
// is rejected; the bucket drains at the rate as time passes.
func TestBucket(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"rate":1,"burst":2,"key":"remote_addr"}`)
	c := newCtx("/")
	reject := answer{Status: 503, Body: ""}
	runAll(t, p, c, []answer{{200, "", 0}, {200, "", time.Second}, {200, "", 2 * time.Second}, reject, reject})
	// 1.5 s later: 1500 of the 2000 drained; 1500 > 2000-1000, no room.
	c.Clock += 1500 * ms
	runAll(t, p, c, []answer{{200, "", 1500 * time.Millisecond}, reject})
	// Much later the bucket is empty again.
	c.Clock += 10_000 * ms
	runAll(t, p, c, []answer{{200, "", 0}, {200, "", time.Second}})
}

// TestNoDelay: nodelay admits the burst at once; rejected_msg and
// rejected_code make the rejection.
func TestNoDelay(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"rate":10,"burst":1,"key":"remote_addr","nodelay":true,"rejected_code":429,"rejected_msg":"slow / down"}`)
	c := newCtx("/")
	reject := answer{Status: 429, Body: `{"error_msg":"slow \/ down"}` + "\n"}
	runAll(t, p, c, []answer{{200, "", 0}, {200, "", 0}, reject})
	// 100 ms drain one request at 10/s.
	c.Clock += 100 * ms
	runAll(t, p, c, []answer{{200, "", 0}, reject})
}

// TestKeys: a key's bucket is its own; a variable without a value, or a
// combination that resolves nothing, is the client's address.
func TestKeys(t *testing.T) {
	env := plugins.NewLocalEnv()
	p := build(t, env, `{"rate":1,"burst":0,"key":"http_x_user"}`)
	reject := answer{Status: 503}
	runAll(t, p, newCtx("/").WithHeader("X-User", "ann"), []answer{{200, "", 0}, reject})
	runAll(t, p, newCtx("/").WithHeader("X-User", "bob"), []answer{{200, "", 0}, reject})
	// No X-User: the address, 127.0.0.1; then the same address as a
	// value of another route's key is another bucket (the route's id).
	runAll(t, p, newCtx("/"), []answer{{200, "", 0}, reject})
	runAll(t, p, newCtx("/").WithRoute("2"), []answer{{200, "", 0}, reject})

	q := build(t, env, `{"rate":1,"burst":0,"key_type":"var_combination","key":"$http_x_a-$arg_b"}`)
	runAll(t, q, newCtx("/?b=1").WithHeader("X-A", "x"), []answer{{200, "", 0}, reject})
	runAll(t, q, newCtx("/?b=2").WithHeader("X-A", "x"), []answer{{200, "", 0}, reject})
	runAll(t, q, newCtx("/").WithVar("remote_addr", "10.0.0.9"), []answer{{200, "", 0}, reject})

	// A changed configuration is a new bucket, the same one the same.
	runAll(t, build(t, env, `{"rate":1,"burst":0,"key":"http_x_user"}`), newCtx("/").WithHeader("X-User", "ann"), []answer{reject})
	runAll(t, build(t, env, `{"rate":1,"burst":0.5,"key":"http_x_user"}`), newCtx("/").WithHeader("X-User", "ann"), []answer{{200, "", 0}, reject})
}

// TestDegradation: with no room in the counter table the limiter fails:
// 500, or the request passes with allow_degradation.
func TestDegradation(t *testing.T) {
	env := plugins.NewLocalEnv()
	env.Counters = plugins.NewCounterTable(0)
	runAll(t, build(t, env, `{"rate":1,"burst":0,"key":"remote_addr"}`), newCtx("/"), []answer{{Status: 500}})
	runAll(t, build(t, env, `{"rate":1,"burst":0,"key":"remote_addr","allow_degradation":true}`), newCtx("/"), []answer{{200, "", 0}, {200, "", 0}})
}

// TestWindowEnds: when its word's window ends the bucket starts empty.
func TestWindowEnds(t *testing.T) {
	p := build(t, plugins.NewLocalEnv(), `{"rate":1,"burst":0,"key":"remote_addr"}`)
	c := newCtx("/")
	runAll(t, p, c, []answer{{200, "", 0}})
	c.Clock += int64(bucketWindow) - 500*ms
	runAll(t, p, c, []answer{{200, "", 0}, {Status: 503}})
	c.Clock += 501 * ms
	runAll(t, p, c, []answer{{200, "", 0}, {Status: 503}})
}

// TestExactAcrossInstances: instances sharing a counter table (as the
// workers of a node share theirs), each on its own goroutine, admit
// exactly burst+1 requests at one instant between them.
func TestExactAcrossInstances(t *testing.T) {
	env := plugins.NewLocalEnv()
	const conf = `{"rate":1,"burst":1999,"key":"remote_addr","nodelay":true}`
	var passed, rejected atomic.Int64
	var wg sync.WaitGroup
	for range 16 {
		p := build(t, env, conf)
		wg.Go(func() {
			c := newCtx("/")
			for range 400 {
				if run(p, c).Status == 200 {
					passed.Add(1)
				} else {
					rejected.Add(1)
				}
			}
		})
	}
	wg.Wait()
	if passed.Load() != 2000 || rejected.Load() != 16*400-2000 {
		t.Fatalf("%d passed, %d rejected; want 2000 and %d", passed.Load(), rejected.Load(), 16*400-2000)
	}
}

// TestBuildRefuses: what the schema refuses and what Build does not run.
func TestBuildRefuses(t *testing.T) {
	for _, conf := range []string{`{"burst":1,"key":"remote_addr"}`, `{"rate":0,"burst":1,"key":"remote_addr"}`,
		`{"rate":1,"burst":-1,"key":"remote_addr"}`, `{"rate":1,"burst":1,"key":"remote_addr","key_type":"constant"}`,
		`{"rate":1,"burst":1,"key":"remote_addr","policy":"redis"}`} {
		if err := plugins.Check(Name, json.RawMessage(conf)); err == nil {
			t.Errorf("%s passed the checks", conf)
		}
	}
	for conf, want := range map[string]string{
		`{"rate":1,"burst":2e9,"key":"remote_addr"}`: `burst 2e+09 is over`,
	} {
		// refused by the check (the Admin API's 400) and by Build alike
		if err := plugins.Check(Name, json.RawMessage(conf)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: check error %v, want %q", conf, err, want)
		}
		_, err := plugins.Default.Build(map[string]json.RawMessage{Name: json.RawMessage(conf)}, plugins.NewLocalEnv())
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: build error %v, want %q", conf, err, want)
		}
	}
}
