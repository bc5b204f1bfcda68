package control

import (
	"hash/maphash"
	"slices"
	"strings"
	"sync/atomic"
	"unsafe"

	"coregate/admin/spec"
)

// memberChange is what a Delta's member said of one resource: the runs of
// the base's objects it keeps ([i, j): the base's objects i to j-1) and
// the positions, in the new list, of the objects it carries.
type memberChange struct {
	runs  [][2]int
	added []int
}

// checkKind is one resource as spec.Spec.Check sees it: how to read an
// object's id, what the object refers to, and what else Check asks of it.
type checkKind struct {
	name string
	n    func(*spec.Spec) int
	id   func(s *spec.Spec, i int) spec.ID
	// refs calls f with each reference of s's object i: the kind referred
	// to (an index in checkKinds) and the id named (zero: none).
	refs func(s *spec.Spec, i int, f func(to int, id spec.ID))
	// valid is Check's test of an object beyond its id being present and
	// unique; nil: none.
	valid func(s *spec.Spec, i int) bool
	// list is the address of s's list of the kind, for baseIDs; nil for
	// a kind deltaChecked reads the ids of by scanning them (routes,
	// whose list changes with every change).
	list func(s *spec.Spec) unsafe.Pointer
}

// idSet is the ids of a list of objects of one kind: the list (its
// address and length, which a Spec's list keeps for its life, the lists
// being read-only) and its ids, as a table of the objects' places in the
// list by a hash of their ids (open addressing, linear probing, at most
// four fifths full; a slot holds a place plus one, 0 when empty), each
// hit confirmed by reading the object's id. It is 4 bytes a slot, 128 kB
// for 20 000 upstreams, where a map[string]bool of their ids held about
// 870 kB for as long as the list was served (its strings being the
// objects' own, either way), and it is made as fast. Immutable once made.
type idSet struct {
	list  unsafe.Pointer
	n     int
	kind  *checkKind
	slots []int32
}

// idSeed seeds idSet's hashes.
var idSeed = maphash.MakeSeed()

// newIDSet makes the set of the ids of base's objects of kind k, n of
// them in list.
func newIDSet(k *checkKind, base *spec.Spec, list unsafe.Pointer, n int) *idSet {
	size := 8
	for size*4 < n*5 { // an empty slot, at least, ends each probe
		size *= 2
	}
	set := &idSet{list: list, n: n, kind: k, slots: make([]int32, size)}
	mask := uint64(size - 1)
	for i := range n {
		j := maphash.String(idSeed, k.id(base, i).String()) & mask
		for set.slots[j] != 0 {
			j = (j + 1) & mask
		}
		set.slots[j] = int32(i + 1)
	}
	return set
}

// has says whether id is the id of one of base's objects of the set's
// kind; base's list of them is the set's.
func (set *idSet) has(base *spec.Spec, id string) bool {
	mask := uint64(len(set.slots) - 1)
	for j := maphash.String(idSeed, id) & mask; set.slots[j] != 0; j = (j + 1) & mask {
		if set.kind.id(base, int(set.slots[j]-1)).String() == id {
			return true
		}
	}
	return false
}

// kindIDs holds, by kind (an index in checkKinds), the ids of the last
// list of that kind a Delta kept whole: the next Delta against a Spec
// with that list looks its references up there, where deltaChecked read
// every kept object's id (20 000 upstreams: 2 ms a change). Safe for
// concurrent use.
var kindIDs [len(checkKinds)]atomic.Pointer[idSet]

// baseIDs is the ids of base's objects of kind ki, when kept from a
// Delta before; else nil, and made now when keep (the Delta keeps the
// list whole: the next one is likely against it).
func baseIDs(ki int, base *spec.Spec, keep bool) *idSet {
	k := &checkKinds[ki]
	if k.list == nil {
		return nil
	}
	list, n := k.list(base), k.n(base)
	if set := kindIDs[ki].Load(); set != nil && set.list == list && set.n == n {
		return set
	}
	if !keep || n == 0 {
		return nil
	}
	set := newIDSet(k, base, list, n)
	kindIDs[ki].Store(set)
	return set
}

// routeIDSet is the ids of a list of routes, as hashes: the list (its
// address and length, which name its objects for as long as the set
// holds it: a list is read-only, and a list made longer in place keeps
// its objects before its old length, decodeRuns) and a hash of each of
// its ids, no two the same. Owned by one caller at a time (routeIDs).
type routeIDSet struct {
	list unsafe.Pointer
	n    int
	ids  hashSet
}

// routeIDs is the ids of the routes of the last Spec a Delta made
// (deltaChecked), which the next Delta is made against: a route added
// with an id of its own (a bulk load's, every one) is looked up there,
// and the set carried over to the new Spec's list by the routes removed
// and added, where deltaChecked read the id of every route kept and
// looked it up in a map of the ones added: 1.9 ms of a worker's 2.5 ms
// of CPU for a route added at 50 000 (a gateway's "config reloaded"
// build_cpu, perf record of the worker). A route list changes with every
// change to a route, so that it has no set kept whole as the other kinds
// have (kindIDs). The set is taken (Swap) by the Delta that uses it and
// stored back for the Spec it made: a Delta decoded meanwhile (tests, in
// parallel) finds none and reads the ids. 8-16 bytes a route (hashSet:
// 512 kB at 50 000, where a map[uint64]struct{} held 1.2 MB).
var routeIDs atomic.Pointer[routeIDSet]

// routeSeed seeds routeIDSet's hashes.
var routeSeed = maphash.MakeSeed()

func routeHash(id string) uint64 { return maphash.String(routeSeed, id) }

// newRouteIDSet makes the set of routes' ids; nil when two of them hash
// alike (then there is no set: the ids are read, as without one).
func newRouteIDSet(routes []*spec.Route) *routeIDSet {
	set := &routeIDSet{list: unsafe.Pointer(unsafe.SliceData(routes)), n: len(routes)}
	set.ids.init(len(routes))
	for _, r := range routes {
		if !set.ids.add(routeHash(r.ID.String())) {
			return nil
		}
	}
	return set
}

// of says whether set is the ids of routes.
func (set *routeIDSet) of(routes []*spec.Route) bool {
	return set != nil && set.list == unsafe.Pointer(unsafe.SliceData(routes)) && set.n == len(routes)
}

// has says whether an id of the list may be id: false is certain, true
// may be another id of the same hash.
func (set *routeIDSet) has(id string) bool {
	return set.ids.has(routeHash(id))
}

// carry makes set, the ids of a Spec's routes, those of routes, the list
// of the Spec a Delta made from it, which removed the routes of the ids
// removed and added those of added (a route replaced is in both); nil
// when an id added hashes as one of the list.
func (set *routeIDSet) carry(routes []*spec.Route, removed, added map[string]bool) *routeIDSet {
	for id := range removed {
		set.ids.remove(routeHash(id))
	}
	for id := range added {
		if !set.ids.add(routeHash(id)) {
			return nil
		}
	}
	set.list, set.n = unsafe.Pointer(unsafe.SliceData(routes)), len(routes)
	return set
}

// hashSet is a set of 64-bit hashes in one array, open addressing with
// linear probing, at most three quarters full: 8 bytes a slot, where a
// Go map of the same keys took about 24 a key (its groups' control
// words, and tables split as they fill). 0 marks a free slot; a hash of
// 0 is kept as 1, which a hash set may do (two ids of the same hash are
// one to it already). Removal shifts the slots after back, so that no
// slot is a tombstone.
type hashSet struct {
	slots []uint64 // a power of two long, or none
	n     int
}

// init makes s empty with room for n hashes.
func (s *hashSet) init(n int) {
	size := 8
	for size*3/4 < n {
		size *= 2
	}
	s.slots, s.n = make([]uint64, size), 0
}

// find returns the slot of h, or of the free slot where h would go.
func (s *hashSet) find(h uint64) int {
	mask := len(s.slots) - 1
	i := int(h) & mask
	for s.slots[i] != 0 && s.slots[i] != h {
		i = (i + 1) & mask
	}
	return i
}

func keyOf(h uint64) uint64 { return max(h, 1) }

// has says whether h is in s.
func (s *hashSet) has(h uint64) bool {
	if s.n == 0 {
		return false
	}
	h = keyOf(h)
	return s.slots[s.find(h)] == h
}

// add puts h in s; false when it was there.
func (s *hashSet) add(h uint64) bool {
	h = keyOf(h)
	if (s.n+1)*4 > len(s.slots)*3 {
		old := s.slots
		s.init((s.n + 1) * 2)
		for _, k := range old {
			if k != 0 {
				s.slots[s.find(k)] = k
				s.n++
			}
		}
	}
	i := s.find(h)
	if s.slots[i] == h {
		return false
	}
	s.slots[i] = h
	s.n++
	return true
}

// remove takes h out of s, if there, and moves back the hashes after it
// that would no longer be found past the slot it frees.
func (s *hashSet) remove(h uint64) {
	if s.n == 0 {
		return
	}
	h = keyOf(h)
	i := s.find(h)
	if s.slots[i] != h {
		return
	}
	mask := len(s.slots) - 1
	for j := (i + 1) & mask; s.slots[j] != 0; j = (j + 1) & mask {
		home := int(s.slots[j]) & mask
		// The hash at j may move to i if i lies on its probe path:
		// from home, cyclically, to j.
		if (j-home)&mask >= (j-i)&mask {
			s.slots[i] = s.slots[j]
			i = j
		}
	}
	s.slots[i] = 0
	s.n--
}

// The indexes in checkKinds of the resources referred to.
const (
	ckUpstreams      = 2
	ckServices       = 1
	ckPluginConfigs  = 4
	ckConsumerGroups = 6
)

var checkKinds = [...]checkKind{
	{name: "routes",
		n:  func(s *spec.Spec) int { return len(s.Routes) },
		id: func(s *spec.Spec, i int) spec.ID { return s.Routes[i].ID },
		refs: func(s *spec.Spec, i int, f func(int, spec.ID)) {
			r := s.Routes[i]
			f(ckUpstreams, r.UpstreamID)
			f(ckServices, r.ServiceID)
			f(ckPluginConfigs, r.Rare().PluginConfigID)
		}},
	{name: "services",
		n:    func(s *spec.Spec) int { return len(s.Services) },
		id:   func(s *spec.Spec, i int) spec.ID { return s.Services[i].ID },
		refs: func(s *spec.Spec, i int, f func(int, spec.ID)) { f(ckUpstreams, s.Services[i].UpstreamID) },
		list: func(s *spec.Spec) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s.Services)) }},
	{name: "upstreams",
		n:    func(s *spec.Spec) int { return len(s.Upstreams) },
		id:   func(s *spec.Spec, i int) spec.ID { return s.Upstreams[i].ID },
		list: func(s *spec.Spec) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s.Upstreams)) }},
	{name: "consumers",
		n:    func(s *spec.Spec) int { return len(s.Consumers) },
		id:   func(s *spec.Spec, i int) spec.ID { return spec.StringID(s.Consumers[i].Username) },
		refs: func(s *spec.Spec, i int, f func(int, spec.ID)) { f(ckConsumerGroups, s.Consumers[i].GroupID) }},
	{name: "plugin_configs",
		n:    func(s *spec.Spec) int { return len(s.PluginConfigs) },
		id:   func(s *spec.Spec, i int) spec.ID { return s.PluginConfigs[i].ID },
		list: func(s *spec.Spec) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s.PluginConfigs)) }},
	{name: "global_rules",
		n:  func(s *spec.Spec) int { return len(s.GlobalRules) },
		id: func(s *spec.Spec, i int) spec.ID { return s.GlobalRules[i].ID }},
	{name: "consumer_groups",
		n:    func(s *spec.Spec) int { return len(s.ConsumerGroups) },
		id:   func(s *spec.Spec, i int) spec.ID { return s.ConsumerGroups[i].ID },
		list: func(s *spec.Spec) unsafe.Pointer { return unsafe.Pointer(unsafe.SliceData(s.ConsumerGroups)) }},
	{name: "credentials",
		n:  func(s *spec.Spec) int { return len(s.Credentials) },
		id: func(s *spec.Spec, i int) spec.ID { return spec.RawID(s.Credentials[i], "id") },
		valid: func(s *spec.Spec, i int) bool {
			_, _, ok := spec.CredentialOwner(spec.RawID(s.Credentials[i], "id").String())
			return ok
		}},
	{name: "plugin_metadata",
		n:  func(s *spec.Spec) int { return len(s.PluginMetadata) },
		id: func(s *spec.Spec, i int) spec.ID { return spec.RawID(s.PluginMetadata[i], "id") }},
	{name: "ssls",
		n:  func(s *spec.Spec) int { return len(s.SSLs) },
		id: func(s *spec.Spec, i int) spec.ID { return s.SSLs[i].ID }},
	{name: "secrets",
		n:  func(s *spec.Spec) int { return len(s.Secrets) },
		id: func(s *spec.Spec, i int) spec.ID { return spec.RawID(s.Secrets[i], "id") },
		valid: func(s *spec.Spec, i int) bool {
			m, rest, ok := strings.Cut(spec.RawID(s.Secrets[i], "id").String(), "/")
			return ok && m != "" && rest != "" && !strings.Contains(rest, "/")
		}},
}

// deltaChecked reports whether s, decoded from a Delta against base,
// passes spec.Spec.Check, knowing that base does, from what the Delta
// changed (changes, by member name; a member left out removed all of its
// resource's objects) rather than by a Check of the whole Spec: every
// object carried has an id, unique among the objects carried and the
// base's kept, and the checks of its kind; each reference it makes names
// an object carried or kept; no object referred to was removed; the runs
// kept do not overlap. It looks at the objects carried and those removed,
// and reads the ids of the kept ones of a kind only when an object carried
// has an id the base's removed ones do not (an object added, not replaced)
// or names one of that kind: pointer-chasing at most, no map of the whole
// Spec, where Check builds one per kind (10 ms at 50 000 routes), but the
// ids kept from a Delta before (kindIDs; routeIDs, carried from Delta to
// Delta). false says nothing: Check s, which names the problem, if any.
func deltaChecked(base, s *spec.Spec, changes map[string]*memberChange) bool {
	rids := routeIDs.Swap(nil)
	if !rids.of(base.Routes) {
		rids = nil
	}
	ok, keep := checkDelta(base, s, changes, rids)
	if keep != nil {
		routeIDs.CompareAndSwap(nil, keep)
	}
	return ok
}

// ckRoutes is the index of the routes in checkKinds.
const ckRoutes = 0

// checkDelta is deltaChecked with rids, the ids of base's routes (nil
// when none was kept for them). It returns the route ids to keep: s's
// when it passes (made from rids, or from base's routes when a route
// added needed them), else rids as they were (base's: s's too when s
// keeps base's list of routes).
func checkDelta(base, s *spec.Spec, changes map[string]*memberChange, rids *routeIDSet) (bool, *routeIDSet) {
	var removed, added, clash, need [len(checkKinds)]map[string]bool
	var none memberChange
	for ki := range checkKinds {
		k := &checkKinds[ki]
		c := changes[k.name]
		if c == nil {
			c = &none
		}
		runs := c.runs
		if !slices.IsSortedFunc(runs, func(a, b [2]int) int { return a[0] - b[0] }) {
			runs = slices.SortedFunc(slices.Values(runs), func(a, b [2]int) int { return a[0] - b[0] })
		}
		from := 0
		gone := func(to int) {
			for i := from; i < to; i++ {
				if removed[ki] == nil {
					removed[ki] = map[string]bool{}
				}
				removed[ki][k.id(base, i).String()] = true
			}
		}
		for _, r := range runs {
			if r[0] < from {
				return false, rids // a base object kept twice
			}
			gone(r[0])
			from = r[1]
		}
		gone(k.n(base))
		for _, i := range c.added {
			id := k.id(s, i)
			if id.IsZero() || added[ki][id.String()] || (k.valid != nil && !k.valid(s, i)) {
				return false, rids
			}
			if added[ki] == nil {
				added[ki] = map[string]bool{}
			}
			added[ki][id.String()] = true
			if !removed[ki][id.String()] {
				if clash[ki] == nil {
					clash[ki] = map[string]bool{}
				}
				clash[ki][id.String()] = true
			}
		}
	}
	for _, ki := range []int{ckUpstreams, ckServices, ckPluginConfigs, ckConsumerGroups} {
		for id := range removed[ki] {
			if !added[ki][id] {
				return false, rids // a kept object may name it
			}
		}
	}
	ok := true
	for ki := range checkKinds {
		k := &checkKinds[ki]
		if k.refs == nil {
			continue
		}
		for _, i := range changes[k.name].addedOrNone() {
			k.refs(s, i, func(to int, id spec.ID) {
				switch {
				case id.IsZero() || added[to][id.String()]:
				case removed[to][id.String()]:
					ok = false
				default:
					if need[to] == nil {
						need[to] = map[string]bool{}
					}
					need[to][id.String()] = true
				}
			})
		}
	}
	if !ok {
		return false, rids
	}
	for ki := range checkKinds {
		if len(need[ki]) == 0 && len(clash[ki]) == 0 {
			continue
		}
		k := &checkKinds[ki]
		c := changes[k.name]
		if ki == ckRoutes {
			// No object names a route: a clash is all there is to
			// look for.
			if rids == nil {
				rids = newRouteIDSet(base.Routes)
			}
			if rids != nil {
				for id := range clash[ki] {
					if rids.has(id) {
						return false, rids // or one of the same hash: Check says
					}
				}
				continue
			}
		}
		whole := c != nil && len(c.added) == 0 && len(c.runs) == 1 && c.runs[0] == [2]int{0, k.n(base)}
		if ids := baseIDs(ki, base, whole); ids != nil {
			// Not removed (above), an id the base has is kept.
			for id := range clash[ki] {
				if ids.has(base, id) {
					return false, rids
				}
			}
			for id := range need[ki] {
				if !ids.has(base, id) {
					return false, rids
				}
			}
			continue
		}
		found := 0
		for _, r := range changes[k.name].runsOrNone() {
			for i := r[0]; i < r[1]; i++ {
				id := k.id(base, i).String()
				if clash[ki][id] {
					return false, rids // an object added with a kept one's id
				}
				if need[ki][id] {
					found++
				}
			}
		}
		if found != len(need[ki]) {
			return false, rids
		}
	}
	if rids != nil {
		rids = rids.carry(s.Routes, removed[ckRoutes], added[ckRoutes])
	}
	return true, rids
}

func (c *memberChange) addedOrNone() []int {
	if c == nil {
		return nil
	}
	return c.added
}

func (c *memberChange) runsOrNone() [][2]int {
	if c == nil {
		return nil
	}
	return c.runs
}
