package httpparse

import "strings"

// sampleRequest is a browser-like request head of about 300 bytes with ten
// fields.
const sampleRequest = "GET /api/v1/users/12345/profile?fields=name,email HTTP/1.1\r\n" +
	"Host: api.example.com\r\n" +
	"User-Agent: Mozilla/5.0 (X11; Linux x86_64; rv:128.0) Firefox/128.0\r\n" +
	"Accept: application/json, */*\r\n" +
	"Accept-Language: en-US,en;q=0.5\r\n" +
	"Accept-Encoding: gzip, deflate, br\r\n" +
	"Connection: keep-alive\r\n" +
	"Cookie: session=abc123def456\r\n" +
	"X-Request-ID: 7f3c2a1b-9d4e-4f6a\r\n" +
	"Referer: https://app.example.com/\r\n" +
	"DNT: 1\r\n" +
	"\r\n"

// sampleResponseHead is the head of a 1 KiB response; sampleResponse is
// the whole response.
const sampleResponseHead = "HTTP/1.1 200 OK\r\n" +
	"Server: nginx/1.26.0\r\n" +
	"Date: Mon, 01 Sep 2025 10:00:00 GMT\r\n" +
	"Content-Type: application/json; charset=utf-8\r\n" +
	"Content-Length: 1024\r\n" +
	"Connection: keep-alive\r\n" +
	"Cache-Control: no-cache\r\n" +
	"X-Request-ID: 7f3c2a1b-9d4e-4f6a\r\n" +
	"\r\n"

var sampleResponse = sampleResponseHead + strings.Repeat("x", 1024)

// sampleChunked is a 1 KiB body in four chunks, with an extension and a
// trailer.
var sampleChunked = "100\r\n" + strings.Repeat("a", 256) + "\r\n" +
	"100;ext=1\r\n" + strings.Repeat("b", 256) + "\r\n" +
	"100\r\n" + strings.Repeat("c", 256) + "\r\n" +
	"100\r\n" + strings.Repeat("d", 256) + "\r\n" +
	"0\r\nX-Checksum: 1234\r\n\r\n"
