package worker

import (
	"maps"
	"math/rand/v2"
	"testing"
)

// TestLayeredAsMap: random sets and deletes made on maps each derived from
// the one before, compared with plain maps after each step; every earlier
// map still holds what it held when the next was derived from it (a served
// snapshot's maps never change), through the merges of over into base.
func TestLayeredAsMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(41, 7))
	var m *layered[int, int]
	var olds []*layered[int, int]
	var wants []map[int]int
	want := map[int]int{}
	for step := range 400 {
		m = m.derive()
		for range 1 + rng.IntN(40) {
			k := rng.IntN(600)
			if rng.IntN(3) == 0 {
				m.del(k)
				delete(want, k)
			} else {
				m.set(k, step)
				want[k] = step
			}
		}
		got := map[int]int{}
		for k, v := range m.all {
			if _, dup := got[k]; dup {
				t.Fatalf("step %d: all yields %d twice", step, k)
			}
			got[k] = v
		}
		if !maps.Equal(got, want) || m.len() != len(want) {
			t.Fatalf("step %d: %d keys, len %d, want %d", step, len(got), m.len(), len(want))
		}
		for k := range 600 {
			v, ok := m.get(k)
			if w, wok := want[k]; ok != wok || v != w {
				t.Fatalf("step %d: get(%d) = %d, %v, want %d, %v", step, k, v, ok, w, wok)
			}
		}
		olds, wants = append(olds, m), append(wants, maps.Clone(want))
	}
	for i, o := range olds {
		got := maps.Collect(o.all)
		if !maps.Equal(got, wants[i]) {
			t.Fatalf("the map of step %d changed after the maps derived from it", i)
		}
	}
	if got := maps.Collect((*layered[int, int])(nil).all); len(got) != 0 {
		t.Fatal("a nil map yields entries")
	}
}
