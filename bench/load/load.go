package load

import (
	"crypto/tls"
	"fmt"
	"math"
	"net/netip"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"coregate/bench/hdr"

	"golang.org/x/sys/unix"
)

// Config describes one run.
type Config struct {
	Addr        string         // target host:port, IPv4
	Path        string         // request target; default "/hello"
	Host        string         // Host header; default Addr
	Header      string         // extra header lines, each ending in CRLF
	Conns       int            // connections; default 16
	Threads     int            // event loops, each on its own OS thread with its share of Conns and Rate; default 1
	Duration    time.Duration  // measured time; must be > 0
	Rate        float64        // total requests per second; 0 runs a closed loop
	MaxRequests uint64         // stop after this many responses; 0 for no limit
	Timeout     time.Duration  // a response slower than this is an error; default 2 s
	Progress    func(Progress) // if set, called about once a second on the generator's thread
	// Stop, if set, ends the run early once it reads true (within the
	// generator's 100 ms tick); Elapsed is then the time run.
	Stop *atomic.Bool
	// SlowOver, if set, has each response slower than it kept in
	// Result.Slow, up to MaxSlow of them per generator (room made before
	// the run, so that a slow response costs no allocation).
	SlowOver time.Duration
	// TLS, if set, has every connection speak TLS as a client with this
	// configuration (crypto/tls, a goroutine per connection: see runTLS);
	// Threads is then unused, the goroutines running on the process's Ps.
	TLS *tls.Config
	// NewConn sends every request on a connection of its own, with
	// Connection: close, which the loop closes once the response is in:
	// a TCP connect (and with TLS a handshake) per request, counted in its
	// latency. TLS only.
	NewConn bool
}

// MaxSlow is how many slow responses (Config.SlowOver) one generator keeps.
const MaxSlow = 4096

// Slow is one response slower than Config.SlowOver.
type Slow struct {
	Due     time.Time     // when the request was due (fixed rate) or sent
	Latency time.Duration // from Due to the response's end
}

// Progress is a running count, passed to Config.Progress.
type Progress struct {
	Elapsed  time.Duration
	Requests uint64
	Errors   uint64
}

// Result is the outcome of a run.
type Result struct {
	Requests   uint64         // responses completed within the run
	Non2xx     uint64         // of those, status outside 200–299
	Errors     uint64         // connect, read, write, parse and timeout errors
	Reconnects uint64         // connections reopened after an error or Connection: close
	Handshakes uint64         // TLS handshakes completed (Config.TLS)
	Resumed    uint64         // of those, resumed from a session ticket
	Elapsed    time.Duration  // measured time
	Latency    *hdr.Histogram // nanoseconds per response; owned by the caller
	Slow       []Slow         // with Config.SlowOver: the slow responses, in order within a generator
}

// Add adds o, run at the same time, to r: the counts and latencies summed,
// the longer of the two elapsed times. r.Latency must be set.
func (r *Result) Add(o Result) {
	r.Requests += o.Requests
	r.Non2xx += o.Non2xx
	r.Errors += o.Errors
	r.Reconnects += o.Reconnects
	r.Handshakes += o.Handshakes
	r.Resumed += o.Resumed
	r.Elapsed = max(r.Elapsed, o.Elapsed)
	r.Latency.Merge(o.Latency)
	r.Slow = append(r.Slow, o.Slow...)
}

// RPS returns responses per second.
func (r Result) RPS() float64 {
	if r.Elapsed <= 0 {
		return 0
	}
	return float64(r.Requests) / r.Elapsed.Seconds()
}

const (
	bufSize   = 64 << 10
	maxHead   = 32 << 10
	timerSlot = -1 // EpollEvent.Fd of the rate timer
)

type conn struct {
	fd       int
	n        int   // bytes in buf
	inflight bool  //
	sent     int64 // when the request went out, ns since start
	due      int64 // when the request was due (fixed rate)
	next     int64 // when the next request is due (fixed rate)
	retryAt  int64 // when to reconnect, while fd < 0
	p        parser
	buf      []byte
}

type gen struct {
	cfg      Config
	req      []byte
	sa       unix.SockaddrInet4
	epfd     int
	tfd      int
	armed    int64
	base     time.Time
	baseMono int64
	conns    []conn
	res      Result
	interval int64  // per-connection interval (fixed rate)
	inflight uint64 // requests sent and not yet answered
}

// Run drives load as cfg describes and returns the result. It blocks for
// about cfg.Duration. With Threads > 1 it runs that many generators at
// once, Conns, Rate and MaxRequests split between them as evenly as
// whole numbers allow, and merges their results;
// Progress is then called from one of them with the sums.
func Run(cfg Config) (Result, error) {
	if cfg.TLS != nil {
		return runTLS(cfg)
	}
	if cfg.NewConn {
		return Result{}, fmt.Errorf("%w: NewConn needs TLS", ErrConfig)
	}
	n := min(max(cfg.Threads, 1), max(cfg.Conns, 1))
	if n == 1 {
		return run(cfg)
	}
	type part struct {
		res Result
		err error
	}
	parts := make([]part, n)
	counts := make([]progressSlot, n)
	var wg sync.WaitGroup
	for i := range n {
		sub := cfg
		sub.Conns = int(share(uint64(cfg.Conns), n, i))
		sub.Rate = cfg.Rate * float64(sub.Conns) / float64(cfg.Conns)
		if cfg.MaxRequests > 0 {
			sub.MaxRequests = max(1, share(cfg.MaxRequests, n, i))
		}
		if cfg.Progress != nil {
			sub.Progress = func(p Progress) {
				counts[i].requests.Store(p.Requests)
				counts[i].errors.Store(p.Errors)
				if i != 0 {
					return
				}
				for j := 1; j < n; j++ {
					p.Requests += counts[j].requests.Load()
					p.Errors += counts[j].errors.Load()
				}
				cfg.Progress(p)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			parts[i].res, parts[i].err = run(sub)
		}()
	}
	wg.Wait()
	res := Result{Latency: hdr.New()}
	for _, p := range parts {
		if p.err != nil {
			return res, p.err
		}
		res.Add(p.res)
	}
	return res, nil
}

// progressSlot is one thread's latest Progress, read by the thread that
// reports the sums.
type progressSlot struct {
	requests, errors atomic.Uint64
	_                [48]byte // a cache line each
}

// share is part i of total split into n parts as evenly as whole numbers
// allow: the first total%n parts get one more.
func share(total uint64, n, i int) uint64 {
	q := total / uint64(n)
	if uint64(i) < total%uint64(n) {
		q++
	}
	return q
}

// defaults fills in cfg's defaults and checks it: the server's IPv4
// address comes back.
func (cfg *Config) defaults() (netip.AddrPort, error) {
	if cfg.Path == "" {
		cfg.Path = "/hello"
	}
	if cfg.Host == "" {
		cfg.Host = cfg.Addr
	}
	if cfg.Conns <= 0 {
		cfg.Conns = 16
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = 2 * time.Second
	}
	if cfg.Duration <= 0 || cfg.Rate < 0 || math.IsNaN(cfg.Rate) {
		return netip.AddrPort{}, fmt.Errorf("%w: duration %v rate %v", ErrConfig, cfg.Duration, cfg.Rate)
	}
	ap, err := netip.ParseAddrPort(cfg.Addr)
	if err != nil || !ap.Addr().Is4() {
		return netip.AddrPort{}, fmt.Errorf("%w: address %q: want IPv4 host:port", ErrConfig, cfg.Addr)
	}
	return ap, nil
}

// run is one generator on one locked OS thread.
func run(cfg Config) (Result, error) {
	ap, err := cfg.defaults()
	if err != nil {
		return Result{}, err
	}
	g := &gen{cfg: cfg, tfd: -1}
	g.sa = unix.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	g.req = []byte("GET " + cfg.Path + " HTTP/1.1\r\nHost: " + cfg.Host + "\r\n" + cfg.Header + "\r\n")
	g.res.Latency = hdr.New()
	if cfg.SlowOver > 0 {
		g.res.Slow = make([]Slow, 0, MaxSlow)
	}

	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if g.epfd, err = unix.EpollCreate1(unix.EPOLL_CLOEXEC); err != nil {
		return Result{}, err
	}
	defer unix.Close(g.epfd)
	if cfg.Rate > 0 {
		g.interval = int64(float64(cfg.Conns) / cfg.Rate * 1e9)
		if g.tfd, err = unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC); err != nil {
			return Result{}, err
		}
		defer unix.Close(g.tfd)
		ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: timerSlot}
		if err := unix.EpollCtl(g.epfd, unix.EPOLL_CTL_ADD, g.tfd, &ev); err != nil {
			return Result{}, err
		}
	}
	g.conns = make([]conn, cfg.Conns)
	for i := range g.conns {
		g.conns[i] = conn{fd: -1, buf: make([]byte, bufSize)}
	}
	defer func() {
		for i := range g.conns {
			if g.conns[i].fd >= 0 {
				unix.Close(g.conns[i].fd)
			}
		}
	}()
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	g.base, g.baseMono = time.Now(), ts.Nano()
	for i := range g.conns {
		c := &g.conns[i]
		c.next = int64(i) * g.interval / int64(cfg.Conns)
		if err := g.connect(i); err != nil && i == 0 {
			return g.res, fmt.Errorf("load: connect %s: %w", cfg.Addr, err)
		}
		if cfg.Rate == 0 && c.fd >= 0 {
			g.send(c, g.now())
		}
	}
	return g.loop()
}

func (g *gen) now() int64 { return int64(time.Since(g.base)) }

func (g *gen) loop() (Result, error) {
	events := make([]unix.EpollEvent, 128)
	deadline := int64(g.cfg.Duration)
	const tick = int64(100 * time.Millisecond)
	nextTick := tick
	nextProgress := int64(time.Second)
	for {
		t := g.now()
		if t >= deadline {
			g.res.Elapsed = time.Duration(deadline)
			return g.res, nil
		}
		if g.cfg.MaxRequests > 0 && g.res.Requests >= g.cfg.MaxRequests || g.cfg.Stop != nil && g.cfg.Stop.Load() {
			g.res.Elapsed = time.Duration(t)
			return g.res, nil
		}
		if t >= nextTick {
			g.expire(t)
			nextTick = t + tick
			if g.cfg.Progress != nil && t >= nextProgress {
				g.cfg.Progress(Progress{Elapsed: time.Duration(t), Requests: g.res.Requests, Errors: g.res.Errors})
				nextProgress += int64(time.Second)
			}
		}
		wake := min(deadline, nextTick)
		for i := range g.conns {
			c := &g.conns[i]
			if c.fd < 0 {
				if c.retryAt <= t {
					_ = g.connect(i)
				}
				if c.fd < 0 {
					wake = min(wake, c.retryAt)
					continue
				}
				if g.cfg.Rate == 0 {
					g.send(c, t)
				}
			}
			if g.cfg.Rate > 0 && !c.inflight {
				if c.next <= t {
					c.due = c.next
					c.next += g.interval
					g.send(c, t)
				} else {
					wake = min(wake, c.next)
				}
			}
		}
		ms := 0
		if wake > t {
			// epoll's timeout is in whole milliseconds; in fixed-rate mode
			// the timerfd wakes the loop at the due time to the nanosecond.
			ms = int((wake - t + 999_999) / 1_000_000)
			if g.tfd >= 0 {
				g.arm(wake)
			}
		}
		n, err := unix.EpollWait(g.epfd, events, ms)
		if err != nil && err != unix.EINTR {
			return g.res, err
		}
		for _, ev := range events[:max(n, 0)] {
			if ev.Fd == timerSlot {
				var b [8]byte
				_, _ = unix.Read(g.tfd, b[:])
				g.armed = 0
				continue
			}
			g.readable(int(ev.Fd))
		}
	}
}

// arm sets the rate timer to fire at t (ns since start), to the nanosecond.
func (g *gen) arm(t int64) {
	if g.armed == t {
		return
	}
	g.armed = t
	abs := g.baseMono + t
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(abs)}
	_ = unix.TimerfdSettime(g.tfd, unix.TFD_TIMER_ABSTIME, &spec, nil)
}

func (g *gen) connect(i int) error {
	c := &g.conns[i]
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err == nil {
		err = unix.Connect(fd, &g.sa)
		if err == nil {
			err = unix.SetNonblock(fd, true)
		}
		if err == nil {
			err = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		}
		if err == nil {
			ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(i)}
			err = unix.EpollCtl(g.epfd, unix.EPOLL_CTL_ADD, fd, &ev)
		}
		if err != nil {
			unix.Close(fd)
		}
	}
	if err != nil {
		g.res.Errors++
		c.retryAt = g.now() + int64(10*time.Millisecond)
		return err
	}
	c.fd, c.n, c.inflight, c.p = fd, 0, false, parser{}
	return nil
}

func (g *gen) send(c *conn, t int64) {
	if g.cfg.MaxRequests > 0 && g.res.Requests+g.inflight >= g.cfg.MaxRequests {
		return
	}
	n, err := unix.Write(c.fd, g.req)
	if err != nil || n != len(g.req) {
		g.fail(c)
		return
	}
	c.sent, c.inflight = t, true
	if g.cfg.Rate == 0 {
		c.due = t
	}
	g.inflight++
}

// fail counts an error and closes the connection; the loop reopens it.
func (g *gen) fail(c *conn) {
	g.res.Errors++
	g.drop(c)
}

func (g *gen) drop(c *conn) {
	if c.fd >= 0 {
		unix.Close(c.fd)
		g.res.Reconnects++
	}
	if c.inflight {
		g.inflight--
	}
	c.fd, c.inflight, c.n, c.retryAt = -1, false, 0, 0
}

// expire fails requests older than the timeout.
func (g *gen) expire(t int64) {
	for i := range g.conns {
		c := &g.conns[i]
		if c.fd >= 0 && c.inflight && t-c.sent > int64(g.cfg.Timeout) {
			g.fail(c)
		}
	}
}

func (g *gen) readable(i int) {
	if i < 0 || i >= len(g.conns) {
		return
	}
	c := &g.conns[i]
	if c.fd < 0 {
		return
	}
	k, err := unix.Read(c.fd, c.buf[c.n:])
	if err == unix.EAGAIN || err == unix.EINTR {
		return
	}
	if err != nil || k == 0 {
		if c.inflight && c.p.eof() {
			g.complete(c)
			g.drop(c)
			return
		}
		if c.inflight {
			g.fail(c)
		} else {
			g.drop(c) // idle connection closed by the server
		}
		return
	}
	if !c.inflight {
		g.fail(c) // bytes nobody asked for
		return
	}
	c.n += k
	used, done, perr := c.p.feed(c.buf[:c.n], maxHead)
	if perr != nil {
		g.fail(c)
		return
	}
	if !done {
		if used > 0 {
			copy(c.buf, c.buf[used:c.n])
			c.n -= used
		}
		if c.n == len(c.buf) {
			g.fail(c)
		}
		return
	}
	if used != c.n {
		g.fail(c)
		return
	}
	c.n = 0
	g.complete(c)
	if c.p.close {
		g.drop(c)
		return
	}
	if g.cfg.Rate == 0 {
		g.send(c, g.now())
	}
}

func (g *gen) complete(c *conn) {
	t := g.now()
	c.inflight = false
	g.inflight--
	if t > int64(g.cfg.Duration) {
		return // finished after the end: not counted, as wrk does
	}
	g.res.Requests++
	if c.p.status < 200 || c.p.status > 299 {
		g.res.Non2xx++
	}
	g.res.Latency.Record(uint64(t - c.due))
	if g.cfg.SlowOver > 0 && t-c.due > int64(g.cfg.SlowOver) && len(g.res.Slow) < cap(g.res.Slow) {
		g.res.Slow = append(g.res.Slow, Slow{Due: g.base.Add(time.Duration(c.due)), Latency: time.Duration(t - c.due)})
	}
}
