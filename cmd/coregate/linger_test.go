package main

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestLingeringClose: when the gateway answers and closes while the client
// is still sending (input after a malformed request, a body announced with
// Expect: 100-continue), it closes as nginx's lingering_close does: the
// client finishes writing, then reads the whole answer and a clean end of
// stream, never a reset. Without it the kernel answers the unread input
// with RST, which can destroy the answer before the client reads it. A body
// the gateway can read and drop (a 404 to an upload) keeps the connection.
func TestLingeringClose(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startGateway(t, routesYAML(obj{"id": 1, "uri": "/ok", "upstream": upstreamOf(nodes(up.Addr()), nil)}), "")
	body := bytes.Repeat([]byte("x"), 4<<20)
	tests := []struct {
		name    string
		send    [][]byte // written in order, in full, before reading
		answers []int
	}{
		{"404 to a 4 MiB upload with Expect: 100-continue, sent anyway", [][]byte{
			fmt.Appendf(nil, "POST /none HTTP/1.1\r\nHost: a\r\nExpect: 100-continue\r\nContent-Length: %d\r\n\r\n", len(body)), body,
		}, []int{404}},
		{"400 then 4 MiB of junk", [][]byte{
			[]byte("GET /ok HTTP/1.1\r\nHost: a\r\n\r\nGET /ok HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n"), body,
		}, []int{200, 400}},
		{"404 to a 4 MiB upload, then Connection: close", [][]byte{
			fmt.Appendf(nil, "POST /none HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", len(body)), body,
			[]byte("GET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
		}, []int{404, 200}},
		{"404 to a chunked upload, then Connection: close", [][]byte{
			[]byte("POST /none HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"),
			append(fmt.Appendf(nil, "%x\r\n", len(body)), body...),
			[]byte("\r\n5\r\nhello\r\n0\r\n\r\n"),
			[]byte("GET /ok HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"),
		}, []int{404, 200}},
		{"404 to a chunked upload with a bad chunk size: closed", [][]byte{
			[]byte("POST /none HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n"),
			[]byte("GET /ok HTTP/1.1\r\nHost: a\r\n\r\n"),
		}, []int{404}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			for round := range 3 {
				c, err := net.Dial("tcp", g.Addr())
				if err != nil {
					t.Fatal(err)
				}
				defer c.Close()
				_ = c.SetDeadline(time.Now().Add(10 * time.Second))
				for _, b := range tc.send {
					if _, err := c.Write(b); err != nil {
						t.Fatalf("round %d: writing: %v (the gateway reset the connection)", round, err)
					}
				}
				br := bufio.NewReader(c)
				for i, want := range tc.answers {
					resp, err := http.ReadResponse(br, nil)
					if err != nil {
						t.Fatalf("round %d: answer %d: %v", round, i, err)
					}
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err != nil || resp.StatusCode != want {
						t.Fatalf("round %d: answer %d: %d %v, want %d whole", round, i, resp.StatusCode, err, want)
					}
				}
				if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
					t.Fatalf("round %d: after the answers: %v, want a clean end of stream", round, err)
				}
			}
		})
	}

	// A client that stops sending but keeps its side open gets the answer
	// and FIN at once; the gateway closes for good after lingering_timeout
	// (5 s): a write after that is answered with a reset.
	c, err := net.Dial("tcp", g.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "GET /ok HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\nabc")
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	b, err := io.ReadAll(c)
	if err != nil || !strings.HasPrefix(string(b), "HTTP/1.1 400 ") {
		t.Fatalf("silent client: %q %v", b, err)
	}
	if _, err := c.Write([]byte("de")); err != nil {
		t.Fatalf("write while lingering: %v", err)
	}
	time.Sleep(6500 * time.Millisecond)
	_, err = c.Write([]byte("fg"))
	if err == nil {
		time.Sleep(100 * time.Millisecond)
		_, err = c.Write([]byte("hi"))
	}
	if err == nil {
		t.Error("6.5 s after the last input the gateway still holds the connection")
	}
}
