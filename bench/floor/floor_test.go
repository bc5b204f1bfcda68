package floor

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"coregate/bench/upstream"
)

const get = "GET /hello HTTP/1.1\r\nHost: floor\r\n\r\n"

// loop is one of the floor's two loops, running.
type loop struct {
	Addr string
	Stop func() error
}

// eachLoop runs f for each loop, started on an upstream of its own.
func eachLoop(t *testing.T, f func(t *testing.T, s loop)) {
	for _, ring := range []bool{false, true} {
		name := "epoll"
		if ring {
			name = "io_uring"
		}
		t.Run(name, func(t *testing.T) {
			up, err := upstream.Start("127.0.0.1:0", upstream.Body1K, 1)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = up.Stop() })
			addr, stop, err := Run("127.0.0.1:0", up.Addr, ring)
			if err != nil {
				t.Fatal(err)
			}
			f(t, loop{addr, stop})
		})
	}
}

// readResponse reads one response from br and checks it is the upstream's.
func readResponse(br *bufio.Reader) error {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return err
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(body, upstream.Body1K) {
		return fmt.Errorf("status %d, %d bytes, err %v", resp.StatusCode, len(body), err)
	}
	return nil
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func TestProxies(t *testing.T) { eachLoop(t, testProxies) }

func testProxies(t *testing.T, s loop) {
	// Connections of their own, each with requests one after another.
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			_ = c.SetDeadline(time.Now().Add(10 * time.Second))
			br := bufio.NewReader(c)
			for range 200 {
				if _, err := io.WriteString(c, get); err != nil {
					errs <- err
					return
				}
				if err := readResponse(br); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	// Pipelined requests wait for the one upstream and are all answered,
	// in order, including one split across two writes.
	c, br := dial(t, s.Addr)
	if _, err := io.WriteString(c, get+get+get+get[:10]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := io.WriteString(c, get[10:]); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := readResponse(br); err != nil {
			t.Fatalf("pipelined response %d: %v", i, err)
		}
	}
	if err := s.Stop(); err != nil {
		t.Fatal(err)
	}
	// Stopped: the client's connection is closed and nothing listens.
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Errorf("read after Stop: %v, want EOF", err)
	}
	if c, err := net.DialTimeout("tcp", s.Addr, time.Second); err == nil {
		c.Close()
		t.Error("still listening after Stop")
	}
}

// A request that does not fit the buffer closes the connection; the loop
// serves others on.
func TestOversizedRequest(t *testing.T) { eachLoop(t, testOversizedRequest) }

func testOversizedRequest(t *testing.T, s loop) {
	defer s.Stop()
	c, br := dial(t, s.Addr)
	long := "GET /hello HTTP/1.1\r\nX: " + strings.Repeat("a", 2*bufSize) + "\r\n\r\n"
	_, _ = io.WriteString(c, long) // may fail once the floor has closed
	if _, err := br.ReadByte(); err == nil {
		t.Fatal("an oversized request was answered")
	}
	c2, br2 := dial(t, s.Addr)
	if _, err := io.WriteString(c2, get); err != nil {
		t.Fatal(err)
	}
	if err := readResponse(br2); err != nil {
		t.Fatal(err)
	}
}

func TestBodyLength(t *testing.T) {
	for _, tc := range []struct {
		head string
		n    int
		ok   bool
	}{
		{"HTTP/1.1 200 OK\r\nContent-Length: 1024\r\n", 1024, true},
		{"HTTP/1.1 200 OK\r\nServer: x\r\ncontent-length:7\r\n", 7, true},
		{"HTTP/1.1 200 OK\r\nCONTENT-LENGTH:  0 \r\nX: y\r\n", 0, true},
		{"HTTP/1.1 200 OK\r\nServer: x\r\n", 0, false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 1a\r\n", 0, false},
		{"HTTP/1.1 200 OK\r\nContent-Length: \r\n", 0, false},
		{"HTTP/1.1 200 OK\r\nContent-Length: 99999999\r\n", 0, false},
		{"HTTP/1.1 200 OK\r\nX-Content-Length: 5\r\n", 0, false},
	} {
		n, ok := bodyLength([]byte(tc.head))
		if n != tc.n || ok != tc.ok {
			t.Errorf("%q: %d %v, want %d %v", tc.head, n, ok, tc.n, tc.ok)
		}
	}
}
