package shm

import (
	"crypto/sha256"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// Layout constants.
const (
	// SlotBytes is the size of one slot: two cache lines' worth of
	// counters per 128 bytes of segment.
	SlotBytes = 128
	// KeyBytes is the longest key a slot holds as is; a longer key is
	// held as its SHA-256 digest.
	KeyBytes = keyWords * 8
	// MaxProbe bounds a probe chain: a key whose MaxProbe slots from its
	// hash are all live has no counter (the table is full for it). Linear
	// probing makes runs of live slots long as the table fills: with this
	// bound a key finds room until about 85 % of the slots are live, so a
	// table should have a fifth more slots than the keys live at once.
	MaxProbe = 1024
	// DefaultSlots is the table size when none is configured: 65536
	// counters, 8 MiB.
	DefaultSlots = 1 << 16
	// MaxSlots bounds the configured size (4 GiB of segment).
	MaxSlots = 1 << 25
	// StuckAfter is how long, in seconds, a slot may stay busy before any
	// process frees it: its claimer died (or stopped) in the middle of an
	// insertion, which takes nanoseconds when it runs.
	StuckAfter = 10

	keyWords   = 11
	digestFlag = 1 << 63
	// maxAttempts bounds the restarts of one lookup (each after a lost
	// race); maxWait bounds one wait for another process's busy slot
	// (the owner was preempted in the middle of an insertion, which takes
	// nanoseconds when it runs, or died there).
	maxAttempts = 8
	maxWait     = 2 * time.Millisecond
)

// The control word: tag<<32 | aux<<2 | state.
const (
	stEmpty = 0
	stBusy  = 1
	stReady = 2
	stFree  = 3
	auxMask = 1<<30 - 1
)

func ctlWord(tag uint32, aux uint64, st uint64) uint64 {
	return uint64(tag)<<32 | (aux&auxMask)<<2 | st
}

func tagOf(w uint64) uint32 { return uint32(w >> 32) }
func auxOf(w uint64) uint64 { return w >> 2 & auxMask }

func busyWord(tag uint32, now int64) uint64 { return ctlWord(tag, claimSecond(now), stBusy) }

// freeWord is the tombstone that replaces w, a step of generation on.
func freeWord(w uint64) uint64 { return ctlWord(0, auxOf(w)+1, stFree) }

func claimSecond(now int64) uint64 { return uint64(now/1e9) & auxMask }

// stuck says whether busy word w was claimed more than StuckAfter seconds
// before now. A claim second ahead of now (another process's clock) is not.
func stuck(w uint64, now int64) bool {
	d := (claimSecond(now) - auxOf(w)) & auxMask
	return d > StuckAfter && d < auxMask/2
}

// slot is one counter; every field is a word of the shared segment.
type slot struct {
	ctl     atomic.Uint64
	expires atomic.Int64
	count   atomic.Int64
	hash    atomic.Uint64
	klen    atomic.Uint64 // the key's length; digestFlag: key holds its digest
	key     [keyWords]atomic.Uint64
}

// header opens the segment.
type header struct {
	magic    atomic.Uint64
	version  atomic.Uint64
	slotSize atomic.Uint64
	slots    atomic.Uint64
	seed     atomic.Uint64
}

const (
	magic      = 0x636f_7265_6761_7465 // "coregate"
	version    = 1
	headerSize = 128 // the slots start on a cache line
)

// Table is the counter table over one mapping of a segment. It implements
// plugins.Counters.
type Table struct {
	seed  uint64
	mem   []byte
	slots []slot
	mask  uint64
	probe int
	close func() error
}

// Slots is the table's size.
func (t *Table) Slots() int { return len(t.slots) }

// key is a lookup key as a slot holds it, built on the caller's stack.
type key struct {
	h    uint64
	tag  uint32
	klen uint64
	n    int // words of w in use
	w    [keyWords]uint64
}

func (k *key) set(b []byte, seed uint64) {
	k.klen = uint64(len(b))
	src := b
	var d [sha256.Size]byte
	if len(b) > KeyBytes {
		d = sha256.Sum256(b)
		src = d[:]
		k.klen |= digestFlag
	}
	n := len(src) / 8
	for i := range n {
		k.w[i] = binary.LittleEndian.Uint64(src[i*8:])
	}
	k.n = n
	if tail := src[n*8:]; len(tail) > 0 {
		var x uint64
		for j, c := range tail {
			x |= uint64(c) << (8 * j)
		}
		k.w[n] = x
		k.n++
	}
	k.h = hashWords(k.w[:k.n], k.klen, seed)
	k.tag = uint32(k.h >> 32)
}

// hashWords hashes a key's words (a long key's digest) and length with
// the segment's seed: the same in every process that maps the segment,
// unknown to clients, whose keys cannot then be chosen to pile up on one
// probe chain.
func hashWords(w []uint64, klen, seed uint64) uint64 {
	h := seed ^ klen*0x9e3779b97f4a7c15
	for _, x := range w {
		h = (h ^ x) * 0xbf58476d1ce4e5b9
		h ^= h >> 31
	}
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}

// holds says whether s holds k (read with s's control word unchanged
// around it by the caller).
func (s *slot) holds(k *key) bool {
	if s.hash.Load() != k.h || s.klen.Load() != k.klen {
		return false
	}
	for i := range k.n {
		if s.key[i].Load() != k.w[i] {
			return false
		}
	}
	return true
}

// Counter implements plugins.Counters: the counter of key, valid until
// the returned expiry (Unix nanoseconds, the caller's clock). A new key,
// or one whose counter expired before now, gets a counter at zero that
// expires at expires. It returns nil when the key's probe chain has no
// free, empty or expired slot, when a slot the key may be in stays busy
// for maxWait (another process stopped or died in the middle of inserting
// it: StuckAfter later the slot is freed), or when it lost races
// maxAttempts times in a row. It does not allocate.
func (t *Table) Counter(b []byte, now, expires int64) (*atomic.Int64, int64) {
	var k key
	k.set(b, t.seed)
	for range maxAttempts {
		c, e, done := t.find(&k, now, expires)
		if done {
			return c, e
		}
	}
	return nil, 0
}

func (t *Table) at(k *key, i int) *slot {
	return &t.slots[(k.h+uint64(i))&t.mask]
}

// find is one lookup; done is false when it lost a race and must start
// again.
func (t *Table) find(k *key, now, expires int64) (c *atomic.Int64, e int64, done bool) {
	cand := -1
	var candW uint64
	for i := 0; i < t.probe; i++ {
		s := t.at(k, i)
		for again := 0; ; again++ {
			if again == 64 {
				return nil, 0, false
			}
			w := s.ctl.Load()
			switch w & 3 {
			case stEmpty:
				// The chain ends: k is not in the table.
				if cand >= 0 {
					return t.insert(k, cand, candW, now, expires)
				}
				return t.insert(k, i, w, now, expires)
			case stFree:
				if cand < 0 {
					cand, candW = i, w
				}
			case stBusy:
				if stuck(w, now) {
					s.ctl.CompareAndSwap(w, freeWord(w))
					continue
				}
				if tagOf(w) == k.tag {
					// Perhaps k, being inserted or reset: wait for it.
					if !waitChange(s, w) {
						return nil, 0, true // its owner is stopped or dead
					}
					continue
				}
			case stReady:
				if tagOf(w) == k.tag && s.holds(k) {
					e := s.expires.Load()
					if s.ctl.Load() != w {
						continue
					}
					if e >= now {
						return &s.count, e, true
					}
					// Expired: a new window for k, in place.
					b := busyWord(k.tag, now)
					if !s.ctl.CompareAndSwap(w, b) {
						continue
					}
					s.expires.Store(expires)
					s.count.Store(0)
					if !s.ctl.CompareAndSwap(b, ctlWord(k.tag, auxOf(w)+1, stReady)) {
						return nil, 0, false // freed as stuck meanwhile
					}
					return &s.count, expires, true
				}
				if cand < 0 && s.expires.Load() < now && s.ctl.Load() == w {
					cand, candW = i, w
				}
			}
			break
		}
	}
	if cand >= 0 {
		return t.insert(k, cand, candW, now, expires)
	}
	return nil, 0, true // full
}

// insert claims the i-th slot of k's chain, whose control word was w, for
// k.
func (t *Table) insert(k *key, i int, w uint64, now, expires int64) (*atomic.Int64, int64, bool) {
	s := t.at(k, i)
	b := busyWord(k.tag, now)
	if !s.ctl.CompareAndSwap(w, b) {
		return nil, 0, false
	}
	s.hash.Store(k.h)
	s.klen.Store(k.klen)
	for j := range k.n {
		s.key[j].Store(k.w[j])
	}
	s.expires.Store(expires)
	s.count.Store(0)
	if t.rival(k, i, now) {
		s.ctl.CompareAndSwap(b, freeWord(w))
		return nil, 0, false
	}
	if !s.ctl.CompareAndSwap(b, ctlWord(k.tag, auxOf(w)+1, stReady)) {
		return nil, 0, false // freed as stuck meanwhile
	}
	return &s.count, expires, true
}

// rival says whether the slot this process claimed for k, the mine-th of
// its chain, must be given up: k is ready elsewhere in the chain, or is
// being inserted earlier in it, or later in it and does not settle. Of two
// processes that claim two slots for one key at once, at least one sees
// the other's claim here (both claims precede both looks), so one gives
// up: the later in the chain at once, the earlier once the later is ready.
func (t *Table) rival(k *key, mine int, now int64) bool {
	for j := 0; j < t.probe; j++ {
		if j == mine {
			continue
		}
		s := t.at(k, j)
		for again := 0; ; again++ {
			if again == 64 {
				return true
			}
			w := s.ctl.Load()
			switch w & 3 {
			case stEmpty:
				return false
			case stReady:
				if tagOf(w) == k.tag && s.holds(k) && s.ctl.Load() == w {
					return true
				}
			case stBusy:
				if tagOf(w) == k.tag && !stuck(w, now) {
					if j < mine || !waitChange(s, w) {
						return true
					}
					continue
				}
			}
			break
		}
	}
	return false
}

// waitChange spins until s's control word is no longer w, giving up the
// CPU between rounds (the owner may be waiting for it); false when it
// stays w for maxWait (its owner is stopped or dead). It runs only when
// two processes touch one key's slot at the same nanoseconds, or when a
// process died inside an insertion (for StuckAfter).
func waitChange(s *slot, w uint64) bool {
	var start time.Time
	for i := 1; ; i++ {
		if s.ctl.Load() != w {
			return true
		}
		if i%64 == 0 {
			if start.IsZero() {
				start = time.Now()
			} else if time.Since(start) > maxWait {
				return false
			}
			osYield()
		}
	}
}

// Usage counts the slots: live counters (ready, not expired at now),
// expired ones, and busy ones.
func (t *Table) Usage(now int64) (live, expired, busy int) {
	for i := range t.slots {
		s := &t.slots[i]
		switch w := s.ctl.Load(); w & 3 {
		case stReady:
			if s.expires.Load() < now {
				expired++
			} else {
				live++
			}
		case stBusy:
			busy++
		}
	}
	return live, expired, busy
}
