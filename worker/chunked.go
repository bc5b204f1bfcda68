package worker

import (
	"bytes"

	"coregate/internal/ptrlist"
)

// chunked is a list that a build derives from the previous build's
// without copying it: fixed-size chunks of chunkLen elements, each shared
// by every list that has the same elements at the same places, so that a
// build that changes one route of 50 000 copies the one chunk that route
// lies in and the chunk index (about 2 kB and 1.6 kB of pointers), where
// a flat list was copied whole (400 kB of pointers for the routes, 800 kB
// for their places). A snapshot's routes, their places and the Spec's
// list they were built from are kept so (Snapshot.routes, place,
// specRoutes), and so are its slots, which the request path reads.
//
// A chunk, once in a list that a snapshot holds, is never written: a
// request in flight may hold the snapshot. A chunkBuilder writes only the
// chunks it allocated itself; the slots' derivation (chunked.own) copies
// a chunk before its first write. The last chunk may hold elements past
// n, of an earlier list that shared it; they are never read.
type chunked[T comparable] struct {
	chunks []*[chunkLen]T
	n      int
}

const (
	chunkBits = 8
	chunkLen  = 1 << chunkBits
	chunkMask = chunkLen - 1
)

// at returns element i. On the request path (Snapshot.slots): one more
// load than a flat list's, the chunk's index masked so that the array
// needs no bounds check.
func (c *chunked[T]) at(i int) T {
	return c.chunks[i>>chunkBits][i&chunkMask]
}

// len is the number of elements.
func (c *chunked[T]) len() int { return c.n }

// all yields the elements in order.
func (c *chunked[T]) all(yield func(int, T) bool) {
	for ci, ch := range c.chunks {
		base := ci << chunkBits
		for k := range min(chunkLen, c.n-base) {
			if !yield(base+k, ch[k]) {
				return
			}
		}
	}
}

// flat returns the elements as a slice, for tests and rare whole-list
// readers: it allocates the whole list.
func (c *chunked[T]) flat() []T {
	out := make([]T, 0, c.n)
	for _, v := range c.all {
		out = append(out, v)
	}
	return out
}

// samePointers returns how many of s's elements, from its first, c has
// from its element i on, at the same places: at most len(s), and c has
// at least i+len(s) elements. A build compares its Spec's routes with
// the served snapshot's (Snapshot.specRoutes) this way, a chunk's part at
// a time, as bytes (memequal), where comparing them one by one was most
// of the CPU of a route added at 50 000 (compile).
func samePointers[P any](c *chunked[*P], i int, s []*P) int {
	n := 0
	for n < len(s) {
		lo := (i + n) & chunkMask
		part := c.chunks[(i+n)>>chunkBits][lo:min(chunkLen, lo+len(s)-n)]
		if !bytes.Equal(ptrlist.Bytes(part), ptrlist.Bytes(s[n:n+len(part)])) {
			for k := range part {
				if part[k] != s[n+k] {
					return n + k
				}
			}
		}
		n += len(part)
	}
	return n
}

// chunkedOf returns a list of the elements of s, in chunks of its own.
func chunkedOf[T comparable](s []T) chunked[T] {
	var b chunkBuilder[T]
	b.grow(len(s))
	for _, v := range s {
		b.add(v)
	}
	return b.done()
}

// chunkBuilder makes a list element by element from prev (which it never
// writes), sharing each of prev's chunks whose elements the new list has
// at the same places: a one-route change allocates one chunk; a route
// created last, the last chunk. A list whose elements move (a route
// deleted before others) shares nothing past the move.
type chunkBuilder[T comparable] struct {
	prev *chunked[T]
	out  chunked[T]
	// cur is the chunk being filled when it is the builder's own; nil
	// while the elements added to it are those prev has there (its chunk
	// is prev's, shared).
	cur *[chunkLen]T
}

// grow makes room in the chunk index for n elements in all.
func (b *chunkBuilder[T]) grow(n int) {
	if c := (n + chunkMask) >> chunkBits; c > cap(b.out.chunks) {
		chunks := make([]*[chunkLen]T, len(b.out.chunks), c)
		copy(chunks, b.out.chunks)
		b.out.chunks = chunks
	}
}

// prevHas reports whether prev has element p.
func (b *chunkBuilder[T]) prevHas(p int) bool { return b.prev != nil && p < b.prev.n }

// add appends v.
func (b *chunkBuilder[T]) add(v T) {
	p := b.out.n
	ci, k := p>>chunkBits, p&chunkMask
	if k == 0 {
		b.cur = nil
		var pc *[chunkLen]T
		if b.prevHas(p) {
			pc = b.prev.chunks[ci]
		}
		b.out.chunks = append(b.out.chunks, pc)
	}
	if b.cur == nil {
		pc := b.out.chunks[ci]
		if pc != nil && b.prevHas(p) && pc[k] == v {
			b.out.n++
			return
		}
		nc := new([chunkLen]T)
		if pc != nil {
			copy(nc[:k], pc[:k])
		}
		b.out.chunks[ci], b.cur = nc, nc
	}
	b.cur[k] = v
	b.out.n++
}

// addFrom appends src's elements j to j+n-1. When src is prev and they
// fall at the places they have there, the chunks prev has them in are
// taken whole, without reading them.
func (b *chunkBuilder[T]) addFrom(src *chunked[T], j, n int) {
	for n > 0 {
		p := b.out.n
		if src == b.prev && j == p && (p&chunkMask == 0 || b.cur == nil) {
			if p&chunkMask == 0 && n >= chunkLen {
				// whole chunks, in one copy of their pointers
				ci, c := p>>chunkBits, n>>chunkBits
				b.cur = nil
				b.out.chunks = append(b.out.chunks, b.prev.chunks[ci:ci+c]...)
				b.out.n += c << chunkBits
				j, n = j+c<<chunkBits, n-c<<chunkBits
				continue
			}
			if p&chunkMask == 0 {
				b.cur = nil
				b.out.chunks = append(b.out.chunks, b.prev.chunks[p>>chunkBits])
			}
			step := min(n, chunkLen-p&chunkMask)
			b.out.n += step
			j, n = j+step, n-step
			continue
		}
		b.add(src.at(j))
		j, n = j+1, n-1
	}
}

// done returns the list made. A last chunk shared with prev that holds
// more of prev's elements than the list has is copied, so that the list
// keeps none of them alive.
func (b *chunkBuilder[T]) done() chunked[T] {
	out := b.out
	if k := out.n & chunkMask; k != 0 && b.cur == nil && b.prevHas(out.n) {
		nc := new([chunkLen]T)
		copy(nc[:k], out.chunks[len(out.chunks)-1][:k])
		out.chunks[len(out.chunks)-1] = nc
	}
	b.out, b.cur = chunked[T]{}, nil
	return out
}

// chunkedWriter is a list derived from another (base, never written) by
// writes in place and appends: a chunk of base is copied before its
// first write, and so is the chunk index, once.
type chunkedWriter[T comparable] struct {
	out chunked[T]
	// owned are the chunks this writer allocated, by index.
	owned map[int]bool
}

// derive returns a writer over c's elements.
func (c *chunked[T]) derive() *chunkedWriter[T] {
	chunks := make([]*[chunkLen]T, len(c.chunks), len(c.chunks)+1)
	copy(chunks, c.chunks)
	return &chunkedWriter[T]{out: chunked[T]{chunks: chunks, n: c.n}, owned: map[int]bool{}}
}

// own returns chunk ci, the writer's own.
func (w *chunkedWriter[T]) own(ci int) *[chunkLen]T {
	if !w.owned[ci] {
		nc := new([chunkLen]T)
		if pc := w.out.chunks[ci]; pc != nil {
			*nc = *pc
		}
		w.out.chunks[ci] = nc
		w.owned[ci] = true
	}
	return w.out.chunks[ci]
}

// set puts v at i (< len).
func (w *chunkedWriter[T]) set(i int, v T) {
	w.own(i >> chunkBits)[i&chunkMask] = v
}

// add appends v.
func (w *chunkedWriter[T]) add(v T) {
	p := w.out.n
	if p&chunkMask == 0 {
		w.out.chunks = append(w.out.chunks, nil)
	}
	w.out.n++
	w.set(p, v)
}

// len is the number of elements.
func (w *chunkedWriter[T]) len() int { return w.out.n }
