package router

import (
	"encoding/binary"
	"maps"
	"slices"
	"sync/atomic"
)

// shardKeys is the number of keys per shard a shardMap of more than
// unsharded keys is sized for: an Update copies the one shard a key lies
// in (and its page, shardPage), so that changing one key of 50 000
// copies about this many entries, not the whole map.
const shardKeys = 64

// unsharded is the most keys a shardMap keeps in one map: copying that
// many costs an Update less than a lookup's hash costs every request.
const unsharded = 1024

// gens numbers the Updates: an object whose gen is the Update's own was
// made by it and may be written until the Update returns; any other is
// shared with a Router that is being served and is copied first. Build's
// objects have gen 0.
var gens atomic.Uint64

// shardMap is a string-keyed map split into a power of two of Go maps by
// the keys' spread, so that a copy-on-write Update copies one shard
// instead of the whole map. The shards are kept in pages of up to pageLen,
// so that an Update copies the index of pages and one page too, not a
// list of every shard: at 50 000 keys (1 024 shards), copying the list and
// its owners was 16 kB of an Update's garbage, a third of a worker's for
// a route added (Deltas as BenchmarkDeltaApply/added-to-50000's, alloc
// space), and 1 024 pointers written under the collector's write
// barrier. The pages' index, the pages
// and the maps are immutable once the Router holding them is returned;
// gen and gens mark the ones an Update owns. Match reads shard(i), i
// spreadBytes(k)&mask, itself, when n is not 0: one load more than a
// flat list of shards.
type shardMap[V any] struct {
	gen   uint64 // the Update that owns pages
	mask  uint32 // shards-1
	n     int    // keys
	pages []*shardPage[V]
}

// shardPage is up to pageLen of a shardMap's shards, shard i of the map
// shards[i&pageMask] of page i>>pageBits, and the Update that owns each
// (gens) and the page (gen).
type shardPage[V any] struct {
	gen    uint64
	shards []map[string]V
	gens   []uint64
}

const (
	pageBits = 5
	pageLen  = 1 << pageBits
	pageMask = pageLen - 1
)

// makeShardMap returns an empty shardMap sized for n keys, owned by gen.
func makeShardMap[V any](n int, gen uint64) shardMap[V] {
	k := 1
	for n > unsharded && k*shardKeys < n {
		k <<= 1
	}
	s := shardMap[V]{gen: gen, mask: uint32(k - 1), pages: make([]*shardPage[V], (k+pageMask)>>pageBits)}
	for i := range s.pages {
		m := min(k, pageLen)
		p := &shardPage[V]{gen: gen, shards: make([]map[string]V, m), gens: make([]uint64, m)}
		for j := range p.shards {
			p.shards[j], p.gens[j] = make(map[string]V, n/k), gen
		}
		s.pages[i] = p
	}
	return s
}

// shard returns shard i (i <= mask).
func (s *shardMap[V]) shard(i uint32) map[string]V {
	return s.pages[i>>pageBits].shards[i&pageMask]
}

// lookup returns k's value.
func (s *shardMap[V]) lookup(k string) (V, bool) {
	if s.n == 0 {
		var zero V
		return zero, false
	}
	v, ok := s.shard(spreadString(k) & s.mask)[k]
	return v, ok
}

// mut returns the map of k's shard, owned by gen: the index of pages, the
// page and the shard are copied first when another Update made them.
func (s *shardMap[V]) mut(k string, gen uint64) map[string]V {
	if s.pages == nil {
		*s = makeShardMap[V](0, gen)
	}
	if s.gen != gen {
		s.pages, s.gen = slices.Clone(s.pages), gen
	}
	i := spreadString(k) & s.mask
	p := s.pages[i>>pageBits]
	if p.gen != gen {
		p = &shardPage[V]{gen: gen, shards: slices.Clone(p.shards), gens: slices.Clone(p.gens)}
		s.pages[i>>pageBits] = p
	}
	j := i & pageMask
	if p.gens[j] != gen {
		p.shards[j], p.gens[j] = maps.Clone(p.shards[j]), gen
	}
	return p.shards[j]
}

// set stores v for k in the shards gen owns, and spreads the keys over
// twice the shards when they hold twice the keys they were sized for.
func (s *shardMap[V]) set(k string, v V, gen uint64) {
	m := s.mut(k, gen)
	if _, ok := m[k]; !ok {
		s.n++
	}
	m[k] = v
	if s.n > unsharded && s.n > 2*shardKeys*(int(s.mask)+1) {
		g := makeShardMap[V](s.n, gen)
		for _, p := range s.pages {
			for _, sh := range p.shards {
				for k, v := range sh {
					g.shard(spreadString(k) & g.mask)[k] = v
				}
			}
		}
		g.n = s.n
		*s = g
	}
}

// del removes k, in the shards gen owns.
func (s *shardMap[V]) del(k string, gen uint64) {
	if _, ok := s.lookup(k); !ok {
		return
	}
	delete(s.mut(k, gen), k)
	s.n--
}

// pick returns the shard of key k among mask+1.
func pick(k []byte, mask uint32) uint32 {
	if mask == 0 {
		return 0
	}
	return spreadBytes(k) & mask
}

// spreadBytes picks a key's shard: a multiplicative hash of all its
// bytes, eight at a time (the keys of a large configuration often differ
// in a few digits anywhere), cheaper than the map's own hash.
// spreadString is the same for a string.
func spreadBytes(k []byte) uint32 {
	n := len(k)
	h := uint64(n) * 0x9e3779b97f4a7c15
	var tail uint64
	switch {
	case n > 8:
		for w := k; len(w) > 8; w = w[8:] {
			h = (h ^ binary.LittleEndian.Uint64(w)) * 0xff51afd7ed558ccd
		}
		tail = binary.LittleEndian.Uint64(k[n-8:])
	case n >= 4:
		tail = uint64(binary.LittleEndian.Uint32(k)) | uint64(binary.LittleEndian.Uint32(k[n-4:]))<<32
	case n > 0:
		tail = uint64(k[0]) | uint64(k[n>>1])<<8 | uint64(k[n-1])<<16
	}
	h = (h ^ tail) * 0xff51afd7ed558ccd
	h = (h ^ h>>32) * 0xc4ceb9fe1a85ec53
	return uint32(h >> 32)
}
func spreadString(k string) uint32 {
	var buf [64]byte
	if len(k) <= len(buf) {
		return spreadBytes(append(buf[:0], k...))
	}
	return spreadBytes([]byte(k))
}
