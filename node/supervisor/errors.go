package supervisor

import "errors"

// Sentinel errors.
var (
	// ErrBadCPUList is wrapped by ParseCPUList's errors.
	ErrBadCPUList = errors.New("supervisor: bad cpu list")
)
