package worker

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime/metrics"
	"testing"
	"time"
)

// closingOrigin serves one request per connection, one connection at a
// time, on a single goroutine, and closes each connection after its
// response: every request the gateway forwards needs a new connection,
// and serving them starts no goroutine.
func closingOrigin(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for {
				line, err := br.ReadString('\n')
				if err != nil || line == "\r\n" {
					break
				}
			}
			_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
			c.Close()
		}
	}()
	return l.Addr().String()
}

func goroutinesCreated() uint64 {
	s := []metrics.Sample{{Name: "/sched/goroutines-created:goroutines"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// get sends GET path on c and checks for a 200 with body "ok".
func get(t *testing.T, c net.Conn, br *bufio.Reader, path string) {
	t.Helper()
	_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("GET %s: %d %q", path, resp.StatusCode, b)
	}
}

// TestDialOnLoop checks that the loop connects to a node given by IP
// address itself: new upstream connections start no goroutine (a dial
// off the loop started at least one each and waited in the runtime's
// netpoller), and a node given by host name is still dialed.
func TestDialOnLoop(t *testing.T) {
	origin := closingOrigin(t)
	_, port, _ := net.SplitHostPort(origin)
	w := startWorker(t, nil,
		fmt.Sprintf(`{"id":"1","uri":"/ip","upstream":{"nodes":{"%s":1}}}`, origin),
		fmt.Sprintf(`{"id":"2","uri":"/name","upstream":{"nodes":{"localhost:%s":1}}}`, port))
	c, br := dialWorker(t, w)
	get(t, c, br, "/ip") // the pools and the loop's first connection
	const n = 40
	before := goroutinesCreated()
	for range n {
		get(t, c, br, "/ip")
	}
	if d := goroutinesCreated() - before; d > n/4 {
		t.Errorf("%d new upstream connections started %d goroutines, want none of their own", n, d)
	}
	get(t, c, br, "/name")
}
