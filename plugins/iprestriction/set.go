package iprestriction

import (
	"cmp"
	"encoding/binary"
	"net/netip"
	"slices"
)

// Set is a set of IP addresses, the union of a list of prefixes, kept as
// sorted, disjoint, non-adjacent ranges of integers, one slice per family:
// Contains is a binary search, O(log n) in the number of ranges, without
// allocating. A Set is built once (NewSet) and only read afterwards: safe
// for concurrent use.
type Set struct {
	v4 []range4
	v6 []range6
}

type range4 struct{ lo, hi uint32 }

// u128 is an IPv6 address as an integer.
type u128 struct{ hi, lo uint64 }

func (a u128) less(b u128) bool { return a.hi < b.hi || a.hi == b.hi && a.lo < b.lo }

// next is a+1, and whether it did not wrap.
func (a u128) next() (u128, bool) {
	if a.lo != ^uint64(0) {
		return u128{a.hi, a.lo + 1}, true
	}
	if a.hi != ^uint64(0) {
		return u128{a.hi + 1, 0}, true
	}
	return u128{}, false
}

type range6 struct{ lo, hi u128 }

// NewSet makes the set of the prefixes ps (masked or not: the host bits
// are ignored). An IPv4 prefix covers IPv4 addresses only, an IPv6 prefix
// IPv6 addresses only (spec.ParseIPOrCIDR turns a v4-mapped prefix of 96
// bits or more into its IPv4 prefix already).
func NewSet(ps []netip.Prefix) *Set {
	s := &Set{}
	for _, p := range ps {
		p = p.Masked()
		if !p.IsValid() {
			continue
		}
		if p.Addr().Is4() {
			b := p.Addr().As4()
			lo := binary.BigEndian.Uint32(b[:])
			hi := lo | uint32(uint64(1)<<(32-p.Bits())-1)
			s.v4 = append(s.v4, range4{lo, hi})
			continue
		}
		lo := to128(p.Addr())
		hi := lo
		host := 128 - p.Bits()
		switch {
		case host >= 64:
			hi.lo = ^uint64(0)
			hi.hi |= uint64(1)<<(host-64) - 1
			if host == 128 {
				hi.hi = ^uint64(0)
			}
		default:
			hi.lo |= uint64(1)<<host - 1
		}
		s.v6 = append(s.v6, range6{lo, hi})
	}
	s.v4 = merge4(s.v4)
	s.v6 = merge6(s.v6)
	return s
}

func to128(a netip.Addr) u128 {
	b := a.As16()
	return u128{binary.BigEndian.Uint64(b[:8]), binary.BigEndian.Uint64(b[8:])}
}

// merge4 sorts rs and joins the ranges that overlap or touch.
func merge4(rs []range4) []range4 {
	slices.SortFunc(rs, func(a, b range4) int { return cmp.Compare(a.lo, b.lo) })
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 && (out[n-1].hi == ^uint32(0) || r.lo <= out[n-1].hi+1) {
			out[n-1].hi = max(out[n-1].hi, r.hi)
			continue
		}
		out = append(out, r)
	}
	return slices.Clip(out)
}

// merge6 is merge4 for IPv6 ranges.
func merge6(rs []range6) []range6 {
	slices.SortFunc(rs, func(a, b range6) int {
		switch {
		case a.lo.less(b.lo):
			return -1
		case b.lo.less(a.lo):
			return 1
		}
		return 0
	})
	out := rs[:0]
	for _, r := range rs {
		if n := len(out); n > 0 {
			last := &out[n-1]
			next, ok := last.hi.next()
			if !ok || !next.less(r.lo) {
				if last.hi.less(r.hi) {
					last.hi = r.hi
				}
				continue
			}
		}
		out = append(out, r)
	}
	return slices.Clip(out)
}

// Len is the number of disjoint ranges the set holds.
func (s *Set) Len() int { return len(s.v4) + len(s.v6) }

// Contains reports whether a is in the set. A v4-mapped IPv6 address is
// looked up as its IPv4 address; the invalid address is in no set.
func (s *Set) Contains(a netip.Addr) bool {
	if a.Is4In6() {
		a = a.Unmap()
	}
	switch {
	case a.Is4():
		b := a.As4()
		x := binary.BigEndian.Uint32(b[:])
		// The last range whose lo is <= x, if any, is the only one that
		// may hold x.
		lo, hi := 0, len(s.v4)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if s.v4[m].lo <= x {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo > 0 && x <= s.v4[lo-1].hi
	case a.Is6():
		x := to128(a)
		lo, hi := 0, len(s.v6)
		for lo < hi {
			m := int(uint(lo+hi) >> 1)
			if !x.less(s.v6[m].lo) {
				lo = m + 1
			} else {
				hi = m
			}
		}
		return lo > 0 && !s.v6[lo-1].hi.less(x)
	}
	return false
}
