package worker

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"
)

// expectClosed checks that the worker closed c after its last answer:
// nothing more comes, and the read ends with EOF within 5 s.
func expectClosed(t *testing.T, c net.Conn, br *bufio.Reader) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b, err := br.ReadByte()
	if err == nil {
		rest, _ := br.Peek(br.Buffered())
		t.Fatalf("more after the last answer: %q", append([]byte{b}, rest...))
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("want the connection closed, got %v", err)
	}
}

// TestKeepaliveRequests: as nginx's keepalive_requests, the answer to a
// connection's n-th request says Connection: close and the connection
// closes after it, whether the request was proxied or answered by the
// worker.
func TestKeepaliveRequests(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, r.URL.Path)
	}))
	t.Cleanup(up.Close)
	route := fmt.Sprintf(`{"id":"1","uri":"/up/*","upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL))
	w, _ := runWorker(t, Config{KeepaliveRequests: 3}, testSpec(t, nil, route))

	t.Run("one by one", func(t *testing.T) {
		c, br := dialWorker(t, w)
		for i, path := range []string{"/up/1", "/none", "/up/3"} {
			resp := getOn(t, c, br, path)
			last := i == 2
			if resp.Close != last {
				t.Fatalf("request %d (%s): %d, Connection: close %v, want %v", i+1, path, resp.StatusCode, resp.Close, last)
			}
		}
		expectClosed(t, c, br)
	})

	// pipeline sends n requests at once and reads the answers: it returns
	// how many came before the connection closed, and fails unless only
	// the last said Connection: close.
	pipeline := func(t *testing.T, n int) int {
		c, br := dialWorker(t, w)
		var reqs strings.Builder
		for i := 1; i <= n; i++ {
			fmt.Fprintf(&reqs, "GET /up/%d HTTP/1.1\r\nHost: x\r\n\r\n", i)
		}
		if _, err := io.WriteString(c, reqs.String()); err != nil {
			t.Fatal(err)
		}
		for i := 1; ; i++ {
			resp := readAnswer(t, c, br)
			if resp.StatusCode != 200 {
				t.Fatalf("answer %d: %d", i, resp.StatusCode)
			}
			if resp.Close {
				expectClosed(t, c, br)
				return i
			}
			if i == n {
				t.Fatalf("all %d answers kept the connection alive", n)
			}
		}
	}

	// Requests pipelined behind the last one are answered, not dropped:
	// the last of them closes the connection.
	t.Run("pipelined", func(t *testing.T) {
		if got := pipeline(t, 5); got != 5 {
			t.Fatalf("%d of 5 pipelined requests answered", got)
		}
	})

	// A client that keeps the pipeline full is closed
	// maxSpentPipelined requests past the bound.
	t.Run("pipelined without end", func(t *testing.T) {
		if got, want := pipeline(t, 3+maxSpentPipelined+5), 3+maxSpentPipelined; got != want {
			t.Fatalf("closed after %d answers, want %d", got, want)
		}
	})

	t.Run("a new connection starts again", func(t *testing.T) {
		c, br := dialWorker(t, w)
		if resp := getOn(t, c, br, "/up/x"); resp.StatusCode != 200 || resp.Close {
			t.Fatalf("first request of a new connection: %d, Connection: close %v", resp.StatusCode, resp.Close)
		}
	})
}

// TestKeepaliveTime: as nginx's keepalive_time, the first request that
// starts once the connection has been open that long is its last.
func TestKeepaliveTime(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close)
	route := fmt.Sprintf(`{"id":"1","uri":"/*","upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL))
	const life = 300 * time.Millisecond
	w, _ := runWorker(t, Config{KeepaliveTime: life}, testSpec(t, nil, route))
	c, br := dialWorker(t, w)
	opened := time.Now()
	n := 0
	for {
		n++
		resp := getOn(t, c, br, "/x")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", n, resp.StatusCode)
		}
		if resp.Close {
			break
		}
		// The worker's clock is coarse (a wake-up's reading), so a
		// request sent after the bound may still be served as one
		// before it, but not one sent a second later.
		if time.Since(opened) > life+time.Second {
			t.Fatalf("request %d, %v after the connection opened: still kept alive", n, time.Since(opened))
		}
		time.Sleep(50 * time.Millisecond)
	}
	if since := time.Since(opened); since < life {
		t.Fatalf("closed after %v, before keepalive_time (%v)", since, life)
	}
	if n < 2 {
		t.Fatalf("the first request (%d) was the last", n)
	}
	expectClosed(t, c, br)
}
