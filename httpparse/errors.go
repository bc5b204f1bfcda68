package httpparse

import (
	"errors"
	"strconv"
)

var (
	// ErrNeedMore reports a partial message head or chunk: call again with the
	// same bytes followed by more.
	ErrNeedMore = errors.New("httpparse: need more data")
	// ErrMalformed reports a message that breaks RFC 9112 or RFC 9110 (400).
	ErrMalformed = errors.New("httpparse: malformed message")
	// ErrURITooLong reports a request line over Limits.MaxRequestLine (414).
	ErrURITooLong = errors.New("httpparse: request line too long")
	// ErrHeadersTooLarge reports a head over Limits.MaxHeaderBytes or with more
	// than Limits.MaxHeaders fields (431).
	ErrHeadersTooLarge = errors.New("httpparse: header section too large")
	// ErrVersion reports a well-formed HTTP version whose major version is not 1 (505).
	ErrVersion = errors.New("httpparse: unsupported http version")
	// ErrNotImplemented reports a well-formed request with a transfer coding
	// other than chunked (501, RFC 9112 §6.1).
	ErrNotImplemented = errors.New("httpparse: transfer coding not implemented")
)

// ParseError is the error of a message that cannot be parsed. Kind is one of
// ErrMalformed, ErrURITooLong, ErrHeadersTooLarge, ErrVersion and
// ErrNotImplemented; errors.Is
// matches the error against its Kind. Reason is a short lowercase text that
// never quotes message bytes, and Offset is the position in the input where
// the fault was found.
type ParseError struct {
	Kind   error
	Reason string
	Offset int
}

// Error returns the kind, the reason and the offset.
func (e *ParseError) Error() string {
	return e.Kind.Error() + ": " + e.Reason + " at offset " + strconv.Itoa(e.Offset)
}

// Is reports whether target is the error's Kind.
func (e *ParseError) Is(target error) bool { return target == e.Kind }

// Unwrap returns the error's Kind.
func (e *ParseError) Unwrap() error { return e.Kind }

// Status returns the HTTP status code to answer a request that failed to
// parse with err: 414 for ErrURITooLong, 431 for ErrHeadersTooLarge, 505 for
// ErrVersion, 501 for ErrNotImplemented and 400 for anything else.
func Status(err error) int {
	switch {
	case errors.Is(err, ErrNotImplemented):
		return 501
	case errors.Is(err, ErrURITooLong):
		return 414
	case errors.Is(err, ErrHeadersTooLarge):
		return 431
	case errors.Is(err, ErrVersion):
		return 505
	}
	return 400
}

func malformed(reason string, off int) error {
	return &ParseError{Kind: ErrMalformed, Reason: reason, Offset: off}
}

func tooLarge(reason string, off int) error {
	return &ParseError{Kind: ErrHeadersTooLarge, Reason: reason, Offset: off}
}
