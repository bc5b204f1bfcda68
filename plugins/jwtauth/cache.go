package jwtauth

import (
	"encoding/binary"
	"hash/maphash"

	"coregate/plugins"
)

// The token cache's size: cacheSets sets of cacheWays tokens, 2 048 in
// all, the worker's (Envoy's jwt_authn keeps 100 per provider by default,
// jwt_cache_config), and the longest token it keeps, in bytes: a 2048-bit
// RS256 token with a few claims is some 600, an HS256 one some 200.
const (
	cacheSets     = 1024
	cacheWays     = 2
	cacheMaxToken = 2048
)

// tokenCache is the tokens that verified on a worker, whichever route's
// instance verified them: for each, what the verification depended on
// and found (the key claim's name, the key, the consumer, the credential
// object, the credential) and the token's exp and nbf, so that a token
// seen again, on that route or another, is neither decoded, scanned nor
// its signature computed again, which is most of what a request costs
// jwt-auth with HS256: under valgrind, a request with the token in the
// header takes 15 400 instructions verified (BenchmarkVerify/HS256),
// 2 800 from the cache (BenchmarkCacheHit/HS256), some 1 300 of each in
// the test's Ctx. Its exp and nbf are checked against the clock on every
// use, with the using instance's claims_to_verify, as a verification
// checks them.
//
// One cache serves all the worker's instances (Env.Loop; an instance
// built without one has its own), so that its memory is the worker's,
// not the routes': a worker of thousands of jwt-auth routes holds one
// table, and a client's token verified on one route is found on the
// others. The entry is the instance's only when the instance's own
// verification would come out the same, which depends on the token's
// bytes, the key claim's name (key_claim_name), the instance's consumers
// and the clock, nothing else of its configuration (the header, query
// and cookie names and hide_credentials say where a token is, not
// whether it verifies; claims_to_verify is applied at each use): a hit
// needs the bytes and the claim's name to be the entry's, and the
// instance's consumers to find, for the entry's key, the very consumer
// and credential (by pointer) that the verification found. Consumers
// that changed are new objects (the worker builds the consumer index and
// the routes anew), so an entry verified against the old ones never
// matches the new ones: a cached token can never outlive its credential.
// An entry holds its credential and consumer, so neither pointer can be
// freed and reused while the entry lives.
//
// A token is found by its exact bytes: a hash of them, seeded per cache
// (hash/maphash) so that a client cannot aim its tokens at one set, picks
// the set, and a token matches only if its bytes are the entry's,
// compared in constant time (sameBytes), as the uncached path compares a
// MAC: a hash collision never authenticates, and the time of a refusal
// tells nothing of a cached token's signature.
//
// The table is allocated with the worker's first verified token (a
// worker that sees no valid token costs 32 bytes more, the tokenCache;
// the table is 237 568 bytes, 232 KiB: 1 024 sets of two 112-byte
// entries and their lru byte, unsafe.Sizeof), and each entry's buffer
// with the first token that lands in it, the token and its key rounded
// up to 128 bytes (256 for an HS256 token of 130: 512 KiB more once all
// 2 048 entries are taken; 640 for an RS256 token of 600, 1.25 MiB),
// grown only for a longer one: once its entries have held tokens as long
// as those that come, a hit or a miss allocates nothing. Whatever the
// number of routes, a worker's cache is at most 232 KiB and 2 048
// buffers of 4 KiB (a token of cacheMaxToken and its key). Measured with
// runtime.MemStats (TestCacheMemory): a thousand routes, a token verified
// on each, hold 2.8 MB in all, 2.3 KB a route and the one table and its
// thousand buffers; with a cache each, as when the cache was the
// instance's (then of 64 sets), a route held a 232 KiB table more.
//
// The cache is used by the worker's one event loop only (the worker is a
// process of one gnet loop, WithNumEventLoop(1), and only that loop runs
// the instances' Rewrite; Build only takes the cache's pointer, under
// LoopLocal's lock): no lock.
type tokenCache struct {
	seed         maphash.Seed
	sets         *[cacheSets]cacheSet // nil until a token verifies
	hits, misses uint64               // lookups that found a token and that did not
}

// cacheSet is the ways of one set; lru is the way used least recently.
type cacheSet struct {
	ways [cacheWays]cacheEntry
	lru  uint8
}

// cacheEntry is one verified token. buf holds the token's bytes, its
// first ntok, then its key claim (unescaped), read by the claim named
// claim: tok and key are slices of it, valid until the entry takes
// another token; hash is the token's.
type cacheEntry struct {
	buf      []byte
	claim    string
	hash     uint64
	consumer *plugins.Consumer
	credID   string
	cr       *credential
	times    times
	ntok     uint16
	live     bool
}

func (e *cacheEntry) tok() []byte { return e.buf[:e.ntok] }
func (e *cacheEntry) key() []byte { return e.buf[e.ntok:] }

func newTokenCache() *tokenCache { return &tokenCache{seed: maphash.MakeSeed()} }

// hash is tok's hash, which picks its set and is kept with it.
func (c *tokenCache) hash(tok []byte) uint64 { return maphash.Bytes(c.seed, tok) }

// get returns the entry of tok, whose hash is h, its key read by the
// claim named claim; nil when the cache does not have it. An entry of
// another hash is passed over without reading its token, so that a miss
// costs no comparison (some 450 instructions a request with two 130-byte
// tokens in the set); the hash's equality tells nothing of a cached
// token's bytes that a client could use. An entry of the same token read
// by another claim's name (another route's key_claim_name) is not tok's
// for this caller: its key may name another consumer.
func (c *tokenCache) get(h uint64, tok []byte, claim string) *cacheEntry {
	if c.sets == nil {
		c.misses++
		return nil
	}
	s := &c.sets[h&(cacheSets-1)]
	for i := range s.ways {
		e := &s.ways[i]
		if e.live && e.hash == h && int(e.ntok) == len(tok) && e.claim == claim && sameBytes(e.buf[:e.ntok], tok) {
			s.lru = uint8(1 - i)
			c.hits++
			return e
		}
	}
	c.misses++
	return nil
}

// put keeps tok, whose hash is h, which verified as t says, its key read
// by the claim named claim, found f with credential cr: in a free way of
// its set, else in place of the one used least recently. A token longer
// than cacheMaxToken is not kept; the table is made with the first token
// kept.
func (c *tokenCache) put(h uint64, tok []byte, claim string, t *token, f plugins.Found, cr *credential) {
	if len(tok) > cacheMaxToken {
		return
	}
	if c.sets == nil {
		c.sets = new([cacheSets]cacheSet)
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
	e.ntok, e.claim, e.hash = uint16(len(tok)), claim, h
	e.consumer, e.credID, e.cr, e.times, e.live = f.Consumer, f.CredentialID, cr, t.times, true
	s.lru = uint8(1 - i)
}

// drop forgets e.
func (e *cacheEntry) drop() {
	e.live = false
	e.consumer, e.credID, e.cr = nil, "", nil
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
