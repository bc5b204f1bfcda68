package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// TestReloadAnswersEveryRequest: config.yaml changes and SIGHUP replaces
// the workers, several times over, then SIGTERM stops the gateway, while
// clients that never retry keep POSTing on kept-alive connections. Every
// request a client wrote gets its own answer, whole: a replaced or stopping
// worker lets each kept-alive connection finish its next exchange, answered
// with Connection: close, instead of closing it between two requests while
// a request may be on its way. A refused connection after SIGTERM is fine:
// nothing was sent on it.
func TestReloadAnswersEveryRequest(t *testing.T) {
	cpus := requirePerCore(t)
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(w, r.Body)
	})
	const (
		clients  = 16
		reloads  = 4
		deadline = 8 * time.Second
	)
	config := func(tokens bool) func(port int) string {
		return func(port int) string {
			return strings.Replace(perCoreConfig(port, 2), "  enable_admin: false\n",
				fmt.Sprintf("  enable_admin: false\n  enable_server_tokens: %v\n", tokens), 1)
		}
	}
	g := startSupervisor(t, routesYAML(obj{"uri": "/echo", "upstream": upstreamOf(nodes(up.Addr()), nil)}),
		config(true), 2, "--cpus", cpuList(cpus), "--shutdown-timeout", deadline.String())
	load := startPostLoad(g.Addr(), clients)
	defer load.finish()

	// progress waits until the clients got n more answers.
	progress := func(what string, n int64) {
		t.Helper()
		from := load.answered.Load()
		eventually(t, 10*time.Second, func() error {
			if got := load.answered.Load() - from; got < n {
				return fmt.Errorf("%s: %d answers, want %d", what, got, n)
			}
			return nil
		})
	}
	progress("before the first reload", 200)
	for i := range reloads {
		writeFile(t, filepath.Join(g.dir, "config.yaml"), config(i%2 == 1)(g.port))
		if err := g.cmd.Process.Signal(syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		// Both replaced workers drained and exited.
		g.waitLog(`msg="replaced worker exited"`, 2*(i+1), deadline+5*time.Second)
		progress(fmt.Sprintf("after reload %d", i+1), 200)
	}

	load.stopping.Store(true)
	g.stopped.Store(true)
	if err := g.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-g.done:
	case <-time.After(deadline + 5*time.Second):
		t.Fatalf("the gateway did not stop within %v of SIGTERM", deadline+5*time.Second)
	}
	if code := g.cmd.ProcessState.ExitCode(); code != 0 {
		t.Errorf("exit status %d on SIGTERM, want 0", code)
	}
	st := load.finish()
	for i, f := range st.failures {
		if i == 10 {
			t.Errorf("... %d failures in all", len(st.failures))
			break
		}
		t.Error(f)
	}
	t.Logf("%d clients across %d reloads and a graceful stop: %d requests answered (%d with Connection: close), "+
		"%d refused connections after SIGTERM, %d requests unanswered or wrong",
		clients, reloads, st.answered, st.closes, st.refused, len(st.failures))
	if strings.Count(g.out.String(), `msg="worker replaced"`) != 2*reloads {
		t.Errorf("want %d worker replacements logged", 2*reloads)
	}
}

// postLoad runs clients that each POST a body of their own, one request
// after the other, on a kept-alive connection; they never retry: a request
// written and not answered whole, with its own body echoed, is a failure.
// A client opens a new connection after an answer with Connection: close,
// or after a failure; it stops at a refused connection once the gateway is
// stopping, or at any other failed dial.
type postLoad struct {
	wg       sync.WaitGroup
	stop     chan struct{}
	once     sync.Once
	stopping atomic.Bool // refused connections are expected from now on
	answered atomic.Int64

	mu       sync.Mutex
	closes   int
	refused  int
	failures []string
}

type postLoadStats struct {
	answered, closes, refused int
	failures                  []string
}

func startPostLoad(addr string, n int) *postLoad {
	l := &postLoad{stop: make(chan struct{})}
	for id := range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			l.client(addr, id)
		}()
	}
	return l
}

func (l *postLoad) fail(format string, args ...any) {
	l.mu.Lock()
	l.failures = append(l.failures, fmt.Sprintf(format, args...))
	l.mu.Unlock()
}

// client sends at most 100000 requests, each answered within 10 s.
func (l *postLoad) client(addr string, id int) {
	var c net.Conn
	var br *bufio.Reader
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	for seq := range 100000 {
		select {
		case <-l.stop:
			return
		default:
		}
		if c == nil {
			var err error
			c, err = net.DialTimeout("tcp", addr, 3*time.Second)
			if err != nil {
				c = nil
				if l.stopping.Load() && errors.Is(err, syscall.ECONNREFUSED) {
					l.mu.Lock()
					l.refused++
					l.mu.Unlock()
				} else {
					l.fail("client %d: dial: %v", id, err)
				}
				return
			}
			br = bufio.NewReader(c)
		}
		body := fmt.Sprintf("client %d request %d %s", id, seq, strings.Repeat("b", seq%97))
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		req := fmt.Sprintf("POST /echo HTTP/1.1\r\nHost: drain.test\r\nContent-Type: text/plain\r\nContent-Length: %d\r\n\r\n%s", len(body), body)
		if _, err := io.WriteString(c, req); err != nil {
			l.fail("client %d request %d (port %d): write: %v", id, seq, localPort(c), err)
			c.Close()
			c = nil
			continue
		}
		resp, err := http.ReadResponse(br, &http.Request{Method: "POST"})
		if err != nil {
			l.fail("client %d request %d (port %d): no answer: %v", id, seq, localPort(c), err)
			c.Close()
			c = nil
			continue
		}
		got, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != 200 || string(got) != body {
			l.fail("client %d request %d (port %d): %d %q, %v", id, seq, localPort(c), resp.StatusCode, got, err)
			c.Close()
			c = nil
			continue
		}
		l.answered.Add(1)
		if resp.Close {
			l.mu.Lock()
			l.closes++
			l.mu.Unlock()
			c.Close()
			c = nil
		}
		if id%4 == 0 {
			// Some clients think between two requests, which leaves
			// their connection idle for longer.
			time.Sleep(time.Duration(seq%5) * time.Millisecond)
		}
	}
}

// finish stops the clients and returns what they saw.
func (l *postLoad) finish() postLoadStats {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return postLoadStats{answered: int(l.answered.Load()), closes: l.closes, refused: l.refused, failures: l.failures}
}
