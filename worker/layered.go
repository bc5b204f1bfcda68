package worker

import "maps"

// layered is a map that a build derives from the previous build's without
// copying it: the entries of base, which no one writes once a layered map
// holds it, under those of over, the changes made since base (a deleted
// key's entry has live false). A derived map shares base and copies over;
// once over outgrows an eighth of base, the derivation merges them into a
// new base, so that a change costs about what it changes and a lookup at
// most two map probes.
//
// A layered map is written only by the build that derives it, before the
// snapshot holding it is served; afterwards it is read-only and safe for
// concurrent readers.
type layered[K comparable, V any] struct {
	base map[K]V
	over map[K]layer[V]
	n    int // live keys
	// own: base is this map's alone (one made from nothing), written in
	// place by the build that made it, before any map is derived from it.
	own bool
}

type layer[V any] struct {
	v    V
	live bool
}

// derive returns a map with m's entries, which the caller may write without
// changing m. m may be nil (empty).
func (m *layered[K, V]) derive() *layered[K, V] {
	if m == nil {
		return &layered[K, V]{base: map[K]V{}, own: true}
	}
	if len(m.over) <= len(m.base)/8+64 {
		return &layered[K, V]{base: m.base, over: maps.Clone(m.over), n: m.n}
	}
	base := make(map[K]V, m.n)
	for k, v := range m.all {
		base[k] = v
	}
	return &layered[K, V]{base: base, n: m.n}
}

// get returns k's value and whether m has k. m may be nil.
func (m *layered[K, V]) get(k K) (V, bool) {
	if m == nil {
		var zero V
		return zero, false
	}
	if e, ok := m.over[k]; ok {
		return e.v, e.live
	}
	v, ok := m.base[k]
	return v, ok
}

// set puts k's value.
func (m *layered[K, V]) set(k K, v V) {
	if _, ok := m.get(k); !ok {
		m.n++
	}
	if m.own {
		m.base[k] = v
		return
	}
	if m.over == nil {
		m.over = map[K]layer[V]{}
	}
	m.over[k] = layer[V]{v: v, live: true}
}

// del deletes k.
func (m *layered[K, V]) del(k K) {
	if _, ok := m.get(k); !ok {
		return
	}
	m.n--
	if m.own {
		delete(m.base, k)
		return
	}
	if _, inBase := m.base[k]; !inBase {
		delete(m.over, k)
		return
	}
	if m.over == nil {
		m.over = map[K]layer[V]{}
	}
	m.over[k] = layer[V]{}
}

// len is the number of keys m has. m may be nil.
func (m *layered[K, V]) len() int {
	if m == nil {
		return 0
	}
	return m.n
}

// all yields m's entries, in no order. m may be nil.
func (m *layered[K, V]) all(yield func(K, V) bool) {
	if m == nil {
		return
	}
	for k, v := range m.base {
		if _, ok := m.over[k]; ok {
			continue
		}
		if !yield(k, v) {
			return
		}
	}
	for k, e := range m.over {
		if e.live && !yield(k, e.v) {
			return
		}
	}
}
