package worker

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// getOn sends a GET for path on c, in one piece, and reads the answer.
func getOn(t *testing.T, c net.Conn, br *bufio.Reader, path string) *http.Response {
	t.Helper()
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
	return readAnswer(t, c, br)
}

// readAnswer reads one answer from c within 5 s, body included.
func readAnswer(t *testing.T, c net.Conn, br *bufio.Reader) *http.Response {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

func dialWorker(t *testing.T, w *Worker) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", w.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c, bufio.NewReader(c)
}
