package load

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

type feedResult struct {
	Done   bool
	Used   int
	Status int
	Close  bool
}

func TestParser(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want feedResult
		err  error
	}{
		{
			name: "content-length",
			in:   "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n1234567890",
			want: feedResult{Done: true, Used: 49, Status: 200},
		},
		{
			name: "chunked with extension and trailer",
			in:   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5;x=y\r\n12345\r\na\r\n1234567890\r\n0\r\nX-T: 1\r\n\r\n",
			want: feedResult{Done: true, Used: 89, Status: 200},
		},
		{
			name: "no body for 204, connection close",
			in:   "HTTP/1.1 204 No Content\r\nConnection: Close\r\n\r\n",
			want: feedResult{Done: true, Used: 46, Status: 204, Close: true},
		},
		{
			name: "503 with empty body",
			in:   "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n",
			want: feedResult{Done: true, Used: 55, Status: 503},
		},
		{
			name: "HTTP/1.0 closes",
			in:   "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx",
			want: feedResult{Done: true, Used: 39, Status: 200, Close: true},
		},
		{
			name: "close-delimited body waits for EOF",
			in:   "HTTP/1.1 200 OK\r\n\r\nabc",
			want: feedResult{Done: false, Used: 22, Status: 200},
		},
		{name: "bad status", in: "HTTP/1.1 2x0 OK\r\n\r\n", err: ErrMalformed},
		{name: "not http", in: "SSH-2.0-x\r\n\r\n", err: ErrMalformed},
		{name: "conflicting lengths", in: "HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx", err: ErrMalformed},
		{name: "bad chunk size", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", err: ErrMalformed},
		{name: "bad chunk end", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxyz", err: ErrMalformed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var p parser
			used, done, err := p.feed([]byte(tc.in), maxHead)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error = %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			got := feedResult{Done: done, Used: used, Status: p.status, Close: p.close}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
			// Fed one byte at a time, as a caller that keeps unconsumed
			// bytes would, the parser must reach the same end.
			var q parser
			buf := []byte{}
			total, qdone := 0, false
			for i := 0; i < len(tc.in) && !qdone; i++ {
				buf = append(buf, tc.in[i])
				u, d, err := q.feed(buf, maxHead)
				if err != nil {
					t.Fatalf("byte %d: %v", i, err)
				}
				buf = buf[u:]
				total += u
				qdone = d
			}
			if qdone != tc.want.Done || (qdone && total != tc.want.Used) {
				t.Errorf("bytewise: done=%v used=%d, want done=%v used=%d", qdone, total, tc.want.Done, tc.want.Used)
			}
		})
	}
}

func TestParserEOFAndLimits(t *testing.T) {
	var p parser
	if _, _, err := p.feed([]byte("HTTP/1.1 200 OK\r\n\r\nabc"), maxHead); err != nil {
		t.Fatal(err)
	}
	if !p.eof() {
		t.Error("eof did not complete a close-delimited body")
	}
	var q parser
	if _, _, err := q.feed(make([]byte, 100), 64); !errors.Is(err, ErrTooLarge) {
		t.Errorf("oversized head: error = %v, want ErrTooLarge", err)
	}
	var r parser
	if _, _, err := r.feed([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nab"), maxHead); err != nil || r.eof() {
		t.Errorf("truncated Content-Length body: err=%v, eof completed it", err)
	}
}
