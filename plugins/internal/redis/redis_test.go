package redis

import (
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"coregate/internal/syncbuf"
	"coregate/plugins/plugintest"
)

var incr = NewScript(`return redis.call('incrby', KEYS[1], ARGV[1])`)

type callWaker struct {
	ch   chan *Call
	call *Call
}

func (w *callWaker) Wake() { w.ch <- w.call }

func newCalls(n int, ch chan *Call) []*Call {
	calls := make([]*Call, n)
	for i := range calls {
		c := &Call{Script: incr, Keys: []string{"k" + strconv.Itoa(i%4)}, Args: []string{"1"}}
		c.Waker = &callWaker{ch: ch, call: c}
		calls[i] = c
	}
	return calls
}

// TestClientBatches: calls submitted together are answered, in one
// pipeline or more, each with its own reply; a script Redis does not know
// is sent with EVAL.
func TestClientBatches(t *testing.T) {
	port := plugintest.RedisServer(t)
	cl := For(Conf{Host: "127.0.0.1", Port: port, Timeout: 2 * time.Second, Keepalive: 10 * time.Second})
	ch := make(chan *Call, 64)
	calls := newCalls(40, ch)
	for _, c := range calls {
		cl.Submit(c)
	}
	seen := map[string][]int64{}
	for range calls {
		select {
		case c := <-ch:
			if c.Err != nil || c.NRep != 1 {
				t.Fatalf("reply %v, %d values", c.Err, c.NRep)
			}
			seen[c.Keys[0]] = append(seen[c.Keys[0]], c.Reply[0])
		case <-time.After(10 * time.Second):
			t.Fatal("a call was not answered")
		}
	}
	for k, vs := range seen {
		got := map[int64]bool{}
		for _, v := range vs {
			got[v] = true
		}
		for i := int64(1); i <= 10; i++ {
			if !got[i] {
				t.Fatalf("key %s: counts %v, want 1..10", k, vs)
			}
		}
	}
}

// TestClientIdle: an unused client closes its connection after
// Keepalive, and the next call connects again.
func TestClientIdle(t *testing.T) {
	port := plugintest.RedisServer(t)
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cl := For(Conf{Host: "127.0.0.1", Port: port, Timeout: 2 * time.Second, Keepalive: 300 * time.Millisecond})
	ch := make(chan *Call, 1)
	call := newCalls(1, ch)[0]
	clients := func() int {
		s, err := plugintest.RedisCommand(addr, "CLIENT", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range splitLines(s) {
			if line != "" {
				n++
			}
		}
		return n - 1 // this connection
	}
	cl.Submit(call)
	<-ch
	if n := clients(); n != 1 {
		t.Fatalf("%d connections after a call, want 1", n)
	}
	deadline := time.Now().Add(5 * time.Second)
	for clients() != 0 {
		if time.Now().After(deadline) {
			t.Fatal("the idle connection was not closed")
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The goroutine ends with the connection.
	for cl.running.Load() {
		if time.Now().After(deadline) {
			t.Fatal("the client's goroutine still runs without a connection")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cl.Submit(call)
	if c := <-ch; c.Err != nil || c.Reply[0] != 2 {
		t.Fatalf("after the idle close: %v, %v", c.Err, c.Reply[0])
	}
}

// TestClientEndsAsCallsCome: calls submitted from many goroutines while
// the client's goroutine keeps ending are all answered: none is left
// behind by a goroutine that ends as it is submitted. The goroutine ends
// after a 1 ms keepalive with a Redis, and after every batch without one
// (a refused connection fails the calls at once and leaves no client).
func TestClientEndsAsCallsCome(t *testing.T) {
	for _, tc := range []struct {
		name        string
		port        int
		calls       int
		wantReplies bool
	}{
		{"redis", plugintest.RedisServer(t), 150, true},
		{"refused", plugintest.FreePort(t), 20000, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := For(Conf{Host: "127.0.0.1", Port: tc.port, Timeout: 2 * time.Second, Keepalive: time.Millisecond})
			const senders = 8
			var wg sync.WaitGroup
			errs := make(chan string, senders)
			for g := range senders {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ch := make(chan *Call, 1)
					call := &Call{Script: incr, Keys: []string{"ends" + strconv.Itoa(g)}, Args: []string{"1"}}
					call.Waker = &callWaker{ch: ch, call: call}
					for i := range tc.calls {
						cl.Submit(call)
						select {
						case c := <-ch:
							if tc.wantReplies && (c.Err != nil || c.Reply[0] != int64(i+1)) {
								errs <- fmt.Sprintf("sender %d, call %d: %v, %d", g, i, c.Err, c.Reply[0])
								return
							}
						case <-time.After(10 * time.Second):
							errs <- fmt.Sprintf("sender %d, call %d: not answered", g, i)
							return
						}
						// Now and then, long enough for the connection
						// and the goroutine to end.
						if tc.wantReplies && i%10 == 0 {
							time.Sleep(2 * time.Millisecond)
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for e := range errs {
				t.Error(e)
			}
		})
	}
}

// TestClientsForgotten: the clients of configurations no plugin instance
// holds any more are forgotten; one still held stays the client of its
// configuration.
func TestClientsForgotten(t *testing.T) {
	// The earlier tests' clients, no longer held, go first: a collection
	// during the count below would otherwise take one of them too.
	before := settledClients()
	held := For(Conf{Host: "127.0.0.1", Port: 1, Timeout: time.Second, Keepalive: time.Second, Database: 1})
	func() {
		// Never used: no goroutine, only the plugin instances'
		// references, held until counted and gone when this returns.
		tmp := make([]*Client, 0, 50)
		for i := range 50 {
			tmp = append(tmp, For(Conf{Host: "127.0.0.1", Port: 1, Timeout: time.Second, Keepalive: time.Second, Database: 100 + i}))
		}
		if n := numClients(); n != before+51 {
			t.Fatalf("%d clients, want %d", n, before+51)
		}
		runtime.KeepAlive(tmp)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for numClients() > before+1 {
		if time.Now().After(deadline) {
			t.Fatalf("%d clients after the collection, want %d", numClients(), before+1)
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if again := For(Conf{Host: "127.0.0.1", Port: 1, Timeout: time.Second, Keepalive: time.Second, Database: 1}); again != held {
		t.Error("the client still held was made again")
	}
	runtime.KeepAlive(held)
}

// settledClients collects until the number of clients stays the same
// over two collections (for at most 5 s), and returns it.
func settledClients() int {
	n := numClients()
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); {
		runtime.GC()
		time.Sleep(20 * time.Millisecond)
		m := numClients()
		if m == n {
			return n
		}
		n = m
	}
	return n
}

func splitLines(s string) []string {
	var out []string
	start := 0
	for i := 0; i < len(s); i++ {
		if s[i] == '\n' {
			out = append(out, s[start:i])
			start = i + 1
		}
	}
	return append(out, s[start:])
}

// BenchmarkSubmit measures the gateway's side of a Redis call: batches of
// 16 (wrk -c16 on one worker), the process's CPU time per call reported
// as cpu-ns/op (Redis's own CPU is not in it).
func BenchmarkSubmit(b *testing.B) {
	port := plugintest.RedisServer(b)
	cl := For(Conf{Host: "127.0.0.1", Port: port, Timeout: 2 * time.Second, Keepalive: 10 * time.Second})
	ch := make(chan *Call, 16)
	calls := newCalls(16, ch)
	var once sync.Once
	var ru0, ru1 syscall.Rusage
	b.ResetTimer()
	for i := 0; i < b.N; i += 16 {
		once.Do(func() { _ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0) })
		for _, c := range calls {
			cl.Submit(c)
		}
		for range calls {
			<-ch
		}
	}
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
	cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) - syscall.TimevalToNsec(ru0.Utime) +
		syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Stime))
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N), "cpu-ns/op")
}

// TestClientLogsFailures: calls to a Redis that cannot be reached are
// logged, the first at once, then one line per logEvery with the count.
func TestClientLogsFailures(t *testing.T) {
	var buf syncbuf.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	port := plugintest.FreePort(t)
	cl := For(Conf{Host: "127.0.0.1", Port: port, Timeout: 200 * time.Millisecond, Keepalive: time.Second})
	ch := make(chan *Call, 4)
	calls := newCalls(3, ch)
	for _, c := range calls {
		cl.Submit(c)
		if got := <-ch; got.Err == nil {
			t.Fatal("a call to nothing succeeded")
		}
	}
	out := buf.String()
	if n := strings.Count(out, "redis calls failed"); n != 1 || !strings.Contains(out, "redis=127.0.0.1:"+strconv.Itoa(port)) {
		t.Fatalf("log:\n%s\nwant one line naming the server", out)
	}
}

// TestClientHungRedis: with Redis hung (SIGSTOP), calls asked one after
// the other, while earlier ones wait, each fail within Timeout of being
// asked, not after the calls before them plus their own Timeout; calls
// asked after the first ones failed too. Once Redis goes on (SIGCONT),
// calls succeed again by themselves.
func TestClientHungRedis(t *testing.T) {
	port, proc := plugintest.RedisProcess(t)
	const timeout = time.Second
	cl := For(Conf{Host: "127.0.0.1", Port: port, Timeout: timeout, Keepalive: 10 * time.Second})
	ask := func(key string) (*Call, time.Duration) {
		ch := make(chan *Call, 1)
		call := &Call{Script: incr, Keys: []string{key}, Args: []string{"1"}}
		call.Waker = &callWaker{ch: ch, call: call}
		start := time.Now()
		cl.Submit(call)
		select {
		case c := <-ch:
			return c, time.Since(start)
		case <-time.After(10 * timeout):
			t.Fatalf("a call to %s was not answered", key)
			return nil, 0
		}
	}
	if c, _ := ask("hung"); c.Err != nil || c.Reply[0] != 1 {
		t.Fatalf("before the hang: %v, %d", c.Err, c.Reply[0])
	}
	resume := plugintest.HangRedis(t, proc)
	// Two waves of eight: the first asked over half a Timeout, while the
	// first call waits; the second after the first wave failed.
	for wave := range 2 {
		var wg sync.WaitGroup
		errs := make(chan string, 8)
		for i := range 8 {
			wg.Go(func() {
				time.Sleep(time.Duration(i) * timeout / 16)
				c, took := ask("hung")
				if c.Err == nil || took > timeout*3/2 {
					errs <- fmt.Sprintf("wave %d, call %d: %v after %v, want an error within %v", wave, i, c.Err, took, timeout*3/2)
				}
			})
		}
		wg.Wait()
		close(errs)
		for e := range errs {
			t.Error(e)
		}
	}
	resume()
	deadline := time.Now().Add(5 * time.Second)
	for {
		c, _ := ask("back")
		if c.Err == nil {
			if c.Reply[0] < 1 {
				t.Fatalf("after the hang: %d", c.Reply[0])
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls still fail after Redis went on: %v", c.Err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	// The connections given up are closed: one is left.
	addr := "127.0.0.1:" + strconv.Itoa(port)
	for {
		s, err := plugintest.RedisCommand(addr, "CLIENT", "LIST")
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for _, line := range splitLines(s) {
			if strings.HasPrefix(line, "id=") {
				n++
			}
		}
		if n == 2 { // and this one
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("%d connections after the hang, want 1:\n%s", n-1, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestClientLogsRealError: the line that counts the calls failed since
// the last one names their error, also when it is logged after Redis came
// back, with a call that succeeded.
func TestClientLogsRealError(t *testing.T) {
	var buf syncbuf.Buffer
	old := slog.Default()
	slog.SetDefault(slog.New(slog.NewTextHandler(&buf, nil)))
	defer slog.SetDefault(old)
	port, proc := plugintest.RedisProcess(t)
	const timeout = 200 * time.Millisecond
	cl := For(Conf{Host: "127.0.0.1", Port: port, Timeout: timeout, Keepalive: 10 * time.Second})
	cl.logEvery = time.Second // before its goroutine starts
	ch := make(chan *Call, 1)
	call := newCalls(1, ch)[0]
	ask := func() error {
		cl.Submit(call)
		select {
		case c := <-ch:
			return c.Err
		case <-time.After(10 * time.Second):
			t.Fatal("a call was not answered")
			return nil
		}
	}
	if err := ask(); err != nil {
		t.Fatal(err)
	}
	resume := plugintest.HangRedis(t, proc)
	hung := time.Now()
	for range 2 { // the first logged at once, the second counted
		if err := ask(); err == nil {
			t.Fatal("a call to a hung Redis succeeded")
		}
	}
	resume()
	time.Sleep(time.Until(hung.Add(cl.logEvery + redialEvery)))
	deadline := time.Now().Add(5 * time.Second)
	for ask() != nil {
		if time.Now().After(deadline) {
			t.Fatal("calls still fail after Redis went on")
		}
		time.Sleep(50 * time.Millisecond)
	}
	var lines []string // this client's: another test's may log too
	for _, line := range splitLines(buf.String()) {
		if strings.Contains(line, "redis=127.0.0.1:"+strconv.Itoa(port)+" ") {
			lines = append(lines, line)
		}
	}
	out := strings.Join(lines, "\n")
	if len(lines) != 2 || strings.Contains(out, "err=<nil>") || !strings.Contains(lines[1], "calls=1 ") ||
		!strings.Contains(lines[1], `err="redis: no reply within 200ms"`) {
		t.Fatalf("log:\n%s\nwant two lines naming the calls' error, the second of one call", out)
	}
}

// TestClientRedialAfterFailure: with Redis hung (SIGSTOP) before the
// client ever connected, and Timeout as long as redialEvery (APISIX's
// default redis_timeout, 1 s), a call's dial fails after Timeout; the
// calls of the next redialEvery fail at once, not each after a dial of
// its own that waits Timeout too; past it the client dials again, and
// once Redis goes on (SIGCONT) calls succeed by themselves.
func TestClientRedialAfterFailure(t *testing.T) {
	port, proc := plugintest.RedisProcess(t)
	resume := plugintest.HangRedis(t, proc)
	const timeout = redialEvery
	cl := For(Conf{Host: "127.0.0.1", Port: port, Timeout: timeout, Keepalive: 10 * time.Second})
	ch := make(chan *Call, 1)
	call := newCalls(1, ch)[0]
	ask := func() (time.Duration, error) {
		start := time.Now()
		cl.Submit(call)
		select {
		case c := <-ch:
			return time.Since(start), c.Err
		case <-time.After(10 * time.Second):
			t.Fatal("a call was not answered")
			return 0, nil
		}
	}
	if took, err := ask(); err == nil || took < timeout/2 || took > timeout*3/2 {
		t.Fatalf("the first call: %v after %v, want an error after its dial's %v", err, took, timeout)
	}
	failed := time.Now()
	var fast int
	for time.Since(failed) < redialEvery*3/4 {
		took, err := ask()
		if err == nil || took > 100*time.Millisecond {
			t.Fatalf("a call %v after the failed dial: %v after %v, want an error at once", time.Since(failed), err, took)
		}
		fast++
		time.Sleep(50 * time.Millisecond)
	}
	time.Sleep(time.Until(failed.Add(redialEvery)))
	if took, err := ask(); err == nil || took < timeout/2 {
		t.Fatalf("a call past redialEvery: %v after %v, want a dial again, failing after %v", err, took, timeout)
	}
	resume()
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, err := ask()
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("calls still fail after Redis went on: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("%d calls failed at once after the failed dial", fast)
}
