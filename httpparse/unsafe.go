package httpparse

import "unsafe"

// offsetIn returns where s starts in b, and false when s is empty or does
// not lie within b's bytes: whether two slices share memory, which safe Go
// can only tell from capacities that a three-index slice may have cut.
func offsetIn(s, b []byte) (int, bool) {
	if len(s) == 0 || len(s) > len(b) {
		return 0, false
	}
	d := uintptr(unsafe.Pointer(unsafe.SliceData(s))) - uintptr(unsafe.Pointer(unsafe.SliceData(b)))
	if d > uintptr(len(b)-len(s)) {
		return 0, false
	}
	return int(d), true
}
