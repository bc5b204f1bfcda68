package shm

import "errors"

// Sentinel errors.
var (
	ErrLayout = errors.New("shm: not a counter segment of this layout")
	ErrSize   = errors.New("shm: slot count out of range")
)
