package httpparse

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// validResponses are whole response heads and their parse; HeadLen is set
// from the input's length.
var validResponses = []struct {
	name string
	in   string
	want Response
}{
	{
		name: "ok with content-length",
		in:   "HTTP/1.1 200 OK\r\nContent-Length: 1024\r\nServer: x\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 200, Reason: b("OK"), ContentLength: 1024, KeepAlive: true,
			Headers: []Header{hdr("Content-Length", "1024"), hdr("Server", "x")}},
	},
	{
		name: "empty reason",
		in:   "HTTP/1.1 204 \r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 204, Reason: b(""), ContentLength: -1, KeepAlive: true},
	},
	{
		name: "no space before empty reason",
		in:   "HTTP/1.1 304\r\nDate: x\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 304, ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Date", "x")}},
	},
	{
		name: "reason with spaces, tab and obs-text",
		in:   "HTTP/1.1 404 Not \tFound \xe2\x9c\x97\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 404, Reason: b("Not \tFound \xe2\x9c\x97"), ContentLength: -1, KeepAlive: true},
	},
	{
		name: "http/1.0 keep-alive",
		in:   "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n",
		want: Response{Major: 1, Minor: 0, Status: 200, Reason: b("OK"), ContentLength: 0, Conn: ConnKeepAlive, KeepAlive: true,
			Headers: []Header{hdr("Connection", "keep-alive"), hdr("Content-Length", "0")}},
	},
	{
		name: "http/1.0 without keep-alive",
		in:   "HTTP/1.0 200 OK\r\n\r\n",
		want: Response{Major: 1, Minor: 0, Status: 200, Reason: b("OK"), ContentLength: -1},
	},
	{
		name: "chunked",
		in:   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 200, Reason: b("OK"), ContentLength: -1, Chunked: true, Conn: ConnClose,
			Headers: []Header{hdr("Transfer-Encoding", "chunked"), hdr("Connection", "close")}},
	},
	{
		name: "gzip then chunked",
		in:   "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\ntransfer-encoding: , CHUNKED\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 200, Reason: b("OK"), ContentLength: -1, Chunked: true, Coded: true, KeepAlive: true,
			Headers: []Header{hdr("Transfer-Encoding", "gzip"), hdr("transfer-encoding", ", CHUNKED")}},
	},
	{
		name: "chunked not final",
		in:   "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 200, Reason: b("OK"), ContentLength: -1, Coded: true, KeepAlive: true,
			Headers: []Header{hdr("Transfer-Encoding", "chunked, gzip")}},
	},
	{
		name: "continue",
		in:   "HTTP/1.1 100 Continue\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 100, Reason: b("Continue"), ContentLength: -1, KeepAlive: true},
	},
	{
		name: "switching protocols",
		in:   "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 101, Reason: b("Switching Protocols"), ContentLength: -1, Conn: ConnUpgrade, KeepAlive: true,
			Headers: []Header{hdr("Upgrade", "websocket"), hdr("Connection", "Upgrade")}},
	},
	{
		name: "http/1.1 minor above 1",
		in:   "HTTP/1.7 599 x\r\n\r\n",
		want: Response{Major: 1, Minor: 1, Status: 599, Reason: b("x"), ContentLength: -1, KeepAlive: true},
	},
}

func TestParseResponse(t *testing.T) {
	for _, tt := range validResponses {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.HeadLen = len(tt.in)
			var p ResponseParser
			var got Response
			if err := p.Parse([]byte(tt.in), &got); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(&tt.want, &got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// rejectedResponses are response heads with one fault each.
var rejectedResponses = []struct {
	name string
	in   string
	kind error
}{
	{"two-digit status", "HTTP/1.1 20 OK\r\n\r\n", ErrMalformed},
	{"four-digit status", "HTTP/1.1 2000 OK\r\n\r\n", ErrMalformed},
	{"status below 100", "HTTP/1.1 099 X\r\n\r\n", ErrMalformed},
	{"status above 599", "HTTP/1.1 600 X\r\n\r\n", ErrMalformed},
	{"status not digits", "HTTP/1.1 2x0 OK\r\n\r\n", ErrMalformed},
	{"signed status", "HTTP/1.1 +20 OK\r\n\r\n", ErrMalformed},
	{"two spaces", "HTTP/1.1  200 OK\r\n\r\n", ErrMalformed},
	{"http/2.0", "HTTP/2.0 200 OK\r\n\r\n", ErrVersion},
	{"http/0.9", "HTTP/0.9 200 OK\r\n\r\n", ErrMalformed},
	{"not http", "ICY 200 OK\r\n\r\n\r\n", ErrMalformed},
	{"lower-case version", "http/1.1 200 OK\r\n\r\n", ErrMalformed},
	{"bare lf status line", "HTTP/1.1 200 OK\n\r\n", ErrMalformed},
	{"bare cr status line", "HTTP/1.1 200 OK\rX\r\n\r\n", ErrMalformed},
	{"control in reason", "HTTP/1.1 200 O\x01K\r\n\r\n", ErrMalformed},
	{"leading empty line", "\r\nHTTP/1.1 200 OK\r\n\r\n", ErrMalformed},
	{"obs-fold", "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", ErrMalformed},
	{"space before colon", "HTTP/1.1 200 OK\r\nX : a\r\n\r\n", ErrMalformed},
	{"content-length with chunked", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", ErrMalformed},
	{"content-length with gzip", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\nContent-Length: 3\r\n\r\n", ErrMalformed},
	{"chunked twice", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", ErrMalformed},
	{"empty transfer-encoding", "HTTP/1.1 200 OK\r\nTransfer-Encoding: ,\r\n\r\n", ErrMalformed},
	{"coding with parameter", "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip;q=1, chunked\r\n\r\n", ErrMalformed},
	{"transfer-encoding in http/1.0", "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", ErrMalformed},
	{"content-lengths differ", "HTTP/1.1 200 OK\r\nContent-Length: 3\r\nContent-Length: 4\r\n\r\n", ErrMalformed},
	{"content-length negative", "HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n", ErrMalformed},
}

func TestParseResponseRejects(t *testing.T) {
	for _, tt := range rejectedResponses {
		t.Run(tt.name, func(t *testing.T) {
			var p ResponseParser
			var r Response
			err := p.Parse([]byte(tt.in), &r)
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, tt.kind) {
				t.Fatalf("Parse = %v, want a *ParseError of %v", err, tt.kind)
			}
		})
	}
}

func TestResponseBody(t *testing.T) {
	tests := []struct {
		name   string
		status int
		cl     int64
		ch     bool
		method string
		want   BodyMode
	}{
		{"length", 200, 10, false, "GET", BodyLength},
		{"zero length", 200, 0, false, "GET", BodyNone},
		{"chunked", 200, -1, true, "POST", BodyChunked},
		{"until close", 200, -1, false, "GET", BodyUntilClose},
		{"head with length", 200, 10, false, "HEAD", BodyNone},
		{"head with chunked", 200, -1, true, "HEAD", BodyNone},
		{"continue", 100, -1, false, "GET", BodyNone},
		{"switching protocols", 101, -1, false, "GET", BodyNone},
		{"no content with length", 204, 10, false, "GET", BodyNone},
		{"not modified with length", 304, 10, false, "GET", BodyNone},
		{"not modified chunked", 304, -1, true, "GET", BodyNone},
		{"connect 200", 200, -1, false, "CONNECT", BodyNone},
		{"connect 204", 204, 5, false, "CONNECT", BodyNone},
		{"connect refused with length", 407, 5, false, "CONNECT", BodyLength},
		{"error until close", 500, -1, false, "GET", BodyUntilClose},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := &Response{Major: 1, Minor: 1, Status: tt.status, ContentLength: tt.cl, Chunked: tt.ch}
			if got := ResponseBodyFor(r, []byte(tt.method)); got != tt.want {
				t.Errorf("ResponseBodyFor(%s) = %d, want %d", tt.method, got, tt.want)
			}
			if tt.method != "CONNECT" {
				if got := ResponseBody(r, tt.method == "HEAD"); got != tt.want {
					t.Errorf("ResponseBody = %d, want %d", got, tt.want)
				}
			}
		})
	}
}

func TestResponseBodyParsed(t *testing.T) {
	// The framing fields as parsed feed ResponseBody.
	tests := []struct {
		in   string
		want BodyMode
	}{
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", BodyUntilClose},
		{"HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", BodyChunked},
		{"HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\n", BodyLength},
		{"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", BodyNone},
		{"HTTP/1.0 200 OK\r\n\r\n", BodyUntilClose},
		{"HTTP/1.1 204 No Content\r\nContent-Length: 7\r\n\r\n", BodyNone},
	}
	for _, tt := range tests {
		var p ResponseParser
		var r Response
		if err := p.Parse([]byte(tt.in), &r); err != nil {
			t.Fatalf("Parse(%q): %v", tt.in, err)
		}
		if got := ResponseBody(&r, false); got != tt.want {
			t.Errorf("ResponseBody(%q) = %d, want %d", tt.in, got, tt.want)
		}
	}
}
