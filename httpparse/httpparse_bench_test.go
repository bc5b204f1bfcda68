package httpparse

import "testing"

func BenchmarkParseRequest(b *testing.B) {
	buf := []byte(sampleRequest)
	var p RequestParser
	var r Request
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Parse(buf, &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseRequestSplit parses the sample request delivered in two
// halves: one ErrNeedMore, then the whole head.
func BenchmarkParseRequestSplit(b *testing.B) {
	buf := []byte(sampleRequest)
	half := buf[:len(buf)/2]
	var p RequestParser
	var r Request
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Parse(half, &r); err != ErrNeedMore {
			b.Fatal(err)
		}
		if err := p.Parse(buf, &r); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkParseResponse parses the head of a 1 KiB response and picks its
// body mode; bytes per second count the head only.
func BenchmarkParseResponse(b *testing.B) {
	buf := []byte(sampleResponse)
	var p ResponseParser
	var r Response
	b.SetBytes(int64(len(sampleResponseHead)))
	b.ReportAllocs()
	for b.Loop() {
		if err := p.Parse(buf, &r); err != nil {
			b.Fatal(err)
		}
		if ResponseBody(&r, false) != BodyLength {
			b.Fatal("wrong body mode")
		}
	}
}

func BenchmarkChunked(b *testing.B) {
	buf := []byte(sampleChunked)
	var c Chunked
	b.SetBytes(int64(len(buf)))
	b.ReportAllocs()
	for b.Loop() {
		c.Reset()
		if _, done, err := c.Scan(buf); err != nil || !done {
			b.Fatal(done, err)
		}
	}
}
