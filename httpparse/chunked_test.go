package httpparse

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// decodeChunked feeds body to a Chunked one byte at a time and returns the
// chunk data (the bytes consumed while DataRemaining was above zero), the
// number of bytes of the body and the error.
func decodeChunked(body []byte) (data []byte, n int, err error) {
	return decodeChunkedMax(body, 0)
}

// decodeChunkedMax is decodeChunked with a MaxTrailerBytes.
func decodeChunkedMax(body []byte, max int) (data []byte, n int, err error) {
	c := Chunked{MaxTrailerBytes: max}
	for i := range body {
		inData := c.DataRemaining() > 0
		k, done, err := c.Scan(body[i : i+1])
		if err != nil {
			return data, i, err
		}
		if k != 1 {
			return data, i, errors.New("scan consumed nothing before the end")
		}
		if inData {
			data = append(data, body[i])
		}
		if done {
			return data, i + 1, nil
		}
	}
	return data, len(body), ErrNeedMore
}

type chunkedResult struct {
	N    int
	Done bool
	Err  string // kind only
}

// scanAll feeds in to c in pieces cut at the given offsets and sums up.
func scanAll(c *Chunked, in string, cuts []int) chunkedResult {
	var res chunkedResult
	prev := 0
	for _, k := range append(cuts, len(in)) {
		piece := []byte(in[prev:k])
		n, done, err := c.Scan(piece)
		res.N += n
		if err != nil {
			res.Err = kindOf(err)
			return res
		}
		if done {
			res.Done = true
			return res
		}
		if n != len(piece) {
			res.Err = "short scan without done"
			return res
		}
		prev = k
	}
	return res
}

func kindOf(err error) string {
	var pe *ParseError
	if errors.As(err, &pe) {
		return pe.Kind.Error()
	}
	return err.Error()
}

func TestChunked(t *testing.T) {
	tests := []struct {
		name string
		in   string
		data string
		n    int // body length when the body ends before the input does; 0 means len(in)
		done bool
	}{
		{"last chunk only", "0\r\n\r\n", "", 0, true},
		{"one chunk", "5\r\nhello\r\n0\r\n\r\n", "hello", 0, true},
		{"several chunks", "1\r\na\r\n2\r\nbc\r\nA\r\n0123456789\r\n0\r\n\r\n", "abc0123456789", 0, true},
		{"upper and lower hex", "a\r\n0123456789\r\nB\r\n0123456789a\r\n0\r\n\r\n", "01234567890123456789a", 0, true},
		{"leading zeros", "0005\r\nhello\r\n000\r\n\r\n", "hello", 0, true},
		{"sixteen digits", "0000000000000003\r\nabc\r\n0\r\n\r\n", "abc", 0, true},
		{"extensions", "5;a=b;c=\"d e\"\r\nhello\r\n0;last\r\n\r\n", "hello", 0, true},
		{"space before extension", "5 ;a\r\nhello\r\n0\r\n\r\n", "hello", 0, true},
		{"extensions with bws", "5; a = b ; c\t=\t\"d\\\"e\" ;f\r\nhello\r\n0\r\n\r\n", "hello", 0, true},
		{"quoted value with obs-text and semicolon", "5;a=\"\xff;\\\"\"\r\nhello\r\n0\r\n\r\n", "hello", 0, true},
		{"trailer fields", "2\r\nhi\r\n0\r\nX-Sum: 1\r\nX-Empty:\r\n\r\n", "hi", 0, true},
		{"bytes after the end", "2\r\nhi\r\n0\r\n\r\nGET / HTTP/1.1\r\n", "hi", 12, true},
		{"incomplete data", "5\r\nhel", "hel", 0, false},
		{"incomplete trailer", "0\r\nX: y\r\n", "", 0, false},
		{"binary data", "4\r\n\r\n\x00\xff\r\n0\r\n\r\n", "\r\n\x00\xff", 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.n == 0 {
				tt.n = len(tt.in)
			}
			var c Chunked
			n, done, err := c.Scan([]byte(tt.in))
			if err != nil {
				t.Fatalf("Scan: %v", err)
			}
			if n != tt.n || done != tt.done {
				t.Errorf("Scan = %d, %v; want %d, %v", n, done, tt.n, tt.done)
			}
			if done != c.Done() {
				t.Errorf("Done() = %v after Scan returned %v", c.Done(), done)
			}
			if done {
				if n2, done2, err2 := c.Scan([]byte("more")); n2 != 0 || !done2 || err2 != nil {
					t.Errorf("Scan after done = %d, %v, %v; want 0, true, nil", n2, done2, err2)
				}
			}
			data, _, _ := decodeChunked([]byte(tt.in))
			if diff := cmp.Diff(tt.data, string(data)); diff != "" {
				t.Errorf("data (-want +got):\n%s", diff)
			}
			want := chunkedResult{N: tt.n, Done: tt.done}
			for k := 0; k <= len(tt.in); k++ {
				c.Reset()
				if got := scanAll(&c, tt.in, []int{k}); got != want {
					t.Fatalf("split at %d: %+v, want %+v", k, got, want)
				}
			}
		})
	}
}

func TestChunkedRejects(t *testing.T) {
	tests := []struct {
		name string
		in   string
		max  int // MaxTrailerBytes
	}{
		{"empty size", "\r\nhello\r\n0\r\n\r\n", 0},
		{"not hex", "x\r\n", 0},
		{"hex prefix", "0x5\r\nhello\r\n0\r\n\r\n", 0},
		{"space after size", "5 \r\nhello\r\n0\r\n\r\n", 0},
		{"space without extension", "5 \r\nhello\r\n0\r\n\r\n", 0},
		{"signed size", "+5\r\nhello\r\n0\r\n\r\n", 0},
		{"bare lf after size", "5\nhello\r\n0\r\n\r\n", 0},
		{"bare cr after size", "5\rhello\r\n0\r\n\r\n", 0},
		{"seventeen digits", "00000000000000005\r\nhello\r\n0\r\n\r\n", 0},
		{"size over 2^63-1", "8000000000000000\r\n", 0},
		{"size 2^64-1", "ffffffffffffffff\r\n", 0},
		{"data too long", "5\r\nhelloX\r\n0\r\n\r\n", 0},
		{"bare lf after data", "5\r\nhello\n0\r\n\r\n", 0},
		{"cr without lf after data", "5\r\nhello\rX0\r\n\r\n", 0},
		{"extension too long", "5;" + strings.Repeat("a", MaxChunkExt) + "\r\nhello\r\n0\r\n\r\n", 0},
		{"control in extension", "5;a\x01\r\nhello\r\n0\r\n\r\n", 0},
		{"semicolon alone", "5;\r\nhello\r\n0\r\n\r\n", 0},
		{"unterminated quoted value", "5;a=\"b\r\nhello\r\n0\r\n\r\n", 0},
		{"empty extension value", "5;a=\r\nhello\r\n0\r\n\r\n", 0},
		{"extension without name", "5;=b\r\nhello\r\n0\r\n\r\n", 0},
		{"space inside extension name", "5;a b\r\nhello\r\n0\r\n\r\n", 0},
		{"space before crlf after name", "5;a \r\nhello\r\n0\r\n\r\n", 0},
		{"space before crlf after value", "5;a=b \r\nhello\r\n0\r\n\r\n", 0},
		{"bytes after quoted value", "5;a=\"b\"c\r\nhello\r\n0\r\n\r\n", 0},
		{"two equals", "5;a=b=c\r\nhello\r\n0\r\n\r\n", 0},
		{"separator in name", "5;a@b\r\nhello\r\n0\r\n\r\n", 0},
		{"separator in token value", "5;a=b/c\r\nhello\r\n0\r\n\r\n", 0},
		{"control in quoted value", "5;a=\"b\x01\"\r\nhello\r\n0\r\n\r\n", 0},
		{"control after backslash", "5;a=\"b\\\x01\"\r\nhello\r\n0\r\n\r\n", 0},
		{"double semicolon", "5;;a\r\nhello\r\n0\r\n\r\n", 0},
		{"bare lf in extension", "5;a\nhello\r\n0\r\n\r\n", 0},
		{"trailer obs-fold", "0\r\nX: a\r\n b\r\n\r\n", 0},
		{"trailer leading space", "0\r\n X: a\r\n\r\n", 0},
		{"trailer space before colon", "0\r\nX : a\r\n\r\n", 0},
		{"trailer without colon", "0\r\nX\r\n\r\n", 0},
		{"trailer empty name", "0\r\n: a\r\n\r\n", 0},
		{"trailer nul", "0\r\nX: a\x00\r\n\r\n", 0},
		{"trailer bare cr", "0\r\nX: a\rb\r\n\r\n", 0},
		{"trailer bare lf", "0\r\nX: a\n\r\n", 0},
		{"final bare lf", "0\r\n\n", 0},
		{"final bare cr", "0\r\n\rX", 0},
		{"trailer too large", "0\r\nX: " + strings.Repeat("v", 100) + "\r\n\r\n", 64},
		{"trailer too large default", "0\r\nX: " + strings.Repeat("v", 40000) + "\r\n\r\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Chunked{MaxTrailerBytes: tt.max}
			_, _, err := c.Scan([]byte(tt.in))
			var pe *ParseError
			if !errors.As(err, &pe) || !errors.Is(err, ErrMalformed) {
				t.Fatalf("Scan = %v, want a malformed *ParseError", err)
			}
			if pe.Offset < 0 || pe.Offset > len(tt.in) {
				t.Errorf("Offset %d outside the %d-byte input", pe.Offset, len(tt.in))
			}
			if _, _, err2 := c.Scan([]byte("0\r\n\r\n")); err2 != err {
				t.Errorf("Scan after an error = %v, want the same error", err2)
			}
			// The same error whatever the split.
			want := kindOf(err)
			for k := 0; k <= len(tt.in); k++ {
				c := Chunked{MaxTrailerBytes: tt.max}
				if got := scanAll(&c, tt.in, []int{k}); got.Err != want {
					t.Fatalf("split at %d: %+v, want error %s", k, got, want)
				}
			}
			if _, _, err := decodeChunkedMax([]byte(tt.in), tt.max); !errors.Is(err, ErrMalformed) {
				t.Errorf("byte at a time: %v, want ErrMalformed", err)
			}
		})
	}
}

func TestChunkedTrailerLimit(t *testing.T) {
	// The trailer section, final CRLF included, may be exactly MaxTrailerBytes.
	trailer := "X: " + strings.Repeat("v", 64-7) + "\r\n\r\n"
	if len(trailer) != 64 {
		t.Fatalf("trailer is %d bytes", len(trailer))
	}
	c := Chunked{MaxTrailerBytes: 64}
	if _, done, err := c.Scan([]byte("0\r\n" + trailer)); err != nil || !done {
		t.Fatalf("Scan = %v, %v; want done", done, err)
	}
	c.Reset()
	if c.MaxTrailerBytes != 64 {
		t.Errorf("Reset dropped MaxTrailerBytes")
	}
	if _, _, err := c.Scan([]byte("0\r\nX" + trailer)); !errors.Is(err, ErrMalformed) {
		t.Fatalf("one byte more: %v, want ErrMalformed", err)
	}
}

func TestChunkedOffset(t *testing.T) {
	// Offsets count from the start of the body across calls.
	var c Chunked
	if _, _, err := c.Scan([]byte("5\r\nhel")); err != nil {
		t.Fatal(err)
	}
	_, _, err := c.Scan([]byte("lo\r\nZ\r\n"))
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Offset != 10 {
		t.Fatalf("Scan = %v, want an error at offset 10", err)
	}
}

func TestDataRemaining(t *testing.T) {
	var c Chunked
	steps := []struct {
		in   string
		want int64
	}{
		{"1", 0}, {"0", 0}, {"\r", 0}, {"\n", 16}, {"abcd", 12}, {"efghijkl", 4}, {"mnop", 0}, {"\r\n", 0},
	}
	for _, s := range steps {
		if _, _, err := c.Scan([]byte(s.in)); err != nil {
			t.Fatalf("Scan(%q): %v", s.in, err)
		}
		if got := c.DataRemaining(); got != s.want {
			t.Fatalf("after %q DataRemaining = %d, want %d", s.in, got, s.want)
		}
	}
}

// decodeAll feeds in to c in pieces cut at the given offsets through Decode
// and returns the data it handed out and the bytes it consumed.
func decodeAll(c *Chunked, in string, cuts []int) (data string, n int, done bool, err error) {
	prev := 0
	for _, k := range append(cuts, len(in)) {
		piece := []byte(in[prev:k])
		for len(piece) > 0 {
			m, d, dn, e := c.Decode(piece)
			if len(d) > 0 && &d[len(d)-1] != &piece[m-1] {
				return data, n, dn, errors.New("data is not the end of the consumed bytes")
			}
			data += string(d)
			n += m
			piece = piece[m:]
			if e != nil || dn {
				return data, n, dn, e
			}
			if m == 0 {
				return data, n, dn, errors.New("decode consumed nothing")
			}
		}
		prev = k
	}
	return data, n, false, nil
}

func TestChunkedDecode(t *testing.T) {
	in := "3;x=y\r\nabc\r\n10\r\n0123456789abcdef\r\n0\r\nT: v\r\n\r\nNEXT"
	for k := 0; k <= len(in); k++ {
		for k2 := k; k2 <= len(in); k2 += 7 {
			var c Chunked
			data, n, done, err := decodeAll(&c, in, []int{k, k2})
			if err != nil || !done || data != "abc0123456789abcdef" || n != len(in)-4 {
				t.Fatalf("cuts %d,%d: %q %d %v %v", k, k2, data, n, done, err)
			}
		}
	}
	var c Chunked
	if _, _, _, err := c.Decode([]byte("5;a=\"b\r\n")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("Decode of a bad extension = %v", err)
	}
}

func TestAppendChunkSize(t *testing.T) {
	for n, want := range map[int]string{0: "0\r\n", 1: "1\r\n", 15: "f\r\n", 16: "10\r\n", 4096: "1000\r\n", 1<<62 + 5: "4000000000000005\r\n"} {
		if got := string(AppendChunkSize(nil, n)); got != want {
			t.Errorf("AppendChunkSize(%d) = %q, want %q", n, got, want)
		}
	}
}
