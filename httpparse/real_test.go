package httpparse

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// connReader reads a connection in small pieces, so that heads and bodies
// arrive split, and keeps the unconsumed bytes.
type connReader struct {
	conn net.Conn
	buf  []byte
	eof  bool
}

func (c *connReader) fill() error {
	if c.eof {
		return io.ErrUnexpectedEOF
	}
	var tmp [7]byte
	n, err := c.conn.Read(tmp[:])
	c.buf = append(c.buf, tmp[:n]...)
	if err == io.EOF {
		c.eof = true
		return nil
	}
	return err
}

// consume drops n bytes; the rest moves to a new buffer, as it would
// between two reads of an event loop.
func (c *connReader) consume(n int) {
	c.buf = append([]byte(nil), c.buf[n:]...)
}

// body reads a body of the given mode and returns its data.
func (c *connReader) body(mode BodyMode, length int64) ([]byte, error) {
	var data []byte
	switch mode {
	case BodyLength:
		for int64(len(data)) < length {
			if len(c.buf) == 0 {
				if err := c.fill(); err != nil {
					return nil, err
				}
				continue
			}
			n := min(int64(len(c.buf)), length-int64(len(data)))
			data = append(data, c.buf[:n]...)
			c.consume(int(n))
		}
	case BodyChunked:
		var ch Chunked
		var raw []byte
		for {
			n, done, err := ch.Scan(c.buf)
			if err != nil {
				return nil, err
			}
			raw = append(raw, c.buf[:n]...)
			c.consume(n)
			if done {
				break
			}
			if err := c.fill(); err != nil {
				return nil, err
			}
		}
		d, _, err := decodeChunked(raw)
		return d, err
	case BodyUntilClose:
		for !c.eof {
			if err := c.fill(); err != nil {
				return nil, err
			}
		}
		data = c.buf
		c.buf = nil
	}
	return data, nil
}

// TestRealClient parses the requests net/http's client sends over loopback,
// as they arrive, and answers each with what it parsed.
func TestRealClient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	serverErr := make(chan error, 8)
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				if err := serveParsed(conn); err != nil {
					serverErr <- err
				}
			}()
		}
	}()

	client := &http.Client{
		Timeout:   10 * time.Second,
		Transport: &http.Transport{ExpectContinueTimeout: 5 * time.Second},
	}
	defer client.CloseIdleConnections()
	base := "http://" + ln.Addr().String()
	tests := []struct {
		name   string
		method string
		path   string
		body   io.Reader
		header map[string]string
		want   string
	}{
		{"get", "GET", "/hello?x=1&y=%20", nil, nil, "GET /hello x=1&y=%20 len=-1 chunked=false body="},
		{"post with length", "POST", "/p", strings.NewReader("abc"), nil, "POST /p  len=3 chunked=false body=abc"},
		{"post chunked", "POST", "/c", io.MultiReader(strings.NewReader("chunk"), strings.NewReader("ed body")), nil,
			"POST /c  len=-1 chunked=true body=chunked body"},
		{"expect continue", "PUT", "/e", strings.NewReader(strings.Repeat("z", 3000)), map[string]string{"Expect": "100-continue"},
			"PUT /e  len=3000 chunked=false expect body=" + strings.Repeat("z", 3000)},
		{"many fields", "GET", "/m", nil, map[string]string{"X-A": "1", "X-B": "two words", "Cookie": "a=b; c=d", "User-Agent": "test/1.0"},
			"GET /m  len=-1 chunked=false body="},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, base+tt.path, tt.body)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tt.header {
				req.Header.Set(k, v)
			}
			resp, err := client.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 || string(got) != tt.want {
				t.Errorf("got %d %q, want 200 %q", resp.StatusCode, got, tt.want)
			}
		})
	}
	select {
	case err := <-serverErr:
		t.Fatalf("server: %v", err)
	default:
	}
}

// serveParsed answers requests on conn until the client closes it.
func serveParsed(conn net.Conn) error {
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		return err
	}
	c := &connReader{conn: conn}
	var (
		p RequestParser
		r Request
	)
	for {
		err := p.Parse(c.buf, &r)
		if err == ErrNeedMore {
			if len(c.buf) == 0 && c.eof {
				return nil
			}
			if err := c.fill(); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			fmt.Fprintf(conn, "HTTP/1.1 %d Bad Request\r\nContent-Length: 0\r\n\r\n", Status(err))
			return err
		}
		if len(r.Host) == 0 {
			return errors.New("no host")
		}
		summary := fmt.Sprintf("%s %s %s len=%d chunked=%v", r.Method, r.Path, r.Query, r.ContentLength, r.Chunked)
		if r.Expect100 {
			summary += " expect"
			if _, err := io.WriteString(conn, "HTTP/1.1 100 Continue\r\n\r\n"); err != nil {
				return err
			}
		}
		mode, length := BodyNone, r.ContentLength
		switch {
		case r.Chunked:
			mode = BodyChunked
		case r.ContentLength > 0:
			mode = BodyLength
		}
		c.consume(r.HeadLen)
		data, err := c.body(mode, length)
		if err != nil {
			return err
		}
		out := summary + " body=" + string(data)
		if _, err := fmt.Fprintf(conn, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(out), out); err != nil {
			return err
		}
	}
}

// TestRealServer parses the responses of a net/http server over loopback,
// read in small pieces from one connection that carries pipelined requests.
func TestRealServer(t *testing.T) {
	kib := strings.Repeat("0123456789abcdef", 64)
	mux := http.NewServeMux()
	mux.HandleFunc("/len", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(len(kib)))
		io.WriteString(w, kib)
	})
	mux.HandleFunc("/chunked", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		for _, s := range []string{"one ", "two ", "three"} {
			io.WriteString(w, s)
			w.(http.Flusher).Flush()
		}
		w.Header().Set("X-Sum", "3")
	})
	mux.HandleFunc("/early", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Link", "</a.css>; rel=preload")
		w.WriteHeader(http.StatusEarlyHints)
		io.WriteString(w, "after hints")
	})
	mux.HandleFunc("/empty", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusNoContent)
	})
	mux.HandleFunc("/stream", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "until ")
		w.(http.Flusher).Flush()
		io.WriteString(w, "close")
	})
	srv := httptest.NewServer(mux)
	defer srv.Close()

	conn, err := net.DialTimeout("tcp", srv.Listener.Addr().String(), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := conn.SetDeadline(time.Now().Add(10 * time.Second)); err != nil {
		t.Fatal(err)
	}
	reqs := []struct {
		method, path, proto string
		want                []string // status and body of each response head, 1xx included
	}{
		{"GET", "/len", "HTTP/1.1", []string{"200 " + kib}},
		{"GET", "/chunked", "HTTP/1.1", []string{"200 one two three"}},
		{"HEAD", "/len", "HTTP/1.1", []string{"200 "}},
		{"GET", "/early", "HTTP/1.1", []string{"103 ", "200 after hints"}},
		{"GET", "/empty", "HTTP/1.1", []string{"204 "}},
		{"GET", "/stream", "HTTP/1.0", []string{"200 until close"}},
	}
	var all bytes.Buffer
	for _, r := range reqs {
		fmt.Fprintf(&all, "%s %s %s\r\nHost: test\r\n\r\n", r.method, r.path, r.proto)
	}
	if _, err := conn.Write(all.Bytes()); err != nil {
		t.Fatal(err)
	}
	c := &connReader{conn: conn}
	var (
		p    ResponseParser
		resp Response
	)
	for _, rq := range reqs {
		var got []string
		for {
			err := p.Parse(c.buf, &resp)
			if err == ErrNeedMore {
				if err := c.fill(); err != nil {
					t.Fatalf("%s: %v", rq.path, err)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: Parse: %v", rq.path, err)
			}
			mode := ResponseBodyFor(&resp, []byte(rq.method))
			status, length := resp.Status, resp.ContentLength
			c.consume(resp.HeadLen)
			data, err := c.body(mode, length)
			if err != nil {
				t.Fatalf("%s: body: %v", rq.path, err)
			}
			got = append(got, strconv.Itoa(status)+" "+string(data))
			if status >= 200 {
				break
			}
		}
		if strings.Join(got, "|") != strings.Join(rq.want, "|") {
			t.Errorf("%s %s: got %q, want %q", rq.method, rq.path, got, rq.want)
		}
	}
	if len(c.buf) != 0 || !c.eof {
		t.Errorf("%d bytes left, eof %v", len(c.buf), c.eof)
	}
}
