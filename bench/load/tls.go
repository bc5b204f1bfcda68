package load

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"coregate/bench/hdr"
)

// runTLS is Run with Config.TLS: one goroutine per connection, each with
// a crypto/tls client connection over a net.Conn (the Go runtime's
// netpoller is the event loop), its own buffer, parser and latency
// histogram, merged at the end. The schedule is Run's: a closed loop, or
// with Rate each connection's requests due at fixed intervals and timed
// from when they were due. With NewConn each request dials, handshakes
// (resuming when cfg.TLS.ClientSessionCache holds a ticket for the
// server), sends, reads the response and closes; the handshake is part of
// the request's latency. Result.Handshakes and Result.Resumed count the
// handshakes and those that resumed a session, so that a caller can check
// that a server did what it was configured to (full handshakes only,
// or resumption).
//
// Unlike the epoll loop, this generator allocates per connection (dial,
// handshake, crypto/tls's buffers); on kept-alive connections a request
// costs crypto/tls's record encryption and a goroutine wake-up.
func runTLS(cfg Config) (Result, error) {
	if _, err := cfg.defaults(); err != nil {
		return Result{}, err
	}
	req := "GET " + cfg.Path + " HTTP/1.1\r\nHost: " + cfg.Host + "\r\n" + cfg.Header
	if cfg.NewConn {
		req += "Connection: close\r\n"
	}
	t := &tlsRun{cfg: cfg, req: []byte(req + "\r\n"), start: time.Now(), stop: make(chan struct{})}
	if cfg.Rate > 0 {
		t.interval = time.Duration(float64(cfg.Conns) / cfg.Rate * 1e9)
	}
	// The first connection is opened before the others start: an address
	// nobody listens on is an error, not a run of failed connects.
	first, err := t.dial()
	if err != nil {
		return Result{Latency: hdr.New()}, fmt.Errorf("load: connect %s: %w", cfg.Addr, err)
	}
	if cfg.NewConn {
		first.Close()
		first = nil
	}
	parts := make([]Result, cfg.Conns)
	var wg sync.WaitGroup
	for i := range cfg.Conns {
		var c *tls.Conn
		if i == 0 {
			c = first
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i] = t.conn(i, c)
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	t.watch(done)
	res := Result{Latency: hdr.New()}
	for _, p := range parts {
		res.Add(p)
	}
	res.Elapsed = min(time.Since(t.start), cfg.Duration)
	return res, nil
}

// tlsRun is one runTLS call's shared state: the counters every connection
// adds to (atomics, read by watch) and what they read only.
type tlsRun struct {
	cfg      Config
	req      []byte
	start    time.Time
	interval time.Duration // per connection, with Rate
	stop     chan struct{} // closed when the run ends early (Stop, MaxRequests)
	stopped  atomic.Bool
	sent     atomic.Uint64 // requests begun, against MaxRequests
	requests atomic.Uint64
	errors   atomic.Uint64
}

// watch reports progress each second and ends the run early on
// Config.Stop or MaxRequests, until done is closed.
func (t *tlsRun) watch(done chan struct{}) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	nextProgress := time.Second
	for {
		select {
		case <-done:
			return
		case <-tick.C:
		}
		el := time.Since(t.start)
		if t.cfg.Progress != nil && el >= nextProgress {
			t.cfg.Progress(Progress{Elapsed: el, Requests: t.requests.Load(), Errors: t.errors.Load()})
			nextProgress += time.Second
		}
		if t.cfg.Stop != nil && t.cfg.Stop.Load() {
			t.end()
		}
	}
}

// end stops every connection's loop; safe to call more than once.
func (t *tlsRun) end() {
	if t.stopped.CompareAndSwap(false, true) {
		close(t.stop)
	}
}

func (t *tlsRun) dial() (*tls.Conn, error) {
	raw, err := net.DialTimeout("tcp", t.cfg.Addr, t.cfg.Timeout)
	if err != nil {
		return nil, err
	}
	return tls.Client(raw, t.cfg.TLS), nil
}

// conn runs connection i's loop until the run ends and returns its
// counts; c, if not nil, is its first connection, not yet handshaken.
func (t *tlsRun) conn(i int, c *tls.Conn) Result {
	cfg := t.cfg
	res := Result{Latency: hdr.New()}
	if cfg.SlowOver > 0 {
		res.Slow = make([]Slow, 0, MaxSlow)
	}
	defer func() {
		if c != nil {
			c.Close()
		}
	}()
	buf := make([]byte, bufSize)
	end := t.start.Add(cfg.Duration)
	next := t.start.Add(time.Duration(i) * t.interval / time.Duration(cfg.Conns))
	wait := time.NewTimer(time.Hour)
	wait.Stop()
	fail := func() {
		if time.Now().Before(end) && !t.stopped.Load() {
			res.Errors++
			t.errors.Add(1)
		}
		if c != nil {
			c.Close()
			c = nil
			res.Reconnects++
		}
	}
	for {
		if t.stopped.Load() {
			return res
		}
		due := time.Now()
		if cfg.Rate > 0 {
			due, next = next, next.Add(t.interval)
			if d := time.Until(due); d > 0 {
				wait.Reset(d)
				select {
				case <-wait.C:
				case <-t.stop:
					wait.Stop()
					return res
				}
			}
		}
		if !time.Now().Before(end) {
			return res
		}
		if cfg.MaxRequests > 0 && t.sent.Add(1) > cfg.MaxRequests {
			t.end()
			return res
		}
		if c == nil {
			var err error
			if c, err = t.dial(); err != nil {
				fail()
				time.Sleep(10 * time.Millisecond)
				continue
			}
		}
		_ = c.SetDeadline(minTime(end, time.Now().Add(cfg.Timeout)))
		if !c.ConnectionState().HandshakeComplete {
			if err := c.Handshake(); err != nil {
				fail()
				continue
			}
			res.Handshakes++
			if c.ConnectionState().DidResume {
				res.Resumed++
			}
		}
		if _, err := c.Write(t.req); err != nil {
			fail()
			continue
		}
		p, ok := t.response(c, buf)
		if !ok {
			fail()
			continue
		}
		now := time.Now()
		if now.After(end) {
			return res // finished after the end: not counted, as wrk does
		}
		res.Requests++
		t.requests.Add(1)
		if p.status < 200 || p.status > 299 {
			res.Non2xx++
		}
		lat := now.Sub(due)
		res.Latency.Record(uint64(lat))
		if cfg.SlowOver > 0 && lat > cfg.SlowOver && len(res.Slow) < cap(res.Slow) {
			res.Slow = append(res.Slow, Slow{Due: due, Latency: lat})
		}
		if p.close || cfg.NewConn {
			c.Close()
			c = nil
		}
	}
}

// response reads one whole response from c into buf and returns its
// parser; ok is false on a read error, a malformed response or bytes
// after it.
func (t *tlsRun) response(c *tls.Conn, buf []byte) (parser, bool) {
	var p parser
	n := 0
	for {
		k, err := c.Read(buf[n:])
		n += k
		if k > 0 {
			used, done, perr := p.feed(buf[:n], maxHead)
			if perr != nil {
				return p, false
			}
			if done {
				return p, used == n
			}
			copy(buf, buf[used:n])
			n -= used
			if n == len(buf) {
				return p, false
			}
		}
		if err != nil {
			return p, errors.Is(err, io.EOF) && p.eof()
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}
