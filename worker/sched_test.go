package worker

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"runtime/trace"
	"sync"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2/pkg/netpoll"
	xtrace "golang.org/x/exp/trace"
)

// loadEnv names the address the test binary floods with pipelined requests
// when it runs as TestLoopKeepsItsP's load process.
const loadEnv = "COREGATE_TEST_FLOOD"

func TestMain(m *testing.M) {
	if addr := os.Getenv(loadEnv); addr != "" {
		flood(addr, 30*time.Second, os.Stdout)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// flood keeps 8 connections busy with pipelined requests to addr for d,
// or until it is killed. It writes a line to ready once the first answers
// came back: the flood is flowing.
func flood(addr string, d time.Duration, ready io.Writer) {
	const conns, depth = 8, 16
	req := bytes.Repeat([]byte("GET /none HTTP/1.1\r\nHost: a\r\n\r\n"), depth)
	end := time.Now().Add(d)
	done := make(chan struct{}, conns)
	var flowing sync.Once
	for range conns {
		go func() {
			defer func() { done <- struct{}{} }()
			c, err := net.Dial("tcp", addr)
			if err != nil {
				return
			}
			defer c.Close()
			br := bufio.NewReaderSize(c, 64<<10)
			for time.Now().Before(end) {
				if _, err := c.Write(req); err != nil {
					return
				}
				for range depth {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						return
					}
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil {
						return
					}
				}
				flowing.Do(func() { _, _ = io.WriteString(ready, "flowing\n") })
			}
		}()
	}
	for range conns {
		<-done
	}
}

// TestLoopKeepsItsP: run as the supervisor runs a worker (GOMAXPROCS =
// Procs) and flooded by another process, the event loop passes through the
// Go scheduler about once per netpoll.YieldInterval, and the runtime seldom
// takes its P away while it is in a system call (the goroutine seldom comes
// out of a syscall without its P). Upstream gnet yields only after empty
// polls: a busy loop then goes 10 ms without one, and sysmon, taking it for
// a goroutine that hogs its P, retakes the P at its next system call. Read
// from an execution trace of the worker. The loop's reads and writes are
// raw system calls, which the trace does not see
// (third_party/gnet/COREGATE.md, change 6): the loop is the goroutine that
// yields most, and the flood is counted in requests.
func TestLoopKeepsItsP(t *testing.T) {
	prev := runtime.GOMAXPROCS(Procs)
	defer runtime.GOMAXPROCS(prev)
	w := startWorker(t, nil)

	load := exec.Command(os.Args[0], "-test.run=^$")
	load.Env = append(os.Environ(), loadEnv+"="+w.Addr().String())
	load.Stderr = os.Stderr
	out, err := load.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := load.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		_ = load.Process.Kill()
		_ = load.Wait()
	}()
	// Trace once the flood flows, however long the load process took to
	// start on a busy machine.
	flowing := make(chan error, 1)
	go func() {
		_, err := bufio.NewReader(out).ReadString('\n')
		flowing <- err
	}()
	select {
	case err := <-flowing:
		if err != nil {
			t.Fatalf("the load process ended before its requests were answered: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the load process's requests were not answered within 20 s")
	}
	time.Sleep(500 * time.Millisecond) // every connection flowing

	var buf bytes.Buffer
	if err := trace.Start(&buf); err != nil {
		t.Fatal(err)
	}
	const window = time.Second
	before := w.cfg.Node.Requests.Load()
	time.Sleep(window)
	served := w.cfg.Node.Requests.Load() - before
	trace.Stop()

	st, err := loopStats(&buf)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("loop goroutine over %v: %d requests, %d system calls seen, %d yields, %d times out of a syscall without its P",
		window, served, st.syscalls, st.yields, st.lostP)
	if served < 1000 {
		t.Fatalf("the worker served %d requests in %v: not flooded, nothing to judge", served, window)
	}
	// The loop blocks in epoll_wait whenever the flood pauses (one
	// blocking poll per wake-up), and the flooding process shares the
	// machine's CPUs with it, so it is busy for part of the window only:
	// an eighth of the nominal rate still tells a loop that yields on its
	// clock from one that yields only after empty polls (none while busy).
	if want := int(window / netpoll.YieldInterval / 8); st.yields < want {
		t.Errorf("the loop yielded %d times in %v, want at least %d (once per %v while busy)",
			st.yields, window, want, netpoll.YieldInterval)
	}
	// A loop that yields only after empty polls loses its P about once
	// per 10 ms of work (and fails the yields check above); this one
	// loses it a few times a second, up to about 25 under the race
	// detector beside the flood.
	if st.lostP > 50 {
		t.Errorf("the loop lost its P in %d system calls in %v, want next to none", st.lostP, window)
	}
}

type loopCounts struct{ syscalls, yields, lostP int }

// loopStats reads an execution trace and returns the counts of the
// goroutine that yielded most: the event loop.
func loopStats(r io.Reader) (loopCounts, error) {
	tr, err := xtrace.NewReader(r)
	if err != nil {
		return loopCounts{}, err
	}
	byG := map[xtrace.GoID]*loopCounts{}
	for {
		ev, err := tr.ReadEvent()
		if err == io.EOF {
			break
		}
		if err != nil {
			return loopCounts{}, err
		}
		if ev.Kind() != xtrace.EventStateTransition {
			continue
		}
		st := ev.StateTransition()
		if st.Resource.Kind != xtrace.ResourceGoroutine {
			continue
		}
		id := st.Resource.Goroutine()
		c := byG[id]
		if c == nil {
			c = &loopCounts{}
			byG[id] = c
		}
		switch from, to := st.Goroutine(); {
		case from == xtrace.GoRunning && to == xtrace.GoSyscall:
			c.syscalls++
		case from == xtrace.GoRunning && to == xtrace.GoRunnable:
			c.yields++
		case from == xtrace.GoSyscall && to == xtrace.GoRunnable:
			c.lostP++
		}
	}
	var best loopCounts
	for _, c := range byG {
		if c.yields > best.yields {
			best = *c
		}
	}
	return best, nil
}
