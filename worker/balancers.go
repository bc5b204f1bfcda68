package worker

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"math/rand/v2"
	"slices"
	"strings"

	"coregate/admin/spec"
	"coregate/httpvar"
)

// The balancers an upstream's type names.
const (
	balRoundRobin = iota
	balCHash
	balLeastConn
	balEWMA
)

// newUpstreamBalancer is the balancer of u's type over nodes, compiled from
// u's nodes in their order. It refuses a chash key coregate cannot read.
func newUpstreamBalancer(u *spec.Upstream, nodes []*node) (*balancer, error) {
	b := newBalancer(nodes)
	switch u.Type {
	case "", "roundrobin":
	case "chash":
		b.kind = balCHash
		k, err := compileHashKey(u.EffectiveHashOn(), u.Rare().Key)
		if err != nil {
			return nil, err
		}
		b.balancerKinds = &balancerKinds{key: k}
		for _, g := range *b.groups {
			b.rings = append(b.rings, newCHashRing(nodes, g))
		}
	case "least_conn":
		b.kind = balLeastConn
		b.balancerKinds = &balancerKinds{conns: make([]int32, len(nodes))}
	case "ewma":
		b.kind = balEWMA
		b.balancerKinds = &balancerKinds{lat: make([]ewmaStat, len(nodes))}
	default:
		return nil, fmt.Errorf("upstream type %q is not supported", u.Type)
	}
	return b, nil
}

// release ends the request's hold on node i, picked by pick: before a retry
// (retry true), or when the request ends. least_conn counts it out of the
// requests in flight; ewma takes its latency rtt (ns) in, at the end of the
// request only, as APISIX's after_balance does.
func (b *balancer) release(i int, retry bool, rtt, now int64) {
	switch b.kind {
	case balLeastConn:
		if b.conns[i] > 0 {
			b.conns[i]--
		}
	case balEWMA:
		if !retry {
			b.lat[i].observe(float64(rtt)/1e9, now)
		}
	}
}

// Consistent hashing (chash), as lua-resty-balancer's resty.chash, which
// APISIX's chash balancer builds its ring with: each node of a priority
// group gets 160 points per unit of its weight (the weights divided by
// their greatest common divisor), the points' hashes a chain of CRC32s
// seeded with the node's id ("host:port" with each ':' replaced by a NUL
// byte); a key goes to the first point whose hash is not below the key's
// CRC32, past the last point to the first. The same nodes give the same
// ring as APISIX's, so that a key goes to the same node through either.

// chashPoints is resty.chash's CONSISTENT_POINTS.
const chashPoints = 160

// chashRing is one priority group's ring, sorted by hash. Immutable once
// built.
type chashRing struct {
	hash []uint32
	node []int32 // the node index of each point
}

func newCHashRing(nodes []*node, group []int) chashRing {
	gcd := 0
	for _, i := range group {
		gcd = gcdInt(gcd, nodes[i].weight)
	}
	var r chashRing
	if gcd <= 0 {
		return r // every weight is 0: no point
	}
	type point struct {
		hash uint32
		node int32
	}
	var pts []point
	for _, i := range group {
		w := nodes[i].weight
		if w <= 0 {
			continue
		}
		nd := nodes[i]
		port := nd.addr[strings.LastIndexByte(nd.addr, ':')+1:]
		id := strings.ReplaceAll(nd.host()+":"+port, ":", "\x00")
		base := crc32.ChecksumIEEE([]byte(id))
		var prev [4]byte
		for k := 0; k < w/gcd*chashPoints; k++ {
			h := crc32.Update(base, crc32.IEEETable, prev[:])
			pts = append(pts, point{h, int32(i)})
			binary.LittleEndian.PutUint32(prev[:], h)
		}
	}
	slices.SortFunc(pts, func(a, b point) int {
		if a.hash != b.hash {
			if a.hash < b.hash {
				return -1
			}
			return 1
		}
		return int(a.node - b.node)
	})
	r.hash = make([]uint32, len(pts))
	r.node = make([]int32, len(pts))
	for k, p := range pts {
		r.hash[k], r.node[k] = p.hash, p.node
	}
	return r
}

func gcdInt(a, b int) int {
	for b > 0 {
		a, b = b, a%b
	}
	return a
}

// find returns the first point whose hash is not below h, 0 past the last.
func (r *chashRing) find(h uint32) int {
	lo, hi := 0, len(r.hash)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if r.hash[m] < h {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == len(r.hash) {
		return 0
	}
	return lo
}

// usable reports whether node i may be picked: weight above 0, not tried,
// and healthy unless every node is down (skipDown false), as APISIX's
// balancer hands its pickers the healthy nodes only while there are some.
func (b *balancer) usable(i int, tried triedSet, skipDown bool) bool {
	return b.nodes[i].weight > 0 && !tried.has(i) && (!skipDown || b.nodes[i].health.Healthy())
}

// pickCHash walks the ring of each group from the key's point to the first
// node not tried: the key's node first, then, retry after retry, the next
// ones along the ring (resty.chash's next, from the point last picked,
// reaches the same nodes).
func (b *balancer) pickCHash(tried triedSet, key uint32, skipDown bool) int {
	for gi, g := range *b.groups {
		left := false
		for _, i := range g {
			if b.usable(i, tried, skipDown) {
				left = true
				break
			}
		}
		r := &b.rings[gi]
		if !left || len(r.hash) == 0 {
			continue
		}
		n := len(r.hash)
		for k, p := 0, r.find(key); k < n; k++ {
			if i := int(r.node[p]); b.usable(i, tried, skipDown) {
				return i
			}
			if p++; p == n {
				p = 0
			}
		}
	}
	return -1
}

// hashKey is what a chash upstream hashes a request by: hash_on and key
// as compiled.
type hashKey struct {
	on  uint8       // hashVars, hashHeader, hashCookie, hashConsumer, hashCombination
	v   httpvar.Var // vars, header, cookie
	tpl []keyPart   // vars_combinations
}

const (
	hashVars = iota
	hashHeader
	hashCookie
	hashConsumer
	hashCombination
)

// keyPart is a literal (name empty) or a variable of a vars_combinations
// key, with its default (${name ?? default}).
type keyPart struct {
	lit        []byte
	name       string
	v          httpvar.Var
	def        []byte
	hasDefault bool
}

// compileHashKey reads hash_on and key. Every variable APISIX's schema
// allows for hash_on vars is read (remote_port, server_addr, server_name
// and hostname among them); mqtt_client_id, not set on HTTP in APISIX
// either, falls back to remote_addr. A variable coregate does not know is
// refused: the fallback would spread the requests otherwise than
// configured.
func compileHashKey(on, key string) (hashKey, error) {
	switch on {
	case "vars":
		v := httpvar.Parse(key)
		if v.Kind == httpvar.Unknown && !strings.EqualFold(key, "mqtt_client_id") {
			return hashKey{}, fmt.Errorf("upstream key %q (hash_on vars) is not supported yet", key)
		}
		return hashKey{on: hashVars, v: v}, nil
	case "header":
		return hashKey{on: hashHeader, v: httpvar.Parse("http_" + key)}, nil
	case "cookie":
		return hashKey{on: hashCookie, v: httpvar.Parse("cookie_" + key)}, nil
	case "consumer":
		return hashKey{on: hashConsumer}, nil
	case "vars_combinations":
		return hashKey{on: hashCombination, tpl: parseKeyTemplate(key)}, nil
	}
	return hashKey{}, fmt.Errorf("upstream hash_on %q is not supported", on)
}

// parseKeyTemplate reads a vars_combinations key as APISIX's
// core.utils.resolve_var does: $name (letters, digits, '_' and '.') or
// ${name}, ${name ?? default}; a '$' after a backslash is literal.
func parseKeyTemplate(s string) []keyPart {
	var parts []keyPart
	lit := 0 // start of the pending literal
	flush := func(end int) {
		if end > lit {
			parts = append(parts, keyPart{lit: []byte(s[lit:end])})
		}
	}
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || (i > 0 && s[i-1] == '\\') {
			continue
		}
		rest := s[i+1:]
		if strings.HasPrefix(rest, "{") {
			if end := strings.IndexByte(rest, '}'); end > 1 {
				inner := strings.TrimSpace(rest[1:end])
				p := keyPart{name: inner}
				if j := strings.Index(inner, "??"); j >= 0 {
					p = keyPart{name: strings.TrimSpace(inner[:j]), def: []byte(strings.TrimSpace(inner[j+2:])), hasDefault: true}
				}
				p.v = httpvar.Parse(p.name)
				flush(i)
				parts = append(parts, p)
				i += end + 1
				lit = i + 1
				continue
			}
		}
		n := 0
		for n < len(rest) && isKeyNameByte(rest[n]) {
			n++
		}
		if n == 0 {
			continue
		}
		flush(i)
		parts = append(parts, keyPart{name: rest[:n], v: httpvar.Parse(rest[:n])})
		i += n
		lit = i + 1
	}
	flush(len(s))
	return parts
}

func isKeyNameByte(c byte) bool {
	return c == '_' || c == '.' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

// requestKey is the CRC32 of the request's hash key, as APISIX's
// fetch_chash_hash_key reads it: the variable, header or cookie key names,
// the consumer's name, or the key's variables put together; when that has
// no value (a vars_combinations key none of whose variables is set) the
// client's address. It does not allocate: the pieces of a combination are
// hashed one after the other. Read when the request is routed, while the
// head is readable (varValue).
func (cc *clientConn) requestKey(k *hashKey) uint32 {
	switch k.on {
	case hashConsumer:
		if cc.plugin.consumer != nil {
			return crc32.ChecksumIEEE(cc.consumerName)
		}
	case hashCombination:
		h, resolved := uint32(0), 0
		for i := range k.tpl {
			p := &k.tpl[i]
			if p.name == "" {
				h = crc32.Update(h, crc32.IEEETable, p.lit)
				continue
			}
			v, ok := cc.varValue(&p.v)
			switch {
			case ok:
				h = crc32.Update(h, crc32.IEEETable, v)
			case p.hasDefault:
				h = crc32.Update(h, crc32.IEEETable, p.def)
			default:
				continue
			}
			resolved++
		}
		if resolved > 0 {
			return h
		}
	default:
		if v, ok := cc.varValue(&k.v); ok {
			return crc32.ChecksumIEEE(v)
		}
	}
	return crc32.ChecksumIEEE(cc.remoteAddr())
}

// pickLeastConn takes, in the first group with a node left, the node with
// the fewest requests in flight per unit of weight, APISIX's least_conn
// score (1 + in flight) / weight; among equal scores the scan's start
// goes round, so that an idle upstream's nodes share the requests.
func (b *balancer) pickLeastConn(tried triedSet, skipDown bool) int {
	for _, g := range *b.groups {
		best, n := -1, len(g)
		start := b.next % n
		for k := 0; k < n; k++ {
			i := g[(start+k)%n]
			w := b.nodes[i].weight
			if !b.usable(i, tried, skipDown) {
				continue
			}
			// (1+c_i)/w_i < (1+c_best)/w_best, in integers.
			if best < 0 || int64(1+b.conns[i])*int64(b.nodes[best].weight) < int64(1+b.conns[best])*int64(w) {
				best = i
			}
		}
		if best >= 0 {
			b.next++
			b.conns[best]++
			return best
		}
	}
	return -1
}

// ewmaDecay is APISIX's ewma.lua DECAY_TIME: a latency measured td ago
// weighs exp(-td/10 s) against a new one.
const ewmaDecay = 10e9

// ewmaStat is one node's latency, in seconds, as of at (Worker.now).
type ewmaStat struct {
	v    float64
	at   int64
	seen bool
}

// score is the latency decayed to now, as APISIX reads it to compare two
// nodes (its get_or_update_ewma with rtt 0): a node not heard of for a
// while looks faster and is tried again. 0 for a node never measured.
func (s *ewmaStat) score(now int64) float64 {
	if !s.seen {
		return 0
	}
	return s.v * math.Exp(-float64(max(now-s.at, 0))/ewmaDecay)
}

// observe takes a latency in.
func (s *ewmaStat) observe(rtt float64, now int64) {
	if !s.seen {
		s.v, s.at, s.seen = rtt, now, true
		return
	}
	w := math.Exp(-float64(max(now-s.at, 0)) / ewmaDecay)
	s.v = s.v*w + rtt*(1-w)
	s.at = now
}

// pickEWMA draws two nodes at random among those left in the first group
// with one left and takes the lower score, the first drawn on a tie, as
// APISIX's ewma balancer does (power of two choices); a group with one
// node left gives it.
func (b *balancer) pickEWMA(tried triedSet, now int64, skipDown bool) int {
	for _, g := range *b.groups {
		n := 0
		for _, i := range g {
			if b.usable(i, tried, skipDown) {
				n++
			}
		}
		if n == 0 {
			continue
		}
		if n == 1 {
			return b.nthLeft(g, tried, skipDown, 0)
		}
		x, y := rand.IntN(n), rand.IntN(n-1)
		if y >= x {
			y++
		}
		a, c := b.nthLeft(g, tried, skipDown, x), b.nthLeft(g, tried, skipDown, y)
		if b.lat[a].score(now) > b.lat[c].score(now) {
			return c
		}
		return a
	}
	return -1
}

// nthLeft is the index of the k-th node of group g (from 0) that may be
// picked (usable).
func (b *balancer) nthLeft(g []int, tried triedSet, skipDown bool, k int) int {
	for _, i := range g {
		if b.usable(i, tried, skipDown) {
			if k == 0 {
				return i
			}
			k--
		}
	}
	return -1
}

// releaseNode ends the exchange's hold on the node of its attempt, if it
// holds one (balancer.release): before the next attempt (retry), or when
// the exchange ends. The latency ewma takes is APISIX's: the attempt's
// connect time plus its response time, both from when it began.
func (cc *clientConn) releaseNode(retry bool) {
	if !cc.held {
		return
	}
	cc.held = false
	now := cc.w.now
	rtt := now - cc.upStart
	if cc.upConnected != 0 {
		rtt += cc.upConnected - cc.upStart
	}
	cc.rt.up.bal.release(cc.node, retry, rtt, now)
}
