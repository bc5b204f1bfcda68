package worker

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestHeaderTimeoutFromAccept: on a fresh connection client_header_timeout
// counts from the accept, not from the first byte, so a client that
// dribbles its first head is answered 408 at accept + timeout (nginx). On a
// kept-alive connection the wait between requests is keepalive_timeout's,
// and client_header_timeout starts with the next head's first byte.
func TestHeaderTimeoutFromAccept(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close) // after the parallel subtests
	route := fmt.Sprintf(`{"id":"1","uri":"/*","upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL))
	w, _ := runWorker(t, Config{HeaderTimeout: time.Second, KeepaliveTimeout: 5 * time.Second}, testSpec(t, nil, route))
	// A first exchange: the worker is past its first connection.
	c0, br0 := dialWorker(t, w)
	if resp := getOn(t, c0, br0, "/warm"); resp.StatusCode != 200 {
		t.Fatalf("warm-up: %d", resp.StatusCode)
	}

	t.Run("fresh connection", func(t *testing.T) {
		t.Parallel()
		c, br := dialWorker(t, w)
		start := time.Now()
		stop := make(chan struct{})
		defer close(stop)
		go func() {
			// The first byte comes 900ms after the accept, then a field
			// every 200ms: the head is never finished.
			select {
			case <-stop:
				return
			case <-time.After(900 * time.Millisecond):
			}
			if _, err := io.WriteString(c, "GET /x HTTP/1.1\r\n"); err != nil {
				return
			}
			for i := 0; i < 25; i++ {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				if _, err := io.WriteString(c, "X-A: b\r\n"); err != nil {
					return
				}
			}
		}()
		resp := readAnswer(t, c, br)
		took := time.Since(start)
		if resp.StatusCode != 408 {
			t.Fatalf("got %d, want 408", resp.StatusCode)
		}
		// Counted from the first byte it would come at 1.9s.
		if took > 1500*time.Millisecond {
			t.Fatalf("408 after %v, want about 1s after the accept", took)
		}
	})
	t.Run("kept-alive connection", func(t *testing.T) {
		t.Parallel()
		c, br := dialWorker(t, w)
		if resp := getOn(t, c, br, "/first"); resp.StatusCode != 200 {
			t.Fatalf("first request: %d", resp.StatusCode)
		}
		// Idle 700ms, then a head in two parts 600ms apart: 1.3s since
		// the last answer, but 600ms since the head began.
		time.Sleep(700 * time.Millisecond)
		_, _ = io.WriteString(c, "GET /second HTTP/1.1\r\n")
		time.Sleep(600 * time.Millisecond)
		_, _ = io.WriteString(c, "Host: x\r\n\r\n")
		if resp := readAnswer(t, c, br); resp.StatusCode != 200 {
			t.Fatalf("second request: got %d, want 200", resp.StatusCode)
		}
	})
}
