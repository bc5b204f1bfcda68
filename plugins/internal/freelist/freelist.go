// Package freelist has List, a stack of idle values that one goroutine,
// a worker's event loop, takes from and gives back to, so that a value in
// steady use is allocated once and not per request.
package freelist

// List is a stack of idle values. It is not safe for concurrent use: one
// goroutine owns it. The zero value is empty and ready.
type List[T any] struct {
	free []*T
}

// Get takes an idle value off the stack, or returns nil when there is
// none and the caller must make one.
func (l *List[T]) Get() *T {
	n := len(l.free)
	if n == 0 {
		return nil
	}
	x := l.free[n-1]
	l.free[n-1] = nil
	l.free = l.free[:n-1]
	return x
}

// Put gives x back, reset by the caller: it is idle from now on and may
// be handed out by the next Get.
func (l *List[T]) Put(x *T) { l.free = append(l.free, x) }

// Len is the number of idle values.
func (l *List[T]) Len() int { return len(l.free) }
