package router

import (
	"slices"
	"strings"
)

// Update returns a Router that answers every request as a Build would
// from r's routes with remove taken out and add put in (after the routes
// r has, in add's order, for the ties Order leaves). r is not modified
// and goes on serving meanwhile: Update copies what the changed routes
// touch (a shard of a table's exact paths, the trie of a prefix's first
// segment, a host's table) and shares the rest with r, so that changing
// one route of 50 000 costs about what one route's build costs.
//
// Each route of remove must be given as it was to the Build or Update
// that added it (its Index, paths, hosts and mode-relevant fields);
// Index identifies a route's candidates, so the Indexes of a Router's
// routes must differ. An error (a route of add without a path, or with
// an Index out of range) leaves r as it was. Update runs off the hot
// path; calls on one Router may run at once, each returning its own.
func (r *Router) Update(remove, add []Route) (*Router, error) {
	for i := range add {
		if err := add[i].check(); err != nil {
			return nil, err
		}
	}
	nr := *r
	nr.n += len(add) - len(remove)
	u := updater{r: &nr, gen: gens.Add(1)}
	for i := range remove {
		u.route(&remove[i], false)
	}
	for i := range add {
		u.route(&add[i], true)
	}
	u.finish()
	return &nr, nil
}

// Where an owned table lies in its Router.
const (
	inNoHost = iota
	inHostExact
	inPortExact
	inWild
)

type ownedTable struct {
	t     *table
	where uint8
	hp    hostPat
}

// updater is one Update: the Router it makes and what it changed.
type updater struct {
	r     *Router
	gen   uint64
	owned []ownedTable
	// wildIdx finds a wildcard host's table in r.wild; made on first use,
	// when r.wild and r.wildPats are copied. wildChanged: one was added
	// or emptied, so the wildcard tries are built again.
	wildIdx     map[hostPat]int
	wildChanged bool
}

// route takes rt out of the tables it lies in, or puts it in.
func (u *updater) route(rt *Route, add bool) {
	hosts, x := prepare(rt, u.r.mode)
	if u.r.mode == URI || len(hosts) == 0 {
		if u.r.mode == URI && len(hosts) > 0 {
			if add {
				u.r.hosted++
			} else {
				u.r.hosted--
			}
		}
		if u.r.noHost.gen != u.gen {
			t := *u.r.noHost
			t.gen = u.gen
			u.r.noHost = &t
			u.owned = append(u.owned, ownedTable{t: &t, where: inNoHost})
		}
		u.apply(u.r.noHost, rt, x, add)
		return
	}
	for _, hp := range hosts {
		if t := u.hostTable(hp, add); t != nil {
			u.apply(t, rt, x, add)
		}
	}
}

// hostTable returns hp's table, owned by the Update; a new one when hp
// has none and create is set, else nil.
func (u *updater) hostTable(hp hostPat, create bool) *table {
	own := func(t *table, where uint8) *table {
		if t == nil {
			t = &table{}
		} else {
			c := *t
			t = &c
		}
		t.gen = u.gen
		u.owned = append(u.owned, ownedTable{t: t, where: where, hp: hp})
		return t
	}
	if hp.wild {
		if u.wildIdx == nil {
			u.r.wild, u.r.wildPats = slices.Clone(u.r.wild), slices.Clone(u.r.wildPats)
			u.wildIdx = make(map[hostPat]int, len(u.r.wildPats))
			for i, p := range u.r.wildPats {
				u.wildIdx[p] = i
			}
		}
		i, ok := u.wildIdx[hp]
		if !ok {
			if !create {
				return nil
			}
			i = len(u.r.wild)
			u.wildIdx[hp] = i
			u.r.wild, u.r.wildPats = append(u.r.wild, nil), append(u.r.wildPats, hp)
			u.wildChanged = true
		}
		if t := u.r.wild[i]; t != nil && t.gen == u.gen {
			return t
		}
		u.r.wild[i] = own(u.r.wild[i], inWild)
		return u.r.wild[i]
	}
	m, where := &u.r.hostExact, uint8(inHostExact)
	if hp.port {
		m, where = &u.r.portExact, inPortExact
	}
	t, _ := m.lookup(hp.s)
	switch {
	case t != nil && t.gen == u.gen:
		return t
	case t == nil && !create:
		return nil
	}
	t = own(t, where)
	m.set(hp.s, t, u.gen)
	return t
}

// apply takes rt's candidates out of t, or puts them in. The exact paths'
// lists are replaced, never written: r shares them. The prefixes' go to
// the tries' pending forms, built when the Update finishes.
func (u *updater) apply(t *table, rt *Route, x *extra, add bool) {
	cands(rt, x, func(key string, exact bool, c cand) {
		if exact {
			cs, _ := t.exact.lookup(key)
			if cs = edit(cs, c, add); len(cs) == 0 {
				t.exact.del(key, u.gen)
			} else {
				t.exact.set(key, cs, u.gen)
			}
			return
		}
		m, sub := t.pending(key)
		if cs := edit(m[sub], c, add); len(cs) == 0 {
			delete(m, sub)
		} else {
			m[sub] = cs
		}
	})
}

// edit returns cs with c inserted in match order (after the candidates
// it does not come before), or with route c.index's candidates taken
// out. cs itself is not written.
func edit(cs []cand, c cand, add bool) []cand {
	if add {
		i := 0
		for i < len(cs) && !candLess(&c, &cs[i]) {
			i++
		}
		out := make([]cand, 0, len(cs)+1)
		out = append(out, cs[:i]...)
		out = append(out, c)
		return append(out, cs[i:]...)
	}
	n := 0
	for i := range cs {
		if cs[i].index == c.index {
			n++
		}
	}
	if n == 0 {
		return cs
	}
	out := make([]cand, 0, len(cs)-n)
	for _, o := range cs {
		if o.index != c.index {
			out = append(out, o)
		}
	}
	return out
}

// segLen is firstSeg of a string.
func segLen(p string) int {
	if len(p) < 2 {
		return -1
	}
	if i := strings.IndexByte(p[1:], '/'); i >= 0 {
		return i + 2
	}
	return -1
}

// pending returns the pending form of the trie prefix key lies in, and
// key as that trie holds it. t is owned by the running Update.
func (t *table) pending(key string) (map[string][]cand, string) {
	n := segLen(key)
	if n < 0 {
		if t.pendTree == nil {
			t.pendTree = unpack(t.tree)
		}
		return t.pendTree, key
	}
	seg := key[:n]
	m, ok := t.pendSegs[seg]
	if !ok {
		pt, _ := t.segs.lookup(seg)
		m = unpack(pt)
		if t.pendSegs == nil {
			t.pendSegs = map[string]map[string][]cand{}
		}
		t.pendSegs[seg] = m
	}
	return m, key[n:]
}

// unpack returns pt's prefixes and their candidates (shared with pt) as
// a map; an empty one for nil.
func unpack(pt *ptrie) map[string][]cand {
	if pt == nil {
		return map[string][]cand{}
	}
	m := make(map[string][]cand, len(pt.keys)+1)
	for i, k := range pt.keys {
		m[k] = pt.cands[i]
	}
	return m
}

// pack builds the trie of a pending form; nil when it is empty.
func pack(m map[string][]cand) *ptrie {
	if len(m) == 0 {
		return nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	cs := make([][]cand, len(keys))
	for i, k := range keys {
		cs[i] = m[k]
	}
	return newPtrie(keys, cs)
}

// finish builds the tries the Update changed, drops the host tables it
// emptied and sets the Router's flags.
func (u *updater) finish() {
	r := u.r
	for _, o := range u.owned {
		t := o.t
		if t.pendTree != nil {
			t.tree, t.pendTree = pack(t.pendTree), nil
		}
		for seg, m := range t.pendSegs {
			if pt := pack(m); pt != nil {
				t.segs.set(seg, pt, u.gen)
			} else {
				t.segs.del(seg, u.gen)
			}
		}
		t.pendSegs = nil
		if !t.empty() {
			continue
		}
		switch o.where {
		case inHostExact:
			r.hostExact.del(o.hp.s, u.gen)
		case inPortExact:
			r.portExact.del(o.hp.s, u.gen)
		case inWild:
			u.wildChanged = true
		}
	}
	if u.wildChanged {
		wild, pats := r.wild[:0], r.wildPats[:0]
		for i, t := range r.wild {
			if !t.empty() {
				wild, pats = append(wild, t), append(pats, r.wildPats[i])
			}
		}
		clear(r.wild[len(wild):])
		r.wild, r.wildPats = wild, pats
		if len(wild) == 0 {
			r.wild, r.wildPats = nil, nil
		}
	}
	if u.wildChanged || r.hostWild.nodes == nil {
		r.linkHosts()
		return
	}
	hasPort := r.portExact.n > 0
	for _, hp := range r.wildPats {
		hasPort = hasPort || hp.port
	}
	r.hasPort = hasPort
	r.hasHost = r.hostExact.n > 0 || r.portExact.n > 0 || len(r.wild) > 0
	r.needURI = r.hosted > 0
}
