package jwtauth

import (
	"encoding/binary"
	"hash/maphash"

	"coregate/plugins"
)

// The token cache's size: cacheSets sets of cacheWays tokens, 128 in all
// (Envoy's jwt_authn keeps 100 by default, jwt_cache_config), and the
// longest token it keeps, in bytes: a 2048-bit RS256 token with a few
// claims is some 600, an HS256 one some 200.
const (
	cacheSets     = 64
	cacheWays     = 2
	cacheMaxToken = 2048
)

// tokenCache is an instance's tokens that verified: for each, what a
// verification found (the consumer, the credential object, the
// credential) and the token's exp and nbf, so that a token seen again is
// neither decoded, scanned nor its signature computed again, which is
// most of what a request costs jwt-auth with HS256: under valgrind, a
// request with the token in the header takes 15 400 instructions verified
// (BenchmarkVerify/HS256), 2 800 from the cache (BenchmarkCacheHit/HS256),
// some 1 300 of each in the test's Ctx. Its exp and nbf are checked
// against the clock on every use, as a verification checks them.
//
// A token is found by its exact bytes: a hash of them, seeded per cache
// (hash/maphash) so that a client cannot aim its tokens at one set, picks
// the set, and a token matches only if its bytes are the entry's,
// compared in constant time (sameBytes), as the uncached path compares a
// MAC: a hash collision never authenticates, and the time of a refusal
// tells nothing of a cached token's signature.
//
// What a cached token authenticates as is the instance's, and the
// instance's consumers (Env.Consumers) are those of the snapshot it was
// built for: the worker builds every route anew when the consumers or the
// credentials change (compile takes a route over only when they did not),
// so a cache lives and dies with the consumer set its tokens were
// verified against. A hit looks the key up in the instance's consumers
// again all the same, and is refused unless it finds the very consumer
// and credential (by pointer) that the verification found: a cached token
// can never outlive its credential, even under a Consumers that changed.
//
// The cache is allocated with the instance's first verified token (a
// route that sees no valid token costs nothing more; its table is 21 KiB,
// 160 bytes an entry), and each entry's buffer with the first token that
// lands in it, the token and its key rounded up to 128 bytes (256 for an
// HS256 token of 130: 32 KiB more once all 128 entries are taken), grown
// only for a longer one: once its entries have held tokens as long as
// those that come, a hit or a miss allocates nothing. A cache is its instance's, used by
// its one event loop (the worker runs one gnet loop, WithNumEventLoop(1),
// and builds its own snapshot and instances): no lock.
type tokenCache struct {
	seed         maphash.Seed
	sets         [cacheSets]cacheSet
	hits, misses uint64 // lookups that found a token and that did not
}

// cacheSet is the ways of one set; lru is the way used least recently.
type cacheSet struct {
	ways [cacheWays]cacheEntry
	lru  uint8
}

// cacheEntry is one verified token. buf holds the token's bytes, then its
// key claim (unescaped): tok and key are slices of it, valid until the
// entry takes another token; hash is the token's.
type cacheEntry struct {
	buf      []byte
	tok, key []byte
	hash     uint64
	found    plugins.Found
	cr       *credential
	times    times
	live     bool
}

func newTokenCache() *tokenCache { return &tokenCache{seed: maphash.MakeSeed()} }

// hash is tok's hash, which picks its set and is kept with it.
func (c *tokenCache) hash(tok []byte) uint64 { return maphash.Bytes(c.seed, tok) }

// get returns the entry of tok, whose hash is h; nil when the cache does
// not have it. An entry of another hash is passed over without reading
// its token, so that a miss costs no comparison (some 450 instructions a
// request with two 130-byte tokens in the set); the hash's equality tells
// nothing of a cached token's bytes that a client could use.
func (c *tokenCache) get(h uint64, tok []byte) *cacheEntry {
	s := &c.sets[h&(cacheSets-1)]
	for i := range s.ways {
		e := &s.ways[i]
		if e.live && e.hash == h && len(e.tok) == len(tok) && sameBytes(e.tok, tok) {
			s.lru = uint8(1 - i)
			c.hits++
			return e
		}
	}
	c.misses++
	return nil
}

// put keeps tok, whose hash is h, which verified as t says, found f with
// credential cr: in a free way of its set, else in place of the one used
// least recently. A token longer than cacheMaxToken is not kept (the
// caller does not make a cache for one either).
func (c *tokenCache) put(h uint64, tok []byte, t *token, f plugins.Found, cr *credential) {
	if len(tok) > cacheMaxToken {
		return
	}
	s := &c.sets[h&(cacheSets-1)]
	i := int(s.lru)
	for j := range s.ways {
		if !s.ways[j].live {
			i = j
			break
		}
	}
	e := &s.ways[i]
	n := len(tok) + len(t.key)
	if cap(e.buf) < n {
		e.buf = make([]byte, 0, (n+127)&^127)
	}
	e.buf = append(append(e.buf[:0], tok...), t.key...)
	e.tok, e.key = e.buf[:len(tok)], e.buf[len(tok):n]
	e.hash, e.found, e.cr, e.times, e.live = h, f, cr, t.times, true
	s.lru = uint8(1 - i)
}

// drop forgets e.
func (e *cacheEntry) drop() {
	e.live = false
	e.found, e.cr = plugins.Found{}, nil
}

// sameBytes reports whether a and b are the same bytes, in a time that
// depends on their length only, eight bytes at a time: a request whose
// HS256 token (130 bytes) is taken from the cache costs 2 770
// instructions under valgrind (BenchmarkCacheHit/HS256) with it, 2 960
// with crypto/subtle.ConstantTimeCompare, a byte at a time, on the
// signature and bytes.Equal on the rest.
func sameBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	var v uint64
	n := len(a) &^ 7
	for i := 0; i < n; i += 8 {
		v |= binary.LittleEndian.Uint64(a[i:i+8]) ^ binary.LittleEndian.Uint64(b[i:i+8])
	}
	for i := n; i < len(a); i++ {
		v |= uint64(a[i] ^ b[i])
	}
	return v == 0
}
