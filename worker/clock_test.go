package worker

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"
)

// TestClockFreshAfterIdle: the deadlines of a worker's first connection
// count from when it came, however long the worker sat idle before. The
// coarse clock used to advance only on ticks, which start with the first
// connection, so those deadlines were counted from the worker's start.
func TestClockFreshAfterIdle(t *testing.T) {
	const idle = 1500 * time.Millisecond
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(200 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "ok")
	}))
	t.Cleanup(up.Close) // after the parallel subtests
	route := fmt.Sprintf(`{"id":"1","uri":"/*","timeout":{"connect":1,"send":1,"read":1},"upstream":{"nodes":{"%s":1}}}`, hostPort(up.URL))

	t.Run("head in two parts", func(t *testing.T) {
		t.Parallel()
		w, _ := runWorker(t, Config{HeaderTimeout: time.Second}, testSpec(t, nil, route))
		time.Sleep(idle)
		c, br := dialWorker(t, w)
		_, _ = io.WriteString(c, "GET /fast HTTP/1.1\r\n")
		time.Sleep(300 * time.Millisecond)
		_, _ = io.WriteString(c, "Host: x\r\n\r\n")
		if resp := readAnswer(t, c, br); resp.StatusCode != 200 {
			t.Fatalf("got %d, want 200: client_header_timeout (1s) counted from before the connection came", resp.StatusCode)
		}
	})
	t.Run("upstream read", func(t *testing.T) {
		t.Parallel()
		w, _ := runWorker(t, Config{}, testSpec(t, nil, route))
		time.Sleep(idle)
		c, br := dialWorker(t, w)
		start := time.Now()
		if resp := getOn(t, c, br, "/slow"); resp.StatusCode != 200 {
			t.Fatalf("got %d after %v, want 200: the upstream answers in 200ms, timeout.read is 1s",
				resp.StatusCode, time.Since(start))
		}
	})
}
