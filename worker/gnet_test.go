package worker

import (
	"bytes"
	"context"
	"io"
	"net"
	"os"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/panjf2000/gnet/v2"
	"golang.org/x/sys/unix"
)

// TestLoopFDs: the worker finds its loop's epoll fd and listening socket
// (draining) through the carried gnet's accessors.
func TestLoopFDs(t *testing.T) {
	w := startWorker(t, nil)
	c, br := dialWorker(t, w)
	if resp := getOn(t, c, br, "/none"); resp.StatusCode != 404 {
		t.Fatalf("got %d", resp.StatusCode)
	}
	type fds struct {
		ep  int
		lns []int
	}
	got := make(chan fds, 1)
	err := w.loopRef.Load().el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
		got <- fds{w.epfd, gnet.ListenerFDs(w.loop, nil)}
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	var f fds
	select {
	case f = <-got:
	case <-time.After(5 * time.Second):
		t.Fatal("the loop did not run the check")
	}
	if link, err := os.Readlink("/proc/self/fd/" + strconv.Itoa(f.ep)); err != nil || link != "anon_inode:[eventpoll]" {
		t.Errorf("epfd %d is %q (%v), want an epoll instance", f.ep, link, err)
	}
	if len(f.lns) != 1 {
		t.Fatalf("listener fds %v, want one", f.lns)
	}
	sa, err := unix.Getsockname(f.lns[0])
	if err != nil {
		t.Fatal(err)
	}
	if in, ok := sa.(*unix.SockaddrInet4); !ok || in.Port != w.Addr().Port {
		t.Errorf("listener fd %d is bound to %v, want port %d", f.lns[0], sa, w.Addr().Port)
	}
	if gnet.PollerFD(nil) != -1 {
		t.Error("PollerFD(nil) != -1")
	}
}

// runProbe runs h as a gnet engine with one edge-triggered loop, as the
// worker's, on addr (booted reports its start) and returns a client
// connection to it; both end with the test.
func runProbe(t *testing.T, h gnet.EventHandler, booted <-chan gnet.Engine, addr string) net.Conn {
	t.Helper()
	done := make(chan error, 1)
	go func() {
		done <- gnet.Run(h, "tcp://"+addr, gnet.WithEdgeTriggeredIO(true), gnet.WithNumEventLoop(1))
	}()
	var eng gnet.Engine
	select {
	case eng = <-booted:
	case err := <-done:
		t.Fatal(err)
	case <-time.After(5 * time.Second):
		t.Fatal("the engine did not start")
	}
	t.Cleanup(func() {
		_ = eng.Stop(context.Background())
		<-done
	})
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// pauseProbe is an edge-triggered gnet engine that takes each connection
// out of the read interest at its first OnTraffic, as the worker pauses a
// side whose peer is slow.
type pauseProbe struct {
	gnet.BuiltinEventEngine
	eng     chan gnet.Engine
	conns   chan gnet.Conn
	read    atomic.Int64 // bytes handed to OnTraffic
	calls   atomic.Int64
	pausing atomic.Bool
	closed  atomic.Bool
	failed  chan error    // PauseRead's error, if any
	hold    time.Duration // OnOpen holds the loop this long: what the peer sends meanwhile waits in the socket
}

func (p *pauseProbe) OnClose(gnet.Conn, error) gnet.Action { p.closed.Store(true); return gnet.None }

func (p *pauseProbe) OnBoot(e gnet.Engine) gnet.Action { p.eng <- e; return gnet.None }

func (p *pauseProbe) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	time.Sleep(p.hold)
	p.conns <- c
	return nil, gnet.None
}

func (p *pauseProbe) OnTraffic(c gnet.Conn) gnet.Action {
	p.calls.Add(1)
	n, _ := c.Discard(-1)
	p.read.Add(int64(n))
	if p.pausing.Load() {
		if err := gnet.PauseRead(c); err != nil {
			select {
			case p.failed <- err:
			default:
			}
		}
	}
	return gnet.None
}

// TestPauseReadEdgeTriggered: with the loop edge-triggered, as the
// worker's is, a pause holds until ResumeRead. gnet does not go on with a
// read that filled its buffer, and the resume reports what waited in the
// socket with no new data from the peer (an edge-triggered socket is
// re-armed by the change).
//
// With the peer's FIN behind the data, the connection neither reads on
// nor closes while paused: what the socket holds is the rest of a
// close-delimited body, and it is read after ResumeRead, before the close.
func TestPauseReadEdgeTriggered(t *testing.T) {
	for _, fin := range []bool{false, true} {
		t.Run("fin="+strconv.FormatBool(fin), func(t *testing.T) { testPauseReadEdgeTriggered(t, fin) })
	}
}

func testPauseReadEdgeTriggered(t *testing.T, fin bool) {
	addr := unusedAddr(t)
	p := &pauseProbe{eng: make(chan gnet.Engine, 1), conns: make(chan gnet.Conn, 1), failed: make(chan error, 1)}
	if fin {
		// The data and the FIN both wait in the socket when the loop first
		// looks at it: one event reports them together.
		p.hold = 200 * time.Millisecond
	}
	p.pausing.Store(true)
	c := runProbe(t, p, p.eng, addr)
	// More than the loop's read buffer (64 KiB), less than the kernel
	// holds for a connection on loopback: all of it is in the socket
	// before the loop reads, and the peer sends nothing after it.
	const size = 100 << 10
	if _, err := c.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	if fin {
		if err := c.(*net.TCPConn).CloseWrite(); err != nil {
			t.Fatal(err)
		}
	}
	sc := <-p.conns
	wait := func(what string, ok func() bool) {
		t.Helper()
		for end := time.Now().Add(5 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			select {
			case err := <-p.failed:
				t.Fatalf("PauseRead: %v", err)
			default:
			}
			if time.Now().After(end) {
				t.Fatalf("%s: %d bytes read in %d calls", what, p.read.Load(), p.calls.Load())
			}
		}
	}
	wait("the first read", func() bool { return p.calls.Load() > 0 })
	time.Sleep(100 * time.Millisecond)
	if n, calls := p.read.Load(), p.calls.Load(); calls != 1 || n >= size {
		t.Fatalf("paused at the first read, yet %d bytes read in %d calls", n, calls)
	}
	if p.closed.Load() {
		t.Fatalf("closed while paused, %d of %d bytes read", p.read.Load(), size)
	}
	// onLoop runs f on the connection's loop, which owns it.
	onLoop := func(f func() error) {
		t.Helper()
		errc := make(chan error, 1)
		err := sc.EventLoop().Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
			errc <- f()
			return nil
		}))
		if err == nil {
			err = <-errc
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	var paused bool
	onLoop(func() error { paused = gnet.ReadPaused(sc); return nil })
	if !paused {
		t.Fatal("ReadPaused: false after PauseRead")
	}
	p.pausing.Store(false)
	onLoop(func() error { return gnet.ResumeRead(sc) })
	wait("after ResumeRead", func() bool { return p.read.Load() == size })
	if fin {
		wait("the close after the data", p.closed.Load)
		return
	}
	onLoop(func() error { paused = gnet.ReadPaused(sc); return nil })
	if paused {
		t.Error("ReadPaused: true after ResumeRead")
	}
}

// writevProbe answers each byte a client sends with one Writev of the
// pieces that byte names in parts, on an edge-triggered loop as the
// worker's.
type writevProbe struct {
	gnet.BuiltinEventEngine
	eng   chan gnet.Engine
	parts map[byte][][]byte
}

func (p *writevProbe) OnBoot(e gnet.Engine) gnet.Action { p.eng <- e; return gnet.None }

func (p *writevProbe) OnTraffic(c gnet.Conn) gnet.Action {
	in, _ := c.Next(-1)
	for _, b := range in {
		// After a partial write Writev advances the entries of the slice
		// it was given past what went out: each call gets its own copy,
		// so that parts stays whole for the next byte that names it.
		if _, err := c.Writev(append([][]byte(nil), p.parts[b]...)); err != nil {
			return gnet.Close
		}
	}
	return gnet.None
}

// TestWritevGathered: a Writev of small buffers, which the carried gnet
// copies together and sends with one write (GatherMax), arrives whole and
// in order: alone, beside a Writev past GatherMax, and behind a write the
// socket could not take at once (the peer not reading), which leaves the
// rest in the connection's outbound buffer and the small Writev behind it.
func TestWritevGathered(t *testing.T) {
	fill := func(n int, c byte) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = c + byte(i%7)
		}
		return b
	}
	p := &writevProbe{eng: make(chan gnet.Engine, 1), parts: map[byte][][]byte{
		'a': {[]byte("HTTP/1.1 200 OK\r\n"), []byte("Content-Length: 5\r\n\r\n"), []byte("hello")},
		'b': {fill(100, 'b'), fill(gnet.GatherMax, 'B')},
		'c': {fill(8<<20, 'c'), []byte("!")},
		'd': {[]byte("tail-"), fill(300, 'd'), []byte("-end")},
	}}
	c := runProbe(t, p, p.eng, unusedAddr(t))
	// 'c' writes 8 MiB, more than loopback's socket buffers take while
	// the client reads nothing; 'd' is sent in the same segment, so its
	// small Writev comes while the rest of 'c' waits in gnet.
	const order = "abacd"
	var want []byte
	for _, k := range []byte(order) {
		for _, part := range p.parts[k] {
			want = append(want, part...)
		}
	}
	if _, err := c.Write([]byte(order)); err != nil {
		t.Fatal(err)
	}
	_ = c.SetReadDeadline(time.Now().Add(10 * time.Second))
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %v", err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for i < len(got) && got[i] == want[i] {
			i++
		}
		t.Fatalf("%d bytes arrived, first difference at byte %d of %d", len(got), i, len(want))
	}
}

// TestStopPrompt: Stop returns once the worker's loop is down, without
// waiting for the next look of a poll (gnet's Engine.Stop looked every
// 500 ms, so that every stop took at least that: COREGATE.md, change 13).
// The quickest of three stops must take under 250 ms.
func TestStopPrompt(t *testing.T) {
	best := time.Hour
	for range 3 {
		w, done := runWorker(t, Config{}, framingSpec(t))
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		start := time.Now()
		err := w.Stop(ctx)
		best = min(best, time.Since(start))
		cancel()
		if err != nil {
			t.Fatalf("Stop: %v", err)
		}
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatal("Run did not return after Stop")
		}
	}
	if best >= 250*time.Millisecond {
		t.Fatalf("the quickest of three stops took %v, want under 250ms", best)
	}
	t.Logf("quickest stop: %v", best)
}
