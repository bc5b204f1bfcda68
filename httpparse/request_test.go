package httpparse

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// hdr builds an expected Header; IDs come from lookupHeader, which
// TestLookupHeader checks on its own.
func hdr(name, value string) Header {
	return Header{Name: []byte(name), Value: []byte(value), ID: lookupHeader([]byte(name))}
}

func b(s string) []byte { return []byte(s) }

// parseRequestString parses s whole with a fresh parser.
func parseRequestString(t *testing.T, s string, lim Limits) (*Request, error) {
	t.Helper()
	p := RequestParser{Limits: lim}
	var r Request
	err := p.Parse([]byte(s), &r)
	return &r, err
}

// validRequests are whole request heads and their parse; HeadLen is set
// from the input's length.
var validRequests = []struct {
	name string
	in   string
	want Request
}{
	{
		name: "origin-form",
		in:   "GET / HTTP/1.1\r\nHost: example.com\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1,
			Host: b("example.com"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "example.com")}},
	},
	{
		name: "query",
		in:   "GET /a/b?x=1&y=%zz?z HTTP/1.1\r\nHost: h\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/a/b?x=1&y=%zz?z"), Path: b("/a/b"), Query: b("x=1&y=%zz?z"),
			Major: 1, Minor: 1, Host: b("h"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h")}},
	},
	{
		name: "empty query",
		in:   "GET /a? HTTP/1.1\r\nHost: h\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/a?"), Path: b("/a"), Query: b(""),
			Major: 1, Minor: 1, Host: b("h"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h")}},
	},
	{
		name: "percent-encoding and lenient bytes in path",
		in:   "GET /a%20b/%C3%A9/caf\xc3\xa9/{x}|\"^`\\ HTTP/1.1\r\nHost: h\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/a%20b/%C3%A9/caf\xc3\xa9/{x}|\"^`\\"), Path: b("/a%20b/%C3%A9/caf\xc3\xa9/{x}|\"^`\\"),
			Major: 1, Minor: 1, Host: b("h"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h")}},
	},
	{
		name: "absolute-form takes host from target",
		in:   "GET http://Example.com:8080/p?q HTTP/1.1\r\nHost: other\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("http://Example.com:8080/p?q"), Path: b("/p"), Query: b("q"),
			Major: 1, Minor: 1, Host: b("Example.com:8080"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "other")}},
	},
	{
		name: "absolute-form without path",
		in:   "GET HTTPS://h HTTP/1.1\r\nHost: h\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("HTTPS://h"), Path: b("/"),
			Major: 1, Minor: 1, Host: b("h"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h")}},
	},
	{
		name: "absolute-form with query and no path",
		in:   "GET http://[::1]:80?x HTTP/1.1\r\nHost: h\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("http://[::1]:80?x"), Path: b("/"), Query: b("x"),
			Major: 1, Minor: 1, Host: b("[::1]:80"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h")}},
	},
	{
		name: "authority-form for connect",
		in:   "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n",
		want: Request{Method: b("CONNECT"), Target: b("example.com:443"),
			Major: 1, Minor: 1, Host: b("example.com:443"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "example.com:443")}},
	},
	{
		name: "asterisk-form for options",
		in:   "OPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
		want: Request{Method: b("OPTIONS"), Target: b("*"), Path: b("*"),
			Major: 1, Minor: 1, Host: b("h"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h")}},
	},
	{
		// nginx accepts both: a leading dot, and one trailing dot that
		// its $host drops.
		name: "host with a leading and a trailing dot",
		in:   "GET / HTTP/1.1\r\nHost: .secure.test.:80\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/"), Path: b("/"),
			Major: 1, Minor: 1, Host: b(".secure.test.:80"), ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", ".secure.test.:80")}},
	},
	{
		name: "http/1.0 without host",
		in:   "GET /x HTTP/1.0\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/x"), Path: b("/x"), Major: 1, Minor: 0,
			ContentLength: -1},
	},
	{
		name: "http/1.0 keep-alive",
		in:   "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/"), Path: b("/"), Major: 1, Minor: 0,
			ContentLength: -1, Conn: ConnKeepAlive, KeepAlive: true,
			Headers: []Header{hdr("Connection", "Keep-Alive")}},
	},
	{
		name: "http/1.0 expect is ignored",
		in:   "PUT / HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 1\r\n\r\n",
		want: Request{Method: b("PUT"), Target: b("/"), Path: b("/"), Major: 1, Minor: 0,
			ContentLength: 1, Headers: []Header{hdr("Expect", "100-continue"), hdr("Content-Length", "1")}},
	},
	{
		name: "connection close and other tokens",
		in:   "GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\nconnection: ,UPGRADE , x-foo,\r\nUpgrade: websocket\r\nUpgrade: h2c\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: -1, Conn: ConnClose | ConnUpgrade | ConnOther, Upgrade: b("websocket"),
			Headers: []Header{hdr("Host", "h"), hdr("Connection", "close"), hdr("connection", ",UPGRADE , x-foo,"),
				hdr("Upgrade", "websocket"), hdr("Upgrade", "h2c")}},
	},
	{
		name: "http/1.2 parses as 1.1",
		in:   "GET / HTTP/1.2\r\nHost: h\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: -1, KeepAlive: true, Headers: []Header{hdr("Host", "h")}},
	},
	{
		name: "leading empty lines",
		in:   "\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: -1, KeepAlive: true, Headers: []Header{hdr("Host", "h")}},
	},
	{
		name: "content-length",
		in:   "POST /u HTTP/1.1\r\nHost: h\r\nContent-Length: 42\r\n\r\n",
		want: Request{Method: b("POST"), Target: b("/u"), Path: b("/u"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: 42, KeepAlive: true, Headers: []Header{hdr("Host", "h"), hdr("Content-Length", "42")}},
	},
	{
		name: "identical content-lengths collapse",
		in:   "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007, 007\r\ncontent-length:007\r\n\r\n",
		want: Request{Method: b("POST"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: 7, KeepAlive: true,
			Headers: []Header{hdr("Host", "h"), hdr("Content-Length", "007, 007"), hdr("content-length", "007")}},
	},
	{
		name: "largest content-length",
		in:   "POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 9223372036854775807\r\n\r\n",
		want: Request{Method: b("POST"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: 1<<63 - 1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h"), hdr("Content-Length", "9223372036854775807")}},
	},
	{
		name: "chunked",
		in:   "POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: Chunked\r\n\r\n",
		want: Request{Method: b("POST"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: -1, Chunked: true, KeepAlive: true,
			Headers: []Header{hdr("Host", "h"), hdr("Transfer-Encoding", "Chunked")}},
	},
	{
		name: "expect 100-continue",
		in:   "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n",
		want: Request{Method: b("PUT"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: 3, KeepAlive: true, Expect100: true,
			Headers: []Header{hdr("Host", "h"), hdr("Expect", "100-Continue"), hdr("Content-Length", "3")}},
	},
	{
		name: "other expectation",
		in:   "PUT / HTTP/1.1\r\nHost: h\r\nExpect: 200-ok\r\n\r\n",
		want: Request{Method: b("PUT"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h"), hdr("Expect", "200-ok")}},
	},
	{
		name: "value whitespace trimmed, empty values, obs-text",
		in:   "GET / HTTP/1.1\r\nHost: \t h \t\r\nX-Empty:\r\nX-Sp:   \r\nX-Text: caf\xc3\xa9 \t au\tlait\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: -1, KeepAlive: true,
			Headers: []Header{hdr("Host", "h"), hdr("X-Empty", ""), hdr("X-Sp", ""), hdr("X-Text", "caf\xc3\xa9 \t au\tlait")}},
	},
	{
		name: "empty host and custom method",
		in:   "M-SEARCH / HTTP/1.1\r\nHost:\r\n\r\n",
		want: Request{Method: b("M-SEARCH"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b(""),
			ContentLength: -1, KeepAlive: true, Headers: []Header{hdr("Host", "")}},
	},
	{
		name: "ipv6 host",
		in:   "GET / HTTP/1.1\r\nHost: [2001:db8::7:1.2.3.4]:8080\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("/"), Path: b("/"), Major: 1, Minor: 1, Host: b("[2001:db8::7:1.2.3.4]:8080"),
			ContentLength: -1, KeepAlive: true, Headers: []Header{hdr("Host", "[2001:db8::7:1.2.3.4]:8080")}},
	},
	{
		name: "double slash is a path",
		in:   "GET //h/p HTTP/1.1\r\nHost: h\r\n\r\n",
		want: Request{Method: b("GET"), Target: b("//h/p"), Path: b("//h/p"), Major: 1, Minor: 1, Host: b("h"),
			ContentLength: -1, KeepAlive: true, Headers: []Header{hdr("Host", "h")}},
	},
}

func TestParseRequest(t *testing.T) {
	for _, tt := range validRequests {
		t.Run(tt.name, func(t *testing.T) {
			tt.want.HeadLen = len(tt.in) // every input is one whole head
			got, err := parseRequestString(t, tt.in, Limits{})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("Parse mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// okStart is a request line and Host field to build rejected heads on.
const okStart = "GET / HTTP/1.1\r\nHost: h\r\n"

// rejectedRequests are request heads with one fault each.
var rejectedRequests = []struct {
	name string
	in   string
	kind error
}{
	// request line
	{"two spaces after method", "GET  / HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"two spaces before version", "GET /  HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"space after version", "GET / HTTP/1.1 \r\nHost: h\r\n\r\n", ErrMalformed},
	{"leading space", " GET / HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"tab separator", "GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"method not a token", "G(T / HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"empty method", " / HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"control byte in target", "GET /a\x01b HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"del in target", "GET /a\x7fb HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"nul in target", "GET /a\x00b HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"fragment in target", "GET /a#b HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"bad percent-encoding", "GET /a%zz HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"short percent-encoding", "GET /a%2 HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"no version", "GET /\r\n\r\n", ErrMalformed},
	{"http/0.9", "GET / HTTP/0.9\r\n\r\n", ErrMalformed},
	{"lower-case version", "GET / http/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"two-digit minor", "GET / HTTP/1.10\r\nHost: h\r\n\r\n", ErrMalformed},
	{"version without dot", "GET / HTTP/11\r\nHost: h\r\n\r\n", ErrMalformed},
	{"http/2.0", "GET / HTTP/2.0\r\nHost: h\r\n\r\n", ErrVersion},
	{"http/3.0", "GET / HTTP/3.0\r\nHost: h\r\n\r\n", ErrVersion},
	{"h2 preface", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", ErrVersion},
	{"bare lf after request line", "GET / HTTP/1.1\nHost: h\r\n\r\n", ErrMalformed},
	{"bare cr after request line", "GET / HTTP/1.1\rHost: h\r\n\r\n", ErrMalformed},
	{"bare lf leading line", "\nGET / HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"bare cr leading line", "\rGET / HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	// request-target forms
	{"asterisk for get", "GET * HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"asterisk with query", "OPTIONS *?x HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"other scheme", "GET ftp://h/ HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"scheme without slashes", "GET http:/h HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"empty authority", "GET http:///p HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"userinfo", "GET http://u@h/ HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"bad port in authority", "GET http://h:x/ HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"relative target", "GET a/b HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"authority-form for get", "GET h:80 HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"connect with path", "CONNECT /x HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"connect without port", "CONNECT h HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"connect with empty port", "CONNECT h: HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	{"connect with absolute-form", "CONNECT http://h:1/ HTTP/1.1\r\nHost: h\r\n\r\n", ErrMalformed},
	// field lines
	{"space before colon", okStart + "X-A : 1\r\n\r\n", ErrMalformed},
	{"tab before colon", okStart + "X-A\t: 1\r\n\r\n", ErrMalformed},
	{"obs-fold", okStart + "X-A: 1\r\n 2\r\n\r\n", ErrMalformed},
	{"obs-fold with tab", okStart + "X-A: 1\r\n\t2\r\n\r\n", ErrMalformed},
	{"whitespace before first field", "GET / HTTP/1.1\r\n Host: h\r\n\r\n", ErrMalformed},
	{"name not a token", okStart + "X@A: 1\r\n\r\n", ErrMalformed},
	{"empty name", okStart + ": 1\r\n\r\n", ErrMalformed},
	{"no colon", okStart + "X-A\r\n\r\n", ErrMalformed},
	{"nul in value", okStart + "X-A: a\x00b\r\n\r\n", ErrMalformed},
	{"del in value", okStart + "X-A: a\x7fb\r\n\r\n", ErrMalformed},
	{"control in value", okStart + "X-A: a\x1bb\r\n\r\n", ErrMalformed},
	{"control in long value", okStart + "X-A: aaaaaaaaaaaaaaaaaaaaaaaa\x0baaaaaaaaaaaaaaaaaaaaa\r\n\r\n", ErrMalformed},
	{"bare cr in value", okStart + "X-A: a\rb\r\n\r\n", ErrMalformed},
	{"bare lf in value", okStart + "X-A: a\nb\r\n\r\n", ErrMalformed},
	{"bare lf after field", okStart + "X-A: a\n\r\n", ErrMalformed},
	{"bare lf ends head", okStart + "\n", ErrMalformed},
	{"bare cr ends head", okStart + "\rx", ErrMalformed},
	// Content-Length
	{"content-length not digits", okStart + "Content-Length: abc\r\n\r\n", ErrMalformed},
	{"content-length empty", okStart + "Content-Length:\r\n\r\n", ErrMalformed},
	{"content-length plus sign", okStart + "Content-Length: +5\r\n\r\n", ErrMalformed},
	{"content-length minus sign", okStart + "Content-Length: -5\r\n\r\n", ErrMalformed},
	{"content-length inner space", okStart + "Content-Length: 5 5\r\n\r\n", ErrMalformed},
	{"content-length exponent", okStart + "Content-Length: 1e3\r\n\r\n", ErrMalformed},
	{"content-length overflow", okStart + "Content-Length: 9223372036854775808\r\n\r\n", ErrMalformed},
	{"content-length huge", okStart + "Content-Length: 99999999999999999999999\r\n\r\n", ErrMalformed},
	{"content-length list differs", okStart + "Content-Length: 5, 6\r\n\r\n", ErrMalformed},
	{"content-length fields differ", okStart + "Content-Length: 5\r\nContent-Length: 6\r\n\r\n", ErrMalformed},
	{"content-length spelled differently", okStart + "Content-Length: 5\r\nContent-Length: 05\r\n\r\n", ErrMalformed},
	{"content-length empty element", okStart + "Content-Length: 5,\r\n\r\n", ErrMalformed},
	{"content-length with chunked", okStart + "Content-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", ErrMalformed},
	{"chunked with content-length", okStart + "Transfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", ErrMalformed},
	// Transfer-Encoding
	{"gzip", okStart + "Transfer-Encoding: gzip\r\n\r\n", ErrNotImplemented},
	{"gzip then chunked", okStart + "Transfer-Encoding: gzip, chunked\r\n\r\n", ErrNotImplemented},
	{"chunked then gzip", okStart + "Transfer-Encoding: chunked, gzip\r\n\r\n", ErrNotImplemented},
	{"chunked twice in a list", okStart + "Transfer-Encoding: chunked, chunked\r\n\r\n", ErrMalformed},
	{"chunked twice in fields", okStart + "Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", ErrMalformed},
	{"chunked and gzip fields", okStart + "Transfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", ErrMalformed},
	{"identity", okStart + "Transfer-Encoding: identity\r\n\r\n", ErrNotImplemented},
	{"empty transfer-encoding", okStart + "Transfer-Encoding:\r\n\r\n", ErrMalformed},
	{"chunked with parameter", okStart + "Transfer-Encoding: chunked;q=1\r\n\r\n", ErrMalformed},
	{"chunked with trailing comma", okStart + "Transfer-Encoding: chunked,\r\n\r\n", ErrMalformed},
	{"gzip with trailing comma", okStart + "Transfer-Encoding: gzip ,\r\n\r\n", ErrMalformed},
	{"empty element then gzip", okStart + "Transfer-Encoding: , gzip\r\n\r\n", ErrMalformed},
	{"transfer-encoding in http/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", ErrMalformed},
	// Host
	{"missing host", "GET / HTTP/1.1\r\n\r\n", ErrMalformed},
	{"missing host with absolute-form", "GET http://h/ HTTP/1.1\r\n\r\n", ErrMalformed},
	{"repeated host", okStart + "Host: h\r\n\r\n", ErrMalformed},
	{"repeated host in http/1.0", "GET / HTTP/1.0\r\nHost: a\r\nHost: a\r\n\r\n", ErrMalformed},
	{"space in host", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ErrMalformed},
	{"slash in host", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", ErrMalformed},
	{"at in host", "GET / HTTP/1.1\r\nHost: u@h\r\n\r\n", ErrMalformed},
	{"percent in host", "GET / HTTP/1.1\r\nHost: %41\r\n\r\n", ErrMalformed},
	{"port not digits", "GET / HTTP/1.1\r\nHost: h:8o\r\n\r\n", ErrMalformed},
	{"two ports", "GET / HTTP/1.1\r\nHost: h:1:2\r\n\r\n", ErrMalformed},
	{"port only", "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", ErrMalformed},
	{"unclosed ipv6", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", ErrMalformed},
	{"bad ipv6", "GET / HTTP/1.1\r\nHost: [1::2::3]\r\n\r\n", ErrMalformed},
	{"ipv4 in brackets", "GET / HTTP/1.1\r\nHost: [1.2.3.4]\r\n\r\n", ErrMalformed},
	{"ipv6 zone", "GET / HTTP/1.1\r\nHost: [fe80::1%25eth0]\r\n\r\n", ErrMalformed},
	{"invalid host with absolute-form", "GET http://h/ HTTP/1.1\r\nHost: a b\r\n\r\n", ErrMalformed},
	// Empty labels, as nginx refuses them (ngx_http_validate_host).
	{"two trailing dots in host", "GET / HTTP/1.1\r\nHost: secure.test..\r\n\r\n", ErrMalformed},
	{"two trailing dots in host with port", "GET / HTTP/1.1\r\nHost: secure.test..:80\r\n\r\n", ErrMalformed},
	{"two dots inside host", "GET / HTTP/1.1\r\nHost: secure..test\r\n\r\n", ErrMalformed},
	{"two leading dots in host", "GET / HTTP/1.1\r\nHost: ..secure.test\r\n\r\n", ErrMalformed},
	{"dot host", "GET / HTTP/1.1\r\nHost: .\r\n\r\n", ErrMalformed},
	{"dot host with port", "GET / HTTP/1.1\r\nHost: .:80\r\n\r\n", ErrMalformed},
	{"dots host", "GET / HTTP/1.1\r\nHost: ..\r\n\r\n", ErrMalformed},
	{"two trailing dots in absolute-form", "GET http://secure.test../ HTTP/1.1\r\nHost: secure.test\r\n\r\n", ErrMalformed},
	{"two dots in absolute-form with port", "GET http://a..b:80/ HTTP/1.1\r\nHost: a\r\n\r\n", ErrMalformed},
	{"dot in absolute-form", "GET http://./ HTTP/1.1\r\nHost: a\r\n\r\n", ErrMalformed},
	{"two dots in authority-form", "CONNECT a..b:443 HTTP/1.1\r\nHost: a\r\n\r\n", ErrMalformed},
	// Connection
	{"connection not a token", okStart + "Connection: close x\r\n\r\n", ErrMalformed},
}

func TestParseRequestRejects(t *testing.T) {
	for _, tt := range rejectedRequests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := parseRequestString(t, tt.in, Limits{})
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse = %v, want a *ParseError of %v", err, tt.kind)
			}
			if !errors.Is(err, tt.kind) {
				t.Errorf("Parse = %v, want %v", err, tt.kind)
			}
			if pe.Offset < 0 || pe.Offset > len(tt.in) {
				t.Errorf("Offset %d outside the %d-byte input", pe.Offset, len(tt.in))
			}
		})
	}
}

func TestValidIPv6(t *testing.T) {
	tests := map[string]bool{
		"::": true, "::1": true, "1::": true, "1:2:3:4:5:6:7:8": true, "1:2:3:4:5:6:7::": true,
		"::2:3:4:5:6:7:8": true, "fe80::1": true, "::ffff:1.2.3.4": true, "1:2:3:4:5:6:1.2.3.4": true,
		"ABCD:ef01::": true,
		"":            false, ":": false, ":1": false, "1:": false, "1::2::3": false, "1:2:3:4:5:6:7:8:9": false,
		"1:2:3:4:5:6:7": false, "1::2:3:4:5:6:7:8": false, "12345::": false, "g::": false,
		"::1.2.3": false, "::1.2.3.256": false, "::1.2.3.04": false, "1.2.3.4": false, ":::": false,
		"::1.2.3.4:5": false, "1:2:3:4:5:6:7:1.2.3.4": false,
	}
	for in, want := range tests {
		if got := validIPv6([]byte(in)); got != want {
			t.Errorf("validIPv6(%q) = %v, want %v", in, got, want)
		}
	}
}

func TestLookupHeader(t *testing.T) {
	for id := HdrOther + 1; id < numHeaderIDs; id++ {
		name := id.String()
		for _, n := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
			if got := lookupHeader([]byte(n)); got != id {
				t.Errorf("lookupHeader(%q) = %v, want %v", n, got, id)
			}
			if got := lookupHeader([]byte(n + "x")); got != HdrOther {
				t.Errorf("lookupHeader(%q) = %v, want other", n+"x", got)
			}
			if got := lookupHeader([]byte(n[:len(n)-1] + "_")); got != HdrOther {
				t.Errorf("lookupHeader(%q) = %v, want other", n[:len(n)-1]+"_", got)
			}
		}
	}
	if got := HeaderID(200).String(); got != "other" {
		t.Errorf("HeaderID(200).String() = %q", got)
	}
}

// requestText is every byte-slice field of r, its headers' too, as text:
// found by reflection, so that a field added to Request is compared too.
func requestText(r *Request) string {
	var b strings.Builder
	v := reflect.ValueOf(r).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Interface().(type) {
		case []byte:
			fmt.Fprintf(&b, "%s=%q ", v.Type().Field(i).Name, f.Bytes())
		case []Header:
			for _, h := range r.Headers {
				fmt.Fprintf(&b, "%q: %q ", h.Name, h.Value)
			}
		}
	}
	return b.String()
}

// TestRebase: a request rebased onto a copy of its head reads the same
// once the head's buffer is overwritten, in every byte-slice field; a
// request parsed from another buffer is not rebased.
func TestRebase(t *testing.T) {
	for _, raw := range []string{
		"GET /a/b?x=1 HTTP/1.1\r\nHost: Example.com\r\nUpgrade: websocket\r\nConnection: upgrade\r\nX-A: 1\r\n\r\n",
		"\r\n\r\nOPTIONS * HTTP/1.1\r\nHost: h\r\n\r\n",
		"GET http://example.com/p?q HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"GET http://example.com HTTP/1.1\r\nHost: example.com\r\n\r\n",
		"POST /u HTTP/1.0\r\nContent-Length: 3\r\n\r\nabc",
	} {
		head := []byte(raw)
		var p RequestParser
		var r Request
		if err := p.Parse(head, &r); err != nil {
			t.Fatalf("%q: %v", raw, err)
		}
		want := requestText(&r)
		moved := append([]byte(nil), head[:r.HeadLen]...)
		if !r.Rebase(head[:r.HeadLen], moved) {
			t.Fatalf("%q: not rebased", raw)
		}
		for i := range head {
			head[i] = 'X'
		}
		if got := requestText(&r); got != want {
			t.Fatalf("%q rebased:\n%s\nwant\n%s", raw, got, want)
		}
		other := []byte(raw)
		if r.Rebase(other, append([]byte(nil), other...)) || requestText(&r) != want {
			t.Fatalf("%q: rebased from a buffer it was not parsed from", raw)
		}
	}
}
