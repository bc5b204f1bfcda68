package router

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync"
)

// Mode selects the APISIX router whose behaviour Build reproduces.
type Mode uint8

const (
	// HostURI is radixtree_host_uri, APISIX's default: routes with hosts are
	// looked up by host first; host-less routes only when none matched.
	HostURI Mode = iota
	// URI is radixtree_uri: one table keyed by path; hosts are a condition.
	URI
)

// Route is one route as the router sees it. Build copies what it needs; the
// caller may reuse the Route afterwards.
type Route struct {
	// Index is returned by Match for this route: an index into the
	// caller's own table, from 0 to math.MaxInt32.
	Index int
	// URIs are the route's paths: "/a" exact, "/a/*" or "/a*" prefix.
	// ":name" is literal text. At least one is required.
	URIs []string
	// Priority orders routes on the same path, highest first.
	Priority int
	// Methods the route accepts; 0 means any.
	Methods Method
	// Hosts, compared case-insensitively: "foo.com" exact, "*.foo.com"
	// suffix ".foo.com", "*" any host. A host with ':' is compared with the
	// whole Host header (port included), others with the host alone. The
	// caller resolves hosts inherited from a service. Empty means any host.
	Hosts []string
	// RemoteAddrs the client address must lie in; empty means any. A
	// v4-mapped IPv6 prefix stands for the IPv4 prefix it covers.
	RemoteAddrs []netip.Prefix
	// Vars is the compiled vars condition (see CompileVars); the zero Expr
	// always holds.
	Vars Expr
	// Order breaks the ties between routes of equal priority on paths of
	// equal length, lowest first; routes of equal Order keep the order
	// they were given to Build (or added by Update) in. A caller that
	// updates a Router gives each route an Order of its place among the
	// others: their order in a Build from scratch.
	Order uint64
}

// Router is an immutable route table built by Build or Update. It is safe
// for concurrent use by any number of goroutines.
type Router struct {
	mode    Mode
	n       int
	noHost  *table // host-less routes (HostURI) or every route (URI)
	needURI bool   // URI mode and some route has hosts
	hosted  int    // URI mode: routes with hosts (needURI)

	// HostURI mode: tables of host-bound routes.
	hostExact shardMap[*table] // by lower-case host without port
	portExact shardMap[*table] // by lower-case Host header, for hosts with ':'
	hostWild  trie             // reversed wildcard suffixes, values index wild
	portWild  trie             // the same for wildcard hosts with ':'
	wild      []*table
	wildPats  []hostPat // the host of each of wild
	hasHost   bool
	hasPort   bool
}

// table is one lua-resty-radixtree instance: exact paths in a map, prefixes
// in tries, each with its candidates in match order.
//
// Prefixes are split on their first segment so that the walk's depth does
// not grow with the number of routes that share a shape ("/hello1/",
// "/hello2/", ...): a prefix that runs past the first '/' after its first
// byte lives in the trie of that first segment (found by one hash lookup,
// keys stored without the segment); the others live in tree. Every match in
// a segment trie is longer than any match in tree, so the segment trie is
// walked first and the longest-first order holds.
//
// The maps are sharded and the tries split so that an Update copies what
// one route touches: a shard of exact paths, one segment's trie.
type table struct {
	gen   uint64 // the Update that made it (and may write it until it returns)
	exact shardMap[[]cand]
	segs  shardMap[*ptrie] // by first segment, closing '/' included
	tree  *ptrie           // nil when empty

	// While an Update that owns the table runs: the tries it changes,
	// as key → candidates, built into ptries when it returns.
	pendSegs map[string]map[string][]cand
	pendTree map[string][]cand
}

func (t *table) empty() bool { return t.exact.n == 0 && t.segs.n == 0 && t.tree == nil }

// firstSeg returns the length of p's first segment through the first '/'
// after its first byte, or -1 when there is none.
func firstSeg(p []byte) int {
	if len(p) < 2 {
		return -1
	}
	if i := bytes.IndexByte(p[1:], '/'); i >= 0 {
		return i + 2
	}
	return -1
}

// cand is one (route, path) pair. Conditions other than the method sit
// behind x, nil when there are none. prio, plen and order are its sort
// keys (candLess), for an Update to insert a route among the others.
type cand struct {
	x       *extra
	order   uint64
	prio    int
	index   int32
	plen    int32
	methods Method
}

// candLess reports whether a comes before b on the same path: higher
// priority first, then the longer path as written, then the lower Order.
func candLess(a, b *cand) bool {
	if a.prio != b.prio {
		return a.prio > b.prio
	}
	if a.plen != b.plen {
		return a.plen > b.plen
	}
	return a.order < b.order
}

type extra struct {
	hosts  []hostPat // URI mode only
	remote []netip.Prefix
	vars   *Expr
	tail   *regexp.Regexp // prefix routes with text after the '*'
	never  bool           // tail did not compile: never matches by prefix
}

type hostPat struct {
	s    string // lower case, without the leading '*' of a wildcard
	wild bool
	port bool // contains ':': compared with the whole Host header
}

// Len returns the number of routes the Router was built from.
func (r *Router) Len() int { return r.n }

// Mode returns the mode the Router was built with.
func (r *Router) Mode() Mode { return r.mode }

// entry is a candidate with its key, before the table is frozen: the
// exact path or the prefix before the '*'.
type entry struct {
	key string
	c   cand
}

// tableBuilder gathers one table's candidates in insertion order, one
// slice per kind, where a map of slices per path cost each path two
// allocations and the map its growth: the build of a 5000-route
// configuration, which a bulk load through the Admin API repeats at every
// reload, spent a third of its time and most of its garbage there.
type tableBuilder struct {
	exact  []entry
	prefix []entry
}

// cands calls f with each (key, candidate) of route rt (with its compiled
// conditions x): exact is false for a prefix, whose key is the text
// before the '*'.
func cands(rt *Route, x *extra, f func(key string, exact bool, c cand)) {
	for _, p := range rt.URIs {
		c := cand{index: int32(rt.Index), methods: rt.Methods, x: x, prio: rt.Priority, plen: int32(len(p)), order: rt.Order}
		star := strings.IndexByte(p, '*')
		if star < 0 {
			f(p, true, c)
			continue
		}
		re, never := tailPattern(p, star)
		if re != nil || never {
			var cp extra
			if x != nil {
				cp = *x
			}
			cp.tail, cp.never = re, never
			c.x = &cp
		}
		f(p[:star], false, c)
	}
}

// add inserts route rt (with its compiled conditions x) for each of its paths.
func (b *tableBuilder) add(rt *Route, x *extra) {
	cands(rt, x, func(key string, exact bool, c cand) {
		if exact {
			b.exact = append(b.exact, entry{key, c})
		} else {
			b.prefix = append(b.prefix, entry{key, c})
		}
	})
}

// sortEntries orders es by key, then each key's candidates in match order
// (candLess); insertion order breaks the remaining ties, as
// insert_tab_in_order does. It returns the number of distinct keys.
func sortEntries(es []entry) int {
	slices.SortStableFunc(es, func(a, b entry) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		if c := cmp.Compare(b.c.prio, a.c.prio); c != 0 {
			return c
		}
		if c := cmp.Compare(b.c.plen, a.c.plen); c != 0 {
			return c
		}
		return cmp.Compare(a.c.order, b.c.order)
	})
	n := 0
	for i := range es {
		if i == 0 || es[i].key != es[i-1].key {
			n++
		}
	}
	return n
}

// groups calls f with each key of es (sorted by sortEntries) and its
// candidates, carved in order out of one array.
func groups(es []entry, f func(key string, cs []cand)) {
	all := make([]cand, len(es))
	for i := range es {
		all[i] = es[i].c
	}
	for i := 0; i < len(es); {
		j := i + 1
		for j < len(es) && es[j].key == es[i].key {
			j++
		}
		f(es[i].key, all[i:j:j])
		i = j
	}
}

func (b *tableBuilder) build() *table {
	t := &table{}
	if len(b.exact) > 0 {
		t.exact = makeShardMap[[]cand](sortEntries(b.exact), 0)
		groups(b.exact, func(p string, cs []cand) { t.exact.set(p, cs, 0) })
	}
	if len(b.prefix) == 0 {
		return t
	}
	// Keys in order: a deterministic node layout. The keys and
	// candidates of the tries are carved out of one array each.
	n := sortEntries(b.prefix)
	keys := make([]string, 0, n)
	cs := make([][]cand, 0, n)
	var treeKeys []string
	var treeCands [][]cand
	type seg struct {
		name string
		from int
	}
	var segs []seg
	groups(b.prefix, func(k string, c []cand) {
		n := firstSeg([]byte(k))
		if n < 0 {
			treeKeys, treeCands = append(treeKeys, k), append(treeCands, c)
			return
		}
		if len(segs) == 0 || segs[len(segs)-1].name != k[:n] {
			segs = append(segs, seg{k[:n], len(keys)})
		}
		keys, cs = append(keys, k[n:]), append(cs, c)
	})
	if len(treeKeys) > 0 {
		t.tree = newPtrie(treeKeys, treeCands)
	}
	if len(segs) > 0 {
		t.segs = makeShardMap[*ptrie](len(segs), 0)
		pts := make([]ptrie, len(segs))
		for i, s := range segs {
			end := len(keys)
			if i+1 < len(segs) {
				end = segs[i+1].from
			}
			pts[i].init(keys[s.from:end:end], cs[s.from:end:end])
			t.segs.set(s.name, &pts[i], 0)
		}
	}
	return t
}

// check refuses a route Build and Update cannot hold.
func (rt *Route) check() error {
	if len(rt.URIs) == 0 {
		return fmt.Errorf("%w: route %d", ErrNoURI, rt.Index)
	}
	if rt.Index < 0 || rt.Index > math.MaxInt32 {
		return fmt.Errorf("%w: %d", ErrIndex, rt.Index)
	}
	return nil
}

// prepare returns rt's hosts and its conditions other than the method
// (nil when it has none) as Build and Update store them.
func prepare(rt *Route, mode Mode) ([]hostPat, *extra) {
	hosts := make([]hostPat, 0, len(rt.Hosts))
	for _, h := range rt.Hosts {
		h = strings.ToLower(h)
		hp := hostPat{port: strings.IndexByte(h, ':') >= 0}
		if strings.HasPrefix(h, "*") {
			hp.wild, h = true, h[1:]
		}
		hp.s = h
		hosts = append(hosts, hp)
	}
	var cond extra
	for _, p := range rt.RemoteAddrs {
		cond.remote = append(cond.remote, normPrefix(p))
	}
	if rt.Vars.Len() > 0 {
		v := rt.Vars
		cond.vars = &v
	}
	if mode == URI && len(hosts) > 0 {
		cond.hosts = hosts
	}
	if cond.hosts == nil && cond.remote == nil && cond.vars == nil {
		return hosts, nil
	}
	x := &extra{}
	*x = cond
	return hosts, x
}

// Build compiles routes into a Router. It runs off the hot path (5000 routes
// take a few milliseconds) and does not keep routes or its slices.
func Build(routes []Route, mode Mode) (*Router, error) {
	if mode != HostURI && mode != URI {
		return nil, fmt.Errorf("%w: %d", ErrMode, mode)
	}
	r := &Router{mode: mode, n: len(routes)}
	// One pass to size the host-less table, which holds most routes:
	// growing it by appends would allocate several times its size.
	var nExact, nPrefix int
	for i := range routes {
		if mode == HostURI && len(routes[i].Hosts) > 0 {
			continue
		}
		for _, p := range routes[i].URIs {
			if strings.IndexByte(p, '*') < 0 {
				nExact++
			} else {
				nPrefix++
			}
		}
	}
	noHost := getBuilder(nExact, nPrefix)
	defer putBuilder(noHost)
	byHost := map[hostPat]*tableBuilder{}
	var hostOrder []hostPat
	for i := range routes {
		rt := &routes[i]
		if err := rt.check(); err != nil {
			return nil, err
		}
		hosts, x := prepare(rt, mode)
		if mode == URI && len(hosts) > 0 {
			r.hosted++
			r.needURI = true
		}
		if mode == URI || len(hosts) == 0 {
			noHost.add(rt, x)
			continue
		}
		for _, hp := range hosts {
			b := byHost[hp]
			if b == nil {
				b = &tableBuilder{}
				byHost[hp] = b
				hostOrder = append(hostOrder, hp)
			}
			b.add(rt, x)
		}
	}
	r.noHost = noHost.build()
	sortHosts(hostOrder)
	tables := make([]*table, len(hostOrder))
	var nHost, nPort int
	for i, hp := range hostOrder {
		tables[i] = byHost[hp].build()
		switch {
		case hp.wild:
		case hp.port:
			nPort++
		default:
			nHost++
		}
	}
	if nHost > 0 {
		r.hostExact = makeShardMap[*table](nHost, 0)
	}
	if nPort > 0 {
		r.portExact = makeShardMap[*table](nPort, 0)
	}
	for i, hp := range hostOrder {
		switch {
		case hp.wild:
			r.wild, r.wildPats = append(r.wild, tables[i]), append(r.wildPats, hp)
		case hp.port:
			r.portExact.set(hp.s, tables[i], 0)
		default:
			r.hostExact.set(hp.s, tables[i], 0)
		}
	}
	r.linkHosts()
	return r, nil
}

// sortHosts orders host patterns for a deterministic layout.
func sortHosts(hs []hostPat) {
	sort.Slice(hs, func(i, j int) bool {
		a, b := hs[i], hs[j]
		if a.s != b.s {
			return a.s < b.s
		}
		if a.wild != b.wild {
			return b.wild
		}
		return !a.port && b.port
	})
}

// linkHosts builds the wildcard tries of r.wild and sets the flags Match
// reads from the host tables.
func (r *Router) linkHosts() {
	r.hostWild, r.portWild = newTrie(), newTrie()
	r.hasPort = r.portExact.n > 0
	for i, hp := range r.wildPats {
		tr := &r.hostWild
		if hp.port {
			tr, r.hasPort = &r.portWild, true
		}
		tr.put(reverse(hp.s), int32(i))
	}
	r.hostWild.link()
	r.portWild.link()
	r.hasHost = r.hostExact.n > 0 || r.portExact.n > 0 || len(r.wild) > 0
	r.needURI = r.hosted > 0
}

// normPrefix masks p and turns a v4-mapped IPv6 prefix into IPv4.
func normPrefix(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p.Masked()
}

func reverse(s string) string {
	b := make([]byte, len(s))
	for i := range len(s) {
		b[len(s)-1-i] = s[i]
	}
	return string(b)
}

// builders are the host-less table's builders of Build, reused from one
// build to the next: the table keeps none of their entries (groups copies
// the candidates out), and for 5 000 routes they are about 300 kB, which
// every build of a bulk load through the Admin API allocated and dropped.
var builders sync.Pool

// getBuilder returns an empty tableBuilder with room for nExact exact and
// nPrefix prefix entries.
func getBuilder(nExact, nPrefix int) *tableBuilder {
	b, ok := builders.Get().(*tableBuilder)
	if !ok {
		b = &tableBuilder{}
	}
	// Room to grow: during a bulk load every build has more routes than
	// the one before, and arrays sized exactly would fit none after it.
	if cap(b.exact) < nExact {
		b.exact = make([]entry, 0, nExact+nExact/4)
	}
	if cap(b.prefix) < nPrefix {
		b.prefix = make([]entry, 0, nPrefix+nPrefix/4)
	}
	return b
}

// putBuilder empties b, so that it keeps no route's strings or conditions
// alive, and gives it back.
func putBuilder(b *tableBuilder) {
	clear(b.exact)
	clear(b.prefix)
	b.exact, b.prefix = b.exact[:0], b.prefix[:0]
	builders.Put(b)
}
