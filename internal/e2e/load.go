package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Exchange sends one GET for path on c and reads the whole answer,
// checking that the body is as long as Content-Length says.
func Exchange(c net.Conn, br *bufio.Reader, path string, closeConn bool) (status int, close bool, err error) {
	req := "GET " + path + " HTTP/1.1\r\nHost: pc.test\r\n"
	if closeConn {
		req += "Connection: close\r\n"
	}
	if _, err := io.WriteString(c, req+"\r\n"); err != nil {
		return 0, false, &ExchangeError{Stage: "write", Err: err}
	}
	if _, err := br.Peek(1); err != nil {
		return 0, false, &ExchangeError{Stage: "await", Err: err}
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
	if err != nil {
		return 0, false, &ExchangeError{Stage: "head", Err: err, Started: true}
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		return resp.StatusCode, false, &ExchangeError{Stage: "body", Err: err, Started: true}
	}
	if resp.ContentLength >= 0 && int64(len(body)) != resp.ContentLength {
		return resp.StatusCode, false, &ExchangeError{Stage: "body", Err: fmt.Errorf("%d bytes of %d", len(body), resp.ContentLength), Started: true}
	}
	return resp.StatusCode, resp.Close, nil
}

// ExchangeError says where an exchange failed: Started is set when part of
// an answer had arrived.
type ExchangeError struct {
	Stage   string // write, await, head or body
	Err     error
	Started bool
}

func (e *ExchangeError) Error() string { return e.Stage + ": " + e.Err.Error() }
func (e *ExchangeError) Unwrap() error { return e.Err }

// IsRefused reports a refused connection.
func IsRefused(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// LoadOutcome is what one connection of a load loop ended with.
type LoadOutcome struct {
	Seq    uint64 // the connection's number in the load, from 1
	Port   int    // client port, 0 when the dial failed
	Status int
	Err    error
}

// NewConnLoad is a bounded load of new connections: n goroutines that each
// open a new connection, send one request for path with Connection: close
// and read the whole answer (each within 6 s), until Finish, at most 100000
// connections each. Every connection's outcome is kept. Its methods are
// safe for concurrent use.
type NewConnLoad struct {
	wg   sync.WaitGroup
	stop chan struct{}
	mu   sync.Mutex
	res  []LoadOutcome
	seq  atomic.Uint64
	// inflight maps the client ports of the connections waiting for an
	// answer now to their seq.
	inflight map[int]uint64
}

// StartNewConnLoad starts a NewConnLoad on addr; with stopOnRefused, a
// goroutine ends at its first refused dial.
func StartNewConnLoad(addr, path string, n int, stopOnRefused bool) *NewConnLoad {
	l := &NewConnLoad{stop: make(chan struct{}), inflight: map[int]uint64{}}
	for range n {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			// Bounded: at most 100000 connections, each within 6 s.
			for range 100000 {
				select {
				case <-l.stop:
					return
				default:
				}
				o := l.one(addr, path)
				l.mu.Lock()
				l.res = append(l.res, o)
				l.mu.Unlock()
				if stopOnRefused && o.Port == 0 && IsRefused(o.Err) {
					return
				}
			}
		}()
	}
	return l
}

func (l *NewConnLoad) one(addr, path string) LoadOutcome {
	seq := l.seq.Add(1)
	c, err := net.DialTimeout("tcp", addr, 3*time.Second)
	if err != nil {
		return LoadOutcome{Seq: seq, Err: err}
	}
	defer c.Close()
	port := LocalPort(c)
	l.mu.Lock()
	l.inflight[port] = seq
	l.mu.Unlock()
	defer func() {
		l.mu.Lock()
		delete(l.inflight, port)
		l.mu.Unlock()
	}()
	_ = c.SetDeadline(time.Now().Add(6 * time.Second))
	status, _, err := Exchange(c, bufio.NewReader(c), path, true)
	return LoadOutcome{Seq: seq, Port: port, Status: status, Err: err}
}

// InFlight returns the connections waiting for an answer now: client port
// to seq.
func (l *NewConnLoad) InFlight() map[int]uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make(map[int]uint64, len(l.inflight))
	for p, seq := range l.inflight {
		out[p] = seq
	}
	return out
}

// Finish stops the load and returns every outcome.
func (l *NewConnLoad) Finish() []LoadOutcome {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.res
}

// SteadyLoad is a bounded load of GET requests for one URL: one goroutine
// per client given, each sending one request after the other (pause
// between two), at most 300000, until End. A request answered 200 counts
// in OK; any other outcome is a failure, kept with the time it happened.
// Its methods are safe for concurrent use.
type SteadyLoad struct {
	OK       atomic.Int64
	stop     atomic.Bool
	wg       sync.WaitGroup
	mu       sync.Mutex
	failures []string
}

// StartSteadyLoad starts a SteadyLoad on url through clients; their idle
// connections are closed when it ends.
func StartSteadyLoad(url string, pause time.Duration, clients ...*http.Client) *SteadyLoad {
	l := &SteadyLoad{}
	for _, c := range clients {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			defer c.CloseIdleConnections()
			for n := 0; !l.stop.Load() && n < 300000; n++ {
				r, err := TryDo(c, "GET", url, "", nil, nil)
				switch {
				case err != nil:
					l.fail(time.Now().Format("15:04:05.000") + " " + err.Error())
				case r.Status != 200:
					l.fail(fmt.Sprintf("%s status %d %q", time.Now().Format("15:04:05.000"), r.Status, r.Body))
				default:
					l.OK.Add(1)
				}
				if pause > 0 {
					time.Sleep(pause)
				}
			}
		}()
	}
	return l
}

func (l *SteadyLoad) fail(s string) {
	l.mu.Lock()
	l.failures = append(l.failures, s)
	l.mu.Unlock()
}

// End stops the load, waits for its requests in flight, and returns the
// requests answered 200 and the failures.
func (l *SteadyLoad) End() (int64, []string) {
	l.stop.Store(true)
	l.wg.Wait()
	return l.OK.Load(), l.failures
}
