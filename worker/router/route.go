package router

import (
	"bytes"
	"cmp"
	"fmt"
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
	// caller's own table.
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
}

// Router is an immutable route table built by Build. It is safe for
// concurrent use by any number of goroutines.
type Router struct {
	mode    Mode
	n       int
	noHost  table // host-less routes (HostURI) or every route (URI)
	needURI bool  // URI mode and some route has hosts

	// HostURI mode: tables of host-bound routes.
	hostExact map[string]*table // by lower-case host without port
	portExact map[string]*table // by lower-case Host header, for hosts with ':'
	hostWild  trie              // reversed wildcard suffixes, values index wild
	portWild  trie              // the same for wildcard hosts with ':'
	wild      []*table
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
type table struct {
	exact  map[string][]cand
	segs   map[string]int32 // first segment, closing '/' included → index in subs
	subs   []trie
	tree   trie
	prefix [][]cand // indexed by trie value
	empty  bool
}

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
// behind x, nil when there are none.
type cand struct {
	index   int
	methods Method
	x       *extra
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

// entry is a candidate with its sort keys, before the table is frozen:
// key is the exact path or the prefix before the '*'.
type entry struct {
	key     string
	c       cand
	prio    int
	pathLen int
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

// add inserts route rt (with its compiled conditions x) for each of its paths.
func (b *tableBuilder) add(rt *Route, x *extra) {
	for _, p := range rt.URIs {
		e := entry{key: p, c: cand{index: rt.Index, methods: rt.Methods, x: x}, prio: rt.Priority, pathLen: len(p)}
		star := strings.IndexByte(p, '*')
		if star < 0 {
			b.exact = append(b.exact, e)
			continue
		}
		re, never := tailPattern(p, star)
		if re != nil || never {
			var cp extra
			if x != nil {
				cp = *x
			}
			cp.tail, cp.never = re, never
			e.c.x = &cp
		}
		e.key = p[:star]
		b.prefix = append(b.prefix, e)
	}
}

// sortEntries orders es by key, then each key's candidates in match order:
// highest priority first, then longest path, and insertion order breaks
// the remaining ties, as insert_tab_in_order does. It returns the number
// of distinct keys.
func sortEntries(es []entry) int {
	slices.SortStableFunc(es, func(a, b entry) int {
		if c := strings.Compare(a.key, b.key); c != 0 {
			return c
		}
		if c := cmp.Compare(b.prio, a.prio); c != 0 {
			return c
		}
		return cmp.Compare(b.pathLen, a.pathLen)
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
	t := &table{tree: newTrie(), empty: len(b.exact) == 0 && len(b.prefix) == 0}
	if len(b.exact) > 0 {
		t.exact = make(map[string][]cand, sortEntries(b.exact))
		groups(b.exact, func(p string, cs []cand) { t.exact[p] = cs })
	}
	if len(b.prefix) == 0 {
		t.tree.link()
		return t
	}
	// Keys in order: a deterministic node layout.
	t.prefix = make([][]cand, 0, sortEntries(b.prefix))
	groups(b.prefix, func(k string, cs []cand) {
		v := int32(len(t.prefix))
		t.prefix = append(t.prefix, cs)
		n := firstSeg([]byte(k))
		if n < 0 {
			t.tree.put(k, v)
			return
		}
		if t.segs == nil {
			t.segs = map[string]int32{}
		}
		s, ok := t.segs[k[:n]]
		if !ok {
			s = int32(len(t.subs))
			t.segs[k[:n]] = s
			t.subs = append(t.subs, newTrie())
		}
		t.subs[s].put(k[n:], v)
	})
	t.tree.link()
	for i := range t.subs {
		t.subs[i].link()
	}
	return t
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
		if len(rt.URIs) == 0 {
			return nil, fmt.Errorf("%w: route %d", ErrNoURI, rt.Index)
		}
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
		var x *extra // nil for the routes with no condition but the method
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
			r.needURI = true
		}
		if cond.hosts != nil || cond.remote != nil || cond.vars != nil {
			x = &extra{}
			*x = cond
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
	r.noHost = *noHost.build()
	r.hostWild, r.portWild = newTrie(), newTrie()
	sort.Slice(hostOrder, func(i, j int) bool { // deterministic layout
		a, b := hostOrder[i], hostOrder[j]
		if a.s != b.s {
			return a.s < b.s
		}
		if a.wild != b.wild {
			return b.wild
		}
		return !a.port && b.port
	})
	for _, hp := range hostOrder {
		t := byHost[hp].build()
		r.hasHost = true
		r.hasPort = r.hasPort || hp.port
		switch {
		case !hp.wild && !hp.port:
			if r.hostExact == nil {
				r.hostExact = map[string]*table{}
			}
			r.hostExact[hp.s] = t
		case !hp.wild:
			if r.portExact == nil {
				r.portExact = map[string]*table{}
			}
			r.portExact[hp.s] = t
		default:
			tr := &r.hostWild
			if hp.port {
				tr = &r.portWild
			}
			tr.put(reverse(hp.s), int32(len(r.wild)))
			r.wild = append(r.wild, t)
		}
	}
	r.hostWild.link()
	r.portWild.link()
	return r, nil
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
