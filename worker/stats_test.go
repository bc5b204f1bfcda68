package worker

import (
	"bufio"
	"fmt"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestStats: the counters and connection states a worker publishes each
// tick: one idle keep-alive connection that made five requests, one with
// half a request head, one whose request waits for its upstream.
func TestStats(t *testing.T) {
	stall, err := net.Listen("tcp", "127.0.0.1:0") // accepts, never answers
	if err != nil {
		t.Fatal(err)
	}
	defer stall.Close()
	go func() {
		for {
			c, err := stall.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	w := startWorker(t, nil, fmt.Sprintf(`{"id":"1","uri":"/stall","upstream":{"nodes":{"%s":1}}}`, stall.Addr()))
	dial := func() net.Conn {
		c, err := net.Dial("tcp", w.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	idle := dial()
	br := bufio.NewReader(idle)
	for i := 0; i < 5; i++ {
		if _, err := fmt.Fprintf(idle, "GET /none HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 404 {
			t.Fatalf("status %d", resp.StatusCode)
		}
	}
	half := dial()
	if _, err := fmt.Fprintf(half, "GET /none HTTP/1.1\r\nHost: a\r\n"); err != nil {
		t.Fatal(err)
	}
	waiting := dial()
	if _, err := fmt.Fprintf(waiting, "GET /stall HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
		t.Fatal(err)
	}

	waitStats(t, w, "three connections open", Stats{Accepted: 3, Handled: 3, Requests: 6, Active: 3, Reading: 1, Writing: 1, Waiting: 1})

	// Closing connections leaves the counters and empties the states.
	idle.Close()
	half.Close()
	waiting.Close()
	waitStats(t, w, "after closing", Stats{Accepted: 3, Handled: 3, Requests: 6})
}

// waitStats waits up to 5 s for the worker to publish want.
func waitStats(t *testing.T, w *Worker, what string, want Stats) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := w.Stats()
		if got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: stats %+v, want %+v", what, got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
