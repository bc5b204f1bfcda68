package supervisor

import (
	"slices"
	"unsafe"

	"coregate/admin/spec"
	"coregate/internal/ptrlist"
)

// checkedScan lists a configuration's checked upstreams, as
// spec.Spec.CheckedUpstreams does, from the last configuration's list, at
// the cost of what changed between them: healthChecks.update runs on
// every push, and a walk of every upstream, route and service looking
// for checks (a pointer chase to each upstream's rarely set fields) took
// some 0.5 ms of the supervisor's CPU a push at 50 000 routes and 20 000
// upstreams, 7.5 % of its CPU during a bulk load of routes.
//
// The configuration store shares between one Spec and the next the
// objects it did not change, a resource's whole list when none of its
// objects changed, and its array when objects were only added to it
// (storesync's build; a Spec's lists are never modified below their
// length: spec.Spec). So, per resource: a list that is the last one costs
// nothing; another is compared with the last one as memory, from both
// ends (ptrlist.SamePrefix, SameSuffix), and only the objects between the
// same prefix and the same suffix are looked at. One route replaced among
// 50 000 costs the comparison of 400 kB of pointers, not a look at 70 000
// objects; routes added after them in the last list's array, a look at
// those routes (SamePrefix knows the lists the same without a
// comparison). The list is the one the full walk gives, whatever the
// change (TestCheckedScan).
//
// Not safe for concurrent use: healthChecks.update holds mu.
type checkedScan struct {
	upstreams checkedKind[spec.Upstream]
	routes    checkedKind[spec.Route]
	services  checkedKind[spec.Service]
	// all is the last scan's list: the upstreams', then the routes', then
	// the services'. Rebuilt in place when it changes; valid until the
	// next scan.
	all []spec.CheckedUpstream
}

// scan returns sp's checked upstreams in spec.Spec.CheckedUpstreams's
// order, and whether they differ from the last scan's (an upstream, or
// its name, other than the one at its place). The list is valid until the
// next scan; the first scan compares with an empty list.
func (c *checkedScan) scan(sp *spec.Spec) ([]spec.CheckedUpstream, bool) {
	changed := c.upstreams.scan(sp.Upstreams, "upstreams", upstreamIDOf, upstreamOf)
	changed = c.routes.scan(sp.Routes, "routes", routeIDOf, routeUpstream) || changed
	changed = c.services.scan(sp.Services, "services", serviceIDOf, serviceUpstream) || changed
	if !changed {
		return c.all, false
	}
	n := len(c.all)
	c.all = c.all[:0]
	for _, k := range [...][]checkedAt{c.upstreams.found, c.routes.found, c.services.found} {
		for _, f := range k {
			c.all = append(c.all, f.cu)
		}
	}
	if n > len(c.all) {
		clear(c.all[len(c.all):n]) // no upstream dropped kept alive
	}
	return c.all, true
}

// reset forgets the last scan: the next one compares with an empty list.
func (c *checkedScan) reset() { *c = checkedScan{} }

func upstreamIDOf(u *spec.Upstream) spec.ID          { return u.ID }
func upstreamOf(u *spec.Upstream) *spec.Upstream     { return u }
func routeIDOf(r *spec.Route) spec.ID                { return r.ID }
func routeUpstream(r *spec.Route) *spec.Upstream     { return r.Upstream }
func serviceIDOf(s *spec.Service) spec.ID            { return s.ID }
func serviceUpstream(s *spec.Service) *spec.Upstream { return s.Upstream }

// checkedKind is one resource's part of a checkedScan: the list it was
// last given and the checked upstreams found in it, by position.
type checkedKind[T any] struct {
	last  []*T
	found []checkedAt // by position, ascending
	mid   []checkedAt // scratch: those found in the part that changed
}

// checkedAt is a checked upstream and the position in its resource's
// list of the object that holds it.
type checkedAt struct {
	i  int
	cu spec.CheckedUpstream
}

// scan makes list the last one, its checked upstreams found from the
// last list's where the two share objects in order at either end, and
// reports whether they differ from the last list's (but for their
// positions).
func (k *checkedKind[T]) scan(list []*T, kind string, id func(*T) spec.ID, up func(*T) *spec.Upstream) bool {
	if len(list) == len(k.last) && (len(list) == 0 || unsafe.SliceData(list) == unsafe.SliceData(k.last)) {
		k.last = list
		return false
	}
	p := ptrlist.SamePrefix(k.last, list)
	s := ptrlist.SameSuffix(k.last[p:], list[p:])
	oldEnd, newEnd := len(k.last)-s, len(list)-s
	// found[a:b] were found in last[p:oldEnd], which list[p:newEnd]
	// replaces.
	a, _ := slices.BinarySearchFunc(k.found, p, func(f checkedAt, i int) int { return f.i - i })
	b, _ := slices.BinarySearchFunc(k.found[a:], oldEnd, func(f checkedAt, i int) int { return f.i - i })
	b += a
	k.mid = k.mid[:0]
	for i, o := range list[p:newEnd] {
		if u := up(o); u.HasChecks() {
			k.mid = append(k.mid, checkedAt{i: p + i, cu: spec.CheckedUpstream{Name: spec.CheckedName(kind, id(o)), Upstream: u}})
		}
	}
	changed := !slices.EqualFunc(k.found[a:b], k.mid, func(x, y checkedAt) bool { return x.cu == y.cu })
	k.found = slices.Replace(k.found, a, b, k.mid...)
	clear(k.mid) // the upstreams are k.found's to keep alive
	if shift := newEnd - oldEnd; shift != 0 {
		for j := a + len(k.mid); j < len(k.found); j++ {
			k.found[j].i += shift
		}
	}
	k.last = list
	return changed
}
