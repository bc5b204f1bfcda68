package httpparse

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
)

func TestParseError(t *testing.T) {
	err := error(&ParseError{Kind: ErrMalformed, Reason: "invalid method", Offset: 3})
	if got, want := err.Error(), "httpparse: malformed message: invalid method at offset 3"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
	if !errors.Is(err, ErrMalformed) || errors.Is(err, ErrURITooLong) || errors.Is(err, ErrNeedMore) {
		t.Errorf("errors.Is matches the wrong kinds")
	}
	if errors.Unwrap(err) != ErrMalformed {
		t.Errorf("Unwrap = %v", errors.Unwrap(err))
	}
	wrapped := fmt.Errorf("conn 7: %w", err)
	var pe *ParseError
	if !errors.As(wrapped, &pe) || pe.Offset != 3 {
		t.Errorf("errors.As through a wrap failed")
	}
}

func TestStatus(t *testing.T) {
	tests := []struct {
		err  error
		want int
	}{
		{&ParseError{Kind: ErrMalformed}, 400},
		{&ParseError{Kind: ErrURITooLong}, 414},
		{&ParseError{Kind: ErrHeadersTooLarge}, 431},
		{&ParseError{Kind: ErrVersion}, 505},
		{&ParseError{Kind: ErrNotImplemented}, 501},
		{fmt.Errorf("x: %w", &ParseError{Kind: ErrVersion}), 505},
		{ErrHeadersTooLarge, 431},
		{io.EOF, 400},
		{nil, 400},
	}
	for _, tt := range tests {
		if got := Status(tt.err); got != tt.want {
			t.Errorf("Status(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

func TestReasonsHoldNoMessageBytes(t *testing.T) {
	// A reason is a fixed text: parsing a head full of a marker never puts
	// the marker in the error.
	const marker = "QQQQ"
	ins := []string{
		"GET /" + marker + "\x01 HTTP/1.1\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: " + marker + " x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\n" + marker + " : x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nContent-Length: " + marker + "\r\n\r\n",
	}
	for _, in := range ins {
		_, err := parseRequestString(t, in, Limits{})
		if err == nil {
			t.Fatalf("Parse(%q) succeeded", in)
		}
		for _, s := range []string{err.Error(), err.(*ParseError).Reason} {
			if strings.Contains(strings.ToUpper(s), marker) {
				t.Errorf("error %q quotes the message", s)
			}
		}
	}
}
