package router

import (
	"net/netip"

	"coregate/varexpr"
)

// maxHost is the longest Host header, port included, that host-bound routes
// are matched against; a longer one matches only "*" hosts (and host-less
// routes). DNS names are at most 253 bytes.
const maxHost = 300

// Request is what Match looks at. The caller owns it and its slices; Match
// reads them only during the call and keeps nothing.
type Request struct {
	Method     Method     // from ParseMethod
	Path       []byte     // decoded, normalised path without query ($uri)
	Host       []byte     // Host header as sent, may include ":port"
	RemoteAddr netip.Addr // client address; v4-mapped addresses are fine
	Vars       VarSource  // for vars conditions; may be nil if no route has vars
}

// hostView holds the request host lower-cased in a buffer on Match's stack.
type hostView struct {
	host []byte // without port, without one trailing '.' ($host)
	full []byte // the whole Host header ($http_host)
}

// Match returns the Index of the route req matches, or ok=false. It does not
// allocate and is safe for concurrent use.
func (r *Router) Match(req *Request) (index int, ok bool) {
	if r.hasHost || r.needURI {
		return r.matchHost(req)
	}
	return r.noHost.match(req, nil)
}

func (r *Router) matchHost(req *Request) (int, bool) {
	var buf [maxHost]byte
	hv := lowerHost(&buf, req.Host)
	if r.mode == URI {
		return r.noHost.match(req, &hv)
	}
	if r.hasPort && hv.full != nil && r.portExact.n > 0 {
		if t := r.portExact.shard(pick(hv.full, r.portExact.mask))[string(hv.full)]; t != nil {
			if i, ok := t.match(req, nil); ok {
				return i, true
			}
		}
	}
	if hv.full != nil && r.hostExact.n > 0 {
		if t := r.hostExact.shard(pick(hv.host, r.hostExact.mask))[string(hv.host)]; t != nil {
			if i, ok := t.match(req, nil); ok {
				return i, true
			}
		}
	}
	if r.hasPort {
		for n := r.portWild.longestRev(hv.full); n >= 0; n = r.portWild.nodes[n].up {
			if i, ok := r.wild[r.portWild.nodes[n].val].match(req, nil); ok {
				return i, true
			}
		}
	}
	for n := r.hostWild.longestRev(hv.host); n >= 0; n = r.hostWild.nodes[n].up {
		if i, ok := r.wild[r.hostWild.nodes[n].val].match(req, nil); ok {
			return i, true
		}
	}
	return r.noHost.match(req, nil)
}

// lowerHost returns the view of Host header h lower-cased in buf; the
// zero view when h is longer than buf. Apart from matchHost, whose
// lookups made its loop slower inlined there.
func lowerHost(buf *[maxHost]byte, h []byte) hostView {
	if len(h) > len(buf) {
		return hostView{}
	}
	full := buf[:len(h)]
	end := len(h)
	for i, c := range h {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		full[i] = c
		if c == ':' && end == len(h) && (h[0] != '[' || i > 0 && h[i-1] == ']') {
			end = i
		}
	}
	host := full[:end]
	if len(host) > 0 && host[len(host)-1] == '.' {
		host = host[:len(host)-1]
	}
	return hostView{host: host, full: full}
}

// match runs one table: the exact path's candidates, then each matching
// prefix's, longest first.
func (t *table) match(req *Request, hv *hostView) (int, bool) {
	if t.empty() {
		return 0, false
	}
	if t.exact.n > 0 {
		if cs := t.exact.shard(pick(req.Path, t.exact.mask))[string(req.Path)]; cs != nil {
			if i, ok := firstOK(cs, req, hv); ok {
				return i, true
			}
		}
	}
	if t.segs.n > 0 {
		if n := firstSeg(req.Path); n >= 0 {
			if sub := t.segs.shard(pick(req.Path[:n], t.segs.mask))[string(req.Path[:n])]; sub != nil {
				if i, ok := sub.match(req.Path[n:], req, hv); ok {
					return i, true
				}
			}
		}
	}
	if t.tree != nil {
		return t.tree.match(req.Path, req, hv)
	}
	return 0, false
}

// match tries the candidates of each prefix of p in the trie, longest
// first.
func (pt *ptrie) match(p []byte, req *Request, hv *hostView) (int, bool) {
	nodes := pt.t.nodes
	for n := pt.t.longest(p); n >= 0; n = nodes[n].up {
		if i, ok := firstOK(pt.cands[nodes[n].val], req, hv); ok {
			return i, true
		}
	}
	return 0, false
}

func firstOK(cs []cand, req *Request, hv *hostView) (int, bool) {
	for i := range cs {
		c := &cs[i]
		if c.methods != 0 && c.methods&req.Method == 0 {
			continue
		}
		if c.x == nil || c.x.ok(req, hv) {
			return int(c.index), true
		}
	}
	return 0, false
}

func (x *extra) ok(req *Request, hv *hostView) bool {
	if x.never {
		return false
	}
	if len(x.remote) > 0 {
		if !req.RemoteAddr.IsValid() || !varexpr.AddrIn(x.remote, req.RemoteAddr.Unmap()) {
			return false
		}
	}
	if len(x.hosts) > 0 && !hostOK(x.hosts, hv) {
		return false
	}
	if x.vars != nil && !x.vars.Eval(req) {
		return false
	}
	if x.tail != nil && !x.tail.Match(req.Path) {
		return false
	}
	return true
}

func hostOK(pats []hostPat, hv *hostView) bool {
	if hv.full == nil {
		// Host header too long to hold: only an empty wildcard ("*") matches.
		for _, p := range pats {
			if p.wild && p.s == "" {
				return true
			}
		}
		return false
	}
	for _, p := range pats {
		s := hv.host
		if p.port {
			s = hv.full
		}
		if p.wild {
			if len(s) >= len(p.s) && string(s[len(s)-len(p.s):]) == p.s {
				return true
			}
		} else if string(s) == p.s {
			return true
		}
	}
	return false
}
