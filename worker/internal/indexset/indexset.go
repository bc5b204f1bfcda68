// Package indexset is an unordered set whose members keep their own
// position in it, so that adding, removing and asking are constant time
// with neither a search nor a map: removing moves the last member into the
// hole. The worker keeps its timed, paused and open connections in such
// sets and walks them on every tick; a connection is in several sets at
// once, with one position field per set.
//
// A Set is not safe for concurrent use: the worker's sets belong to its
// event loop. Adding and removing do not allocate once the set has grown to
// its largest size.
package indexset

// Set holds members of type E. The zero Set is not usable; make one with
// New.
type Set[E comparable] struct {
	items []E
	pos   func(E) *int32
}

// New returns an empty set. pos returns a member's position field, which
// the set writes: the member's index while it is in the set, -1 after it
// left. The field's value before the member first joins does not matter:
// membership is checked against the slot the field points to.
func New[E comparable](pos func(E) *int32) Set[E] {
	return Set[E]{pos: pos}
}

// Has reports whether e is in the set.
func (s *Set[E]) Has(e E) bool {
	i := *s.pos(e)
	return i >= 0 && int(i) < len(s.items) && s.items[i] == e
}

// Add puts e in the set; it does nothing when e is already there.
func (s *Set[E]) Add(e E) {
	if s.Has(e) {
		return
	}
	*s.pos(e) = int32(len(s.items))
	s.items = append(s.items, e)
}

// Remove takes e out of the set, moving the last member into its place,
// and reports whether e was there. A walk by index that removes the member
// it stands on must look at the same index again.
func (s *Set[E]) Remove(e E) bool {
	p := s.pos(e)
	i := *p
	if i < 0 || int(i) >= len(s.items) || s.items[i] != e {
		return false
	}
	last := len(s.items) - 1
	moved := s.items[last]
	s.items[i] = moved
	*s.pos(moved) = i
	var zero E
	s.items[last] = zero // no reference kept past the member's stay
	s.items = s.items[:last]
	*p = -1
	return true
}

// Len is the number of members.
func (s *Set[E]) Len() int { return len(s.items) }

// At returns the member at index i, 0 ≤ i < Len().
func (s *Set[E]) At(i int) E { return s.items[i] }

// Items returns the members in no particular order. The slice is the set's
// own: it is valid until the next Add or Remove and must not be modified.
func (s *Set[E]) Items() []E { return s.items }
