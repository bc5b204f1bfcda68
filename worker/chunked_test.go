package worker

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
)

// TestChunkedAsFlat builds lists one from another at random, as compile
// builds a snapshot's routes from the served one's (elements replaced,
// inserted, deleted, appended, the list cut short; runs of the list before
// taken over with addFrom, at their places or moved), and checks each
// against the flat list it stands for, that no build wrote a chunk of the
// list it was built from, and that a build shares every chunk it did not
// change: one allocates no more chunks than the chunks its changes fall in.
func TestChunkedAsFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 50))
	serial := 0
	fresh := func() int { serial++; return serial }
	var model []int
	for range 3*chunkLen + 17 {
		model = append(model, fresh())
	}
	cur := chunkedOf(model)
	for step := range 400 {
		if got := cur.flat(); !slices.Equal(got, model) {
			t.Fatalf("step %d: list differs from its flat form", step)
		}
		before := cur.flat()
		next := slices.Clone(model)
		touched := map[int]bool{} // chunks a change in place falls in
		moved := false
		for range 1 + rng.IntN(4) {
			switch op := rng.IntN(10); {
			case op < 5 && len(next) > 0:
				i := rng.IntN(len(next))
				next[i] = fresh()
				touched[i>>chunkBits] = true
			case op < 7:
				next = append(next, fresh())
				touched[(len(next)-1)>>chunkBits] = true
			case op < 8 && len(next) > 1:
				i := rng.IntN(len(next))
				next = slices.Delete(next, i, i+1)
				moved = true
			case op < 9:
				i := rng.IntN(len(next) + 1)
				next = slices.Insert(next, i, fresh())
				moved = true
			case len(next) > 1:
				next = next[:rng.IntN(len(next))]
				touched[len(next)>>chunkBits] = true
			}
		}
		// Build next from cur as compile does: the elements that are
		// cur's at some place taken over with addFrom in runs, the
		// others added.
		at := map[int]int{}
		for i, v := range model {
			at[v] = i
		}
		b := chunkBuilder[int]{prev: &cur}
		b.grow(len(next))
		for i := 0; i < len(next); {
			j, ok := at[next[i]]
			if !ok || rng.IntN(4) == 0 {
				b.add(next[i])
				i++
				continue
			}
			k := 1
			for i+k < len(next) && j+k < len(model) && next[i+k] == model[j+k] {
				k++
			}
			b.addFrom(&cur, j, k)
			i += k
		}
		built := b.done()
		if got := cur.flat(); !slices.Equal(got, before) {
			t.Fatalf("step %d: the build wrote the list it was built from", step)
		}
		if got := built.flat(); !slices.Equal(got, next) {
			t.Fatalf("step %d: built %v, want %v", step, got, next)
		}
		if !moved {
			owned := 0
			for ci, ch := range built.chunks {
				if ci >= len(cur.chunks) || ch != cur.chunks[ci] {
					owned++
				}
			}
			// A list cut short within a chunk of cur copies that chunk.
			if owned > len(touched)+1 {
				t.Fatalf("step %d: %d chunks of its own for changes in %d", step, owned, len(touched))
			}
		}
		cur, model = built, next
	}
}

// TestChunkedWriterAsFlat writes lists derived one from another at
// random, as updateRouter writes a snapshot's slots, and checks each
// against the flat list it stands for and that the list derived from was
// not written.
func TestChunkedWriterAsFlat(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 41))
	var model []int
	for i := range 2*chunkLen + 3 {
		model = append(model, i)
	}
	cur := chunkedOf(model)
	for step := range 300 {
		before := cur.flat()
		next := slices.Clone(model)
		w := cur.derive()
		for range 1 + rng.IntN(6) {
			if rng.IntN(3) == 0 || len(next) == 0 {
				v := rng.Int()
				next = append(next, v)
				w.add(v)
				continue
			}
			i, v := rng.IntN(len(next)), rng.Int()
			next[i] = v
			w.set(i, v)
		}
		if got := cur.flat(); !slices.Equal(got, before) {
			t.Fatalf("step %d: the writer wrote the list it was derived from", step)
		}
		if got := w.out.flat(); !slices.Equal(got, next) || w.len() != len(next) {
			t.Fatalf("step %d: wrote %v, want %v", step, got, next)
		}
		for i := range next {
			if w.out.at(i) != next[i] {
				t.Fatalf("step %d: at(%d) = %d, want %d", step, i, w.out.at(i), next[i])
			}
		}
		cur, model = w.out, next
	}
}

// TestCompileChangeSharesChunks: a build that replaces one route of
// 5 000 in place shares with the served snapshot every chunk of its
// routes, slots, places and Spec list but the one the route lies in (its
// place, the same slot and Order again, is shared too), and serves the
// new route.
func TestCompileChangeSharesChunks(t *testing.T) {
	ps := pluginSet{env: plugins.NewLocalEnv()}
	s := &spec.Spec{}
	for i := range 5000 {
		s.Routes = append(s.Routes, pluginRoute(t, i, "a"))
	}
	prev, err := compile(s, router.HostURI, upstreamEnv{}, ps, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const changed = 2600
	next := &spec.Spec{Routes: slices.Clone(s.Routes)}
	next.Routes[changed] = pluginRoute(t, changed, "b")
	snap, err := compile(next, router.HostURI, upstreamEnv{}, ps, prev, nil)
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, own []int) {
		if len(own) > 1 || len(own) == 1 && own[0] != changed>>chunkBits {
			t.Errorf("%s: chunks %v of its own, want at most %d", name, own, changed>>chunkBits)
		}
	}
	check("routes", newChunks(&prev.routes, &snap.routes))
	check("slots", newChunks(&prev.slots, &snap.slots))
	check("place", newChunks(&prev.place, &snap.place))
	check("specRoutes", newChunks(&prev.specRoutes, &snap.specRoutes))
	req := &router.Request{Method: router.ParseMethod([]byte("GET")), Host: []byte("x"), Path: fmt.Appendf(nil, "/bulk/%d", changed)}
	if i, ok := snap.router.Match(req); !ok || snap.slots.at(i).from.route != next.Routes[changed] {
		t.Errorf("/bulk/%d is not routed to the new route", changed)
	}
}

// newChunks returns the indexes of b's chunks that a does not have there.
func newChunks[T comparable](a, b *chunked[T]) []int {
	var own []int
	for ci, ch := range b.chunks {
		if ci >= len(a.chunks) || a.chunks[ci] != ch {
			own = append(own, ci)
		}
	}
	return own
}

// TestSamePointers: samePointers counts the elements a list of pointers
// has in common with a chunked list from a place on, across chunks, as
// comparing them one by one does: lists that differ at one element (at a
// chunk's start or end, or within), or at none.
func TestSamePointers(t *testing.T) {
	objs := make([]int, 4*chunkLen)
	var flat []*int
	for i := range objs {
		flat = append(flat, &objs[i])
	}
	c := chunkedOf(flat)
	other := new(int)
	rng := rand.New(rand.NewPCG(41, 51))
	for step := range 2000 {
		i := rng.IntN(len(flat))
		n := rng.IntN(len(flat) - i + 1)
		s := slices.Clone(flat[i : i+n])
		if n > 0 && step%4 != 0 {
			at := rng.IntN(n)
			switch step % 4 {
			case 1: // at a chunk's first element, where there is one
				if k := (i+at)&^chunkMask - i; k >= 0 && k < n {
					at = k
				}
			case 2: // at a chunk's last
				if k := (i + at) | chunkMask - i; k < n {
					at = k
				}
			}
			s[at] = other
		}
		want := 0
		for want < n && s[want] == c.at(i+want) {
			want++
		}
		if got := samePointers(&c, i, s); got != want {
			t.Fatalf("step %d: %d of %d from %d the same, want %d", step, got, n, i, want)
		}
	}
}
