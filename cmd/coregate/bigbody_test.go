package main

import (
	"bufio"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Large bodies stream through the gateway with bounded memory: 256 MiB
// each way between a fast side and a throttled one, the gateway's resident
// memory sampled meanwhile.

const (
	bigSize     = 256 << 20
	throttleBps = 80 << 20 // the slow side's pace
	rssSlack    = 64 << 20 // allowed growth over the idle gateway
	closeSize   = 64 << 20 // the close-delimited answer
)

var crcTable = crc32.MakeTable(crc32.Castagnoli)

// randomBody returns n deterministic pseudo-random bytes as a stream.
func randomBody(n int64, seed uint64) io.Reader {
	var s [32]byte
	s[0] = byte(seed)
	return io.LimitReader(rand.NewChaCha8(s), n)
}

// throttled reads from r no faster than bps bytes a second.
type throttled struct {
	r     io.Reader
	bps   float64
	start time.Time
	n     int64
}

func (t *throttled) Read(p []byte) (int, error) {
	if t.start.IsZero() {
		t.start = time.Now()
	}
	if len(p) > 256<<10 {
		p = p[:256<<10]
	}
	n, err := t.r.Read(p)
	t.n += int64(n)
	if ahead := time.Duration(float64(t.n)/t.bps*float64(time.Second)) - time.Since(t.start); ahead > 0 {
		time.Sleep(ahead)
	}
	return n, err
}

// rssWatch samples the resident memory of a process and its children every 50 ms until stop.
type rssWatch struct {
	max  atomic.Int64
	stop chan struct{}
	wg   sync.WaitGroup
}

func watchRSS(t *testing.T, pid int) *rssWatch {
	w := &rssWatch{stop: make(chan struct{})}
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		tk := time.NewTicker(50 * time.Millisecond)
		defer tk.Stop()
		for {
			if r, err := treeRSS(pid); err == nil && r > w.max.Load() {
				w.max.Store(r)
			}
			select {
			case <-w.stop:
				return
			case <-tk.C:
			}
		}
	}()
	return w
}

func (w *rssWatch) done() int64 {
	close(w.stop)
	w.wg.Wait()
	return w.max.Load()
}

// TestLargeBodiesBoundedMemory streams 256 MiB down to a slow client
// (chunked), 64 MiB of a close-delimited answer down, and 256 MiB up to a
// slow origin (Content-Length).
func TestLargeBodiesBoundedMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("streams 512 MiB")
	}
	t.Parallel()
	up := newHTTPUpstream(t, func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/download":
			// No Content-Length: the origin answers chunked.
			_, _ = io.Copy(w, randomBody(bigSize, 1))
		case "/upload":
			h := crc32.New(crcTable)
			n, err := io.Copy(h, &throttled{r: r.Body, bps: throttleBps})
			if err != nil {
				http.Error(w, err.Error(), 500)
				return
			}
			fmt.Fprintf(w, "%d %08x", n, h.Sum32())
		default:
			_, _ = io.WriteString(w, "ok")
		}
	})
	// An HTTP/1.0-style answer whose body ends with the connection.
	untilClose := newRawUpstream(t, func(rc *rawConn) {
		if _, _, err := rc.ReadRequest(); err != nil {
			return
		}
		_, _ = io.WriteString(rc, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
		_, _ = io.Copy(rc, randomBody(closeSize, 5))
	})
	g := startGateway(t, routesYAML(
		obj{"id": 1, "uri": "/*", "upstream": upstreamOf(nodes(up.Addr()), nil)},
		obj{"id": 2, "uri": "/until-close", "upstream": upstreamOf(nodes(untilClose.Addr()), nil)},
	), "")
	c := newClient(t)
	c.Timeout = 60 * time.Second
	if r := do(t, c, "GET", g.url("/warm"), "", nil, nil); r.status != 200 {
		t.Fatalf("warm-up: %d", r.status)
	}
	idle, err := treeRSS(g.cmd.Process.Pid)
	if err != nil {
		t.Fatal(err)
	}
	want := crc32.New(crcTable)
	if _, err := io.Copy(want, randomBody(bigSize, 1)); err != nil {
		t.Fatal(err)
	}
	wantClose := crc32.New(crcTable)
	if _, err := io.Copy(wantClose, randomBody(closeSize, 5)); err != nil {
		t.Fatal(err)
	}

	t.Run("download", func(t *testing.T) {
		w := watchRSS(t, g.cmd.Process.Pid)
		start := time.Now()
		resp, err := c.Get(g.url("/download"))
		if err != nil {
			w.done()
			t.Fatal(err)
		}
		h := crc32.New(crcTable)
		n, err := io.Copy(h, &throttled{r: resp.Body, bps: throttleBps})
		resp.Body.Close()
		peak := w.done()
		t.Logf("download: %d MiB in %v, gateway RSS idle %d MiB, peak %d MiB", n>>20, time.Since(start).Round(time.Millisecond), idle>>20, peak>>20)
		if err != nil || n != bigSize || h.Sum32() != want.Sum32() {
			t.Errorf("got %d bytes (err %v), crc %08x want %08x", n, err, h.Sum32(), want.Sum32())
		}
		if len(resp.TransferEncoding) == 0 {
			t.Errorf("answer not chunked")
		}
		if peak-idle > rssSlack {
			t.Errorf("gateway RSS grew by %d MiB, want under %d MiB", (peak-idle)>>20, rssSlack>>20)
		}
	})
	t.Run("download until close", func(t *testing.T) {
		w := watchRSS(t, g.cmd.Process.Pid)
		resp, err := c.Get(g.url("/until-close"))
		if err != nil {
			w.done()
			t.Fatal(err)
		}
		h := crc32.New(crcTable)
		n, err := io.Copy(h, &throttled{r: resp.Body, bps: throttleBps})
		resp.Body.Close()
		peak := w.done()
		// Chunked by the gateway, for an HTTP/1.1 client.
		if err != nil || n != closeSize || h.Sum32() != wantClose.Sum32() || len(resp.TransferEncoding) != 1 {
			t.Errorf("got %d bytes (err %v, transfer-encoding %q), crc %08x want %08x", n, err, resp.TransferEncoding, h.Sum32(), wantClose.Sum32())
		}
		if peak-idle > rssSlack {
			t.Errorf("gateway RSS grew by %d MiB, want under %d MiB", (peak-idle)>>20, rssSlack>>20)
		}
	})
	t.Run("upload", func(t *testing.T) {
		w := watchRSS(t, g.cmd.Process.Pid)
		start := time.Now()
		req, _ := http.NewRequest("PUT", g.url("/upload"), randomBody(bigSize, 1))
		req.ContentLength = bigSize
		resp, err := c.Do(req)
		if err != nil {
			w.done()
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		peak := w.done()
		t.Logf("upload: %v, gateway RSS idle %d MiB, peak %d MiB", time.Since(start).Round(time.Millisecond), idle>>20, peak>>20)
		if want := strconv.Itoa(bigSize) + " " + fmt.Sprintf("%08x", want.Sum32()); resp.StatusCode != 200 || string(b) != want {
			t.Errorf("origin answered %d %q, want %q", resp.StatusCode, b, want)
		}
		if peak-idle > rssSlack {
			t.Errorf("gateway RSS grew by %d MiB, want under %d MiB", (peak-idle)>>20, rssSlack>>20)
		}
	})
}

// TestUntilCloseBodyBehindPause: the upstream writes a close-delimited
// body faster than the client reads it, so the gateway keeps pausing its
// reads of the upstream, and the upstream's last bytes and its FIN come
// while it is paused: at the resume they are reported together, the first
// read fills the client's side again, and the rest of the socket must
// wait for the next resume, not be read past the pause and dropped with
// the close. The body must come whole: chunked to an HTTP/1.1 client,
// ending with the close to an HTTP/1.0 one (every other round).
func TestUntilCloseBodyBehindPause(t *testing.T) {
	t.Parallel()
	const size = 16 << 20
	wrote := make(chan error, 1)
	up := newRawUpstream(t, func(rc *rawConn) {
		if _, _, err := rc.ReadRequest(); err != nil {
			wrote <- err
			return
		}
		_, _ = io.WriteString(rc, "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\n\r\n")
		_, err := io.Copy(rc, randomBody(size, 7))
		wrote <- err
	})
	g := startGateway(t, routesYAML(
		obj{"id": 1, "uri": "/until-close", "upstream": upstreamOf(nodes(up.Addr()), nil)},
	), "")
	want := crc32.New(crcTable)
	if _, err := io.Copy(want, randomBody(size, 7)); err != nil {
		t.Fatal(err)
	}
	// A small receive buffer on the client: the gateway's writes to it
	// stop short soon, and a resume's first read pauses again.
	d := net.Dialer{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10) })
		return errors.Join(err, serr)
	}}
	for round := range 5 {
		c, err := d.Dial("tcp", g.Addr())
		if err != nil {
			t.Fatal(err)
		}
		proto := "HTTP/1.1"
		if round%2 == 1 {
			proto = "HTTP/1.0"
		}
		if _, err := io.WriteString(c, "GET /until-close "+proto+"\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(30 * time.Second))
		// A quarter of what the gateway forwards on this machine: it is
		// paused most of the time.
		resp, err := http.ReadResponse(bufio.NewReader(&throttled{r: c, bps: 16 << 20}), nil)
		if err != nil {
			t.Fatal(err)
		}
		h := crc32.New(crcTable)
		n, err := io.Copy(h, resp.Body)
		c.Close()
		framed := len(resp.TransferEncoding) == 1 && !resp.Close
		if proto == "HTTP/1.0" {
			framed = len(resp.TransferEncoding) == 0 && resp.Close
		}
		if err != nil || n != size || h.Sum32() != want.Sum32() || !framed {
			t.Errorf("round %d, %s: got %d of %d bytes (err %v, transfer-encoding %q, close %v), crc %08x want %08x",
				round, proto, n, size, err, resp.TransferEncoding, resp.Close, h.Sum32(), want.Sum32())
		}
		if err := <-wrote; err != nil {
			t.Errorf("round %d: upstream: %v", round, err)
		}
	}
}
