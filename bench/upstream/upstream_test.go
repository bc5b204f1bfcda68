package upstream

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestScan(t *testing.T) {
	get := "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
	post := "POST /p HTTP/1.1\r\nHost: x\r\ncontent-LENGTH: 5\r\n\r\nabcde"
	type out struct {
		Consumed, Requests, Skip int
	}
	tests := []struct {
		name string
		in   string
		skip int
		want out
		err  error
	}{
		{name: "one", in: get, want: out{len(get), 1, 0}},
		{name: "pipelined", in: get + get + get, want: out{3 * len(get), 3, 0}},
		{name: "partial head", in: get + get[:10], want: out{len(get), 1, 0}},
		{name: "body skipped", in: post + get, want: out{len(post) + len(get), 2, 0}},
		{name: "body spans reads", in: post[:len(post)-2], want: out{len(post) - 2, 1, 2}},
		{name: "rest of body", in: "de" + get, skip: 2, want: out{2 + len(get), 1, 0}},
		{name: "chunked refused", in: "POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", err: ErrMalformed},
		{name: "bad length", in: "POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", err: ErrMalformed},
		{name: "head too long", in: strings.Repeat("a", maxHeader+1), err: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			skip := tc.skip
			c, n, err := Scan([]byte(tc.in), &skip)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			if d := cmp.Diff(tc.want, out{c, n, skip}); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestServe(t *testing.T) {
	for _, loops := range []int{1, 3} {
		for _, body := range [][]byte{Body1K, Body10} {
			s, err := Start("127.0.0.1:0", body, loops)
			if err != nil {
				t.Fatal(err)
			}
			// Connections of their own, so that every loop serves some.
			var wg sync.WaitGroup
			errs := make(chan error, 6)
			for range 6 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
					defer c.CloseIdleConnections()
					for range 3 { // same keep-alive connection
						resp, err := c.Get("http://" + s.Addr + "/hello")
						if err != nil {
							errs <- err
							return
						}
						got, err := io.ReadAll(resp.Body)
						resp.Body.Close()
						if err != nil || resp.StatusCode != 200 || string(got) != string(body) {
							errs <- fmt.Errorf("GET: status %d, %d bytes, err %v", resp.StatusCode, len(got), err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("%d loops: %v", loops, err)
			}
			if err := s.Stop(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if len(Body1K) != 1024 || !strings.HasPrefix(string(Body1K), "12345678901234") {
		t.Errorf("Body1K is %d bytes", len(Body1K))
	}
}

func TestPipelined(t *testing.T) {
	s, err := Start("127.0.0.1:0", Body10, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Stop()
	c, err := net.DialTimeout("tcp", s.Addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	// 100 requests in one write, split mid-request in a second write.
	req := "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n"
	all := strings.Repeat(req, 100)
	if _, err := io.WriteString(c, all[:len(all)-7]); err != nil {
		t.Fatal(err)
	}
	time.Sleep(20 * time.Millisecond)
	if _, err := io.WriteString(c, all[len(all)-7:]); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	for i := range 100 {
		resp, err := http.ReadResponse(r, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if string(b) != "1234567890" {
			t.Fatalf("response %d body %q", i, b)
		}
	}
}
