package worker

import (
	"maps"
	"math"
)

// layered is a map that a build derives from the previous build's without
// copying it: the entries of base, which no one writes once a layered map
// holds it, under those of mid, under those of top: the changes made since
// base, in two layers (a deleted key's entry has live false). A derived map
// shares base and mid and copies top; once top outgrows topMax, the
// derivation merges it into a new mid, and once mid outgrows an eighth of
// base, both into a new base, so that a change costs about what it changes
// and a lookup at most three map probes.
//
// Two layers, where one (base's eighth) was copied by every derivation: a
// bulk load that adds a route at a time to 50 000 adds an entry to the
// maps of shared plugin instances (the routes' response-rewrite, each of
// its own configuration) with each build, and copying the changes since
// base, some 3 000 entries on average at each of them, was two thirds of
// a worker's garbage a push (maps.clone: 117 of 177 kB at 1 000 routes
// into the load, BenchmarkDeltaApply/added-to-50000). top's bound, the
// square root of mid's, balances the two copies: top at each derivation,
// mid once every topMax entries.
//
// A layered map is written only by the build that derives it, before the
// snapshot holding it is served; afterwards it is read-only and safe for
// concurrent readers.
type layered[K comparable, V any] struct {
	base     map[K]V
	mid, top map[K]layer[V]
	n        int // live keys
	// own: base is this map's alone (one made from nothing), written in
	// place by the build that made it, before any map is derived from it.
	own bool
}

type layer[V any] struct {
	v    V
	live bool
}

// midMax is the most entries mid holds over a base of n entries.
func midMax(n int) int { return n/8 + 64 }

// topMax is the most entries top holds over a base of n entries.
func topMax(n int) int { return int(math.Sqrt(float64(midMax(n)))) }

// derive returns a map with m's entries, which the caller may write without
// changing m. m may be nil (empty).
func (m *layered[K, V]) derive() *layered[K, V] {
	if m == nil {
		return &layered[K, V]{base: map[K]V{}, own: true}
	}
	switch {
	case len(m.top) <= topMax(len(m.base)):
		return &layered[K, V]{base: m.base, mid: m.mid, top: maps.Clone(m.top), n: m.n}
	case len(m.mid)+len(m.top) <= midMax(len(m.base)):
		mid := make(map[K]layer[V], len(m.mid)+len(m.top))
		maps.Copy(mid, m.mid)
		for k, e := range m.top {
			if _, inBase := m.base[k]; !e.live && !inBase {
				delete(mid, k)
				continue
			}
			mid[k] = e
		}
		return &layered[K, V]{base: m.base, mid: mid, n: m.n}
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
	if e, ok := m.top[k]; ok {
		return e.v, e.live
	}
	return m.under(k)
}

// under is get of m's base and mid, without top.
func (m *layered[K, V]) under(k K) (V, bool) {
	if e, ok := m.mid[k]; ok {
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
	if m.top == nil {
		m.top = map[K]layer[V]{}
	}
	m.top[k] = layer[V]{v: v, live: true}
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
	if _, below := m.under(k); !below {
		delete(m.top, k)
		return
	}
	if m.top == nil {
		m.top = map[K]layer[V]{}
	}
	m.top[k] = layer[V]{}
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
		if _, ok := m.top[k]; ok {
			continue
		}
		if _, ok := m.mid[k]; ok {
			continue
		}
		if !yield(k, v) {
			return
		}
	}
	for k, e := range m.mid {
		if _, ok := m.top[k]; ok {
			continue
		}
		if e.live && !yield(k, e.v) {
			return
		}
	}
	for k, e := range m.top {
		if e.live && !yield(k, e.v) {
			return
		}
	}
}
