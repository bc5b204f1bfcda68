package bpf

import "errors"

// Errors returned by this package. Probes and constructors wrap ErrNotSupported
// (test with errors.Is) when the kernel or the process lacks a feature; any other
// error from a probe is inconclusive.
var (
	// ErrNotSupported reports a kernel feature or privilege that is missing.
	ErrNotSupported = errors.New("bpf: not supported")
	// ErrBadMode reports an unknown selection mode.
	ErrBadMode = errors.New("bpf: unknown mode")
	// ErrBadSlot reports a slot or slot count outside the selector's range.
	ErrBadSlot = errors.New("bpf: slot out of range")
	// ErrBadCPU reports a CPU beyond those a Selector was created for.
	ErrBadCPU = errors.New("bpf: bad cpu")
	// ErrBadFiles reports inherited files that are not the selector's objects.
	ErrBadFiles = errors.New("bpf: bad inherited files")
	// ErrClosed reports use of a closed Selector or Member.
	ErrClosed = errors.New("bpf: closed")
)
