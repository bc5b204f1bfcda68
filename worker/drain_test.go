package worker

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// runDrainWorker runs a worker on a free loopback port; done receives Run's
// result.
func runDrainWorker(t *testing.T, routes ...string) (*Worker, chan error) {
	t.Helper()
	return runWorker(t, Config{}, testSpec(t, nil, routes...))
}

func waitRun(t *testing.T, done chan error, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	select {
	case err := <-done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Fatalf("Run: %v", err)
		}
	case <-time.After(within):
		t.Fatalf("Run did not return within %v of Drain", within)
	}
	return time.Since(start)
}

// TestDrainUnused: a worker that never saw a connection drains at once, and
// its port is closed afterwards.
func TestDrainUnused(t *testing.T) {
	w, done := runDrainWorker(t)
	addr := w.Addr().String()
	w.Drain(5 * time.Second)
	waitRun(t, done, 2*time.Second)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Fatal("the port still accepts connections after the drain")
	} else if !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial after the drain: %v, want connection refused", err)
	}
}

// TestDrainConnections: what each kind of client connection sees when the
// worker drains.
func TestDrainConnections(t *testing.T) {
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			time.Sleep(300 * time.Millisecond)
		}
		_, _ = io.WriteString(w, "hello")
	}))
	defer up.Close()
	w, done := runDrainWorker(t, `{"id":1,"uri":"/*","upstream":{"type":"roundrobin","nodes":{"`+up.Listener.Addr().String()+`":1}}}`)
	addr := w.Addr().String()
	dial := func() (net.Conn, *bufio.Reader) {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		return c, bufio.NewReader(c)
	}
	send := func(c net.Conn, path string) {
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: d\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
	}
	type answer struct {
		Status int
		Body   string
		Close  bool
		Err    string
	}
	read := func(br *bufio.Reader) answer {
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil {
			return answer{Err: err.Error()}
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		a := answer{Status: resp.StatusCode, Body: string(b), Close: resp.Close}
		if err != nil {
			a.Err = err.Error()
		}
		return a
	}
	// afterAnswer: what the connection shows once the answer is read, and
	// when.
	afterAnswer := func(c net.Conn, br *bufio.Reader) (string, time.Time) {
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		n, err := br.Read(make([]byte, 1))
		at := time.Now()
		switch {
		case n > 0:
			return "more bytes", at
		case err == io.EOF:
			return "EOF", at
		case errors.Is(err, syscall.ECONNRESET):
			return "reset", at
		}
		return err.Error(), at
	}
	then := func(c net.Conn, br *bufio.Reader) string {
		s, _ := afterAnswer(c, br)
		return s
	}

	idle, idleR := dial()
	send(idle, "/a")
	if a := read(idleR); a.Status != 200 || a.Close {
		t.Fatalf("first answer on the idle connection: %+v", a)
	}
	quiet, quietR := dial()
	send(quiet, "/a")
	if a := read(quietR); a.Status != 200 || a.Close {
		t.Fatalf("first answer on the quiet connection: %+v", a)
	}
	quietSince := time.Now()
	silent, silentR := dial()
	busy, busyR := dial()
	send(busy, "/slow")
	fresh, freshR := dial()
	// Pipelined behind a request in progress: both are answered.
	busyPipe, busyPipeR := dial()
	if _, err := io.WriteString(busyPipe, "GET /slow HTTP/1.1\r\nHost: d\r\n\r\nGET /b HTTP/1.1\r\nHost: d\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	pipe, pipeR := dial()
	send(pipe, "/a")
	if a := read(pipeR); a.Status != 200 || a.Close {
		t.Fatalf("first answer on the pipelining connection: %+v", a)
	}
	time.Sleep(100 * time.Millisecond) // the worker accepts fresh, the upstream holds busy

	w.Drain(10 * time.Second)
	time.Sleep(100 * time.Millisecond)
	// A request on a kept-alive connection after the drain started is
	// answered, with Connection: close: the drain does not close a
	// connection between two requests while one may be on its way.
	send(idle, "/late")
	send(fresh, "/first")
	// Three requests at once after the drain started: every one answered,
	// the last with Connection: close.
	if _, err := io.WriteString(pipe, "GET /1 HTTP/1.1\r\nHost: d\r\n\r\nGET /2 HTTP/1.1\r\nHost: d\r\n\r\nGET /3 HTTP/1.1\r\nHost: d\r\n\r\n"); err != nil {
		t.Fatal(err)
	}

	quietEnd, quietAt := afterAnswer(quiet, quietR)
	got := map[string]any{
		"busy":                 read(busyR),
		"busy after":           then(busy, busyR),
		"busy pipelined":       []answer{read(busyPipeR), read(busyPipeR)},
		"busy pipelined after": then(busyPipe, busyPipeR),
		"pipelined":            []answer{read(pipeR), read(pipeR), read(pipeR)},
		"pipelined after":      then(pipe, pipeR),
		"fresh":                read(freshR),
		"fresh after":          then(fresh, freshR),
		"idle":                 read(idleR),
		"idle after":           then(idle, idleR),
		"quiet":                quietEnd,
		"silent":               then(silent, silentR),
	}
	// Connections quiet for drainIdle are closed cleanly, without a request.
	want := map[string]any{
		"busy":                 answer{Status: 200, Body: "hello", Close: true},
		"busy after":           "EOF",
		"busy pipelined":       []answer{{Status: 200, Body: "hello"}, {Status: 200, Body: "hello", Close: true}},
		"busy pipelined after": "EOF",
		"pipelined":            []answer{{Status: 200, Body: "hello"}, {Status: 200, Body: "hello"}, {Status: 200, Body: "hello", Close: true}},
		"pipelined after":      "EOF",
		"fresh":                answer{Status: 200, Body: "hello", Close: true},
		"fresh after":          "EOF",
		"idle":                 answer{Status: 200, Body: "hello", Close: true},
		"idle after":           "EOF",
		"quiet":                "EOF",
		"silent":               "EOF",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("connections during the drain (-want +got):\n%s", diff)
	}
	// Not before it was quiet for drainIdle (the margin covers the client
	// reading its answer later than the worker flushed it).
	if q := quietAt.Sub(quietSince); q < time.Duration(drainIdle)-500*time.Millisecond {
		t.Errorf("the quiet connection was closed after %v of quiet, want at least %v", q, time.Duration(drainIdle))
	}
	for _, c := range []net.Conn{idle, quiet, silent, busy, fresh, busyPipe, pipe} {
		c.Close()
	}
	took := waitRun(t, done, 3*time.Second)
	t.Logf("Run returned %v after the last client closed", took)
	if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		c.Close()
		t.Error("the port still accepts connections after the drain")
	}
}
