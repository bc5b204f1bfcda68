package control

import (
	"math/rand/v2"
	"testing"
)

// TestHashSet puts and removes random hashes, many of them on the same
// few home slots (long probe runs that wrap around the array's end, and
// removals inside them), and checks after each step that the set holds
// exactly what a map of the same steps does.
func TestHashSet(t *testing.T) {
	for _, spread := range []uint64{3, 7, 1 << 16} {
		rng := rand.New(rand.NewPCG(1, spread))
		var s hashSet
		s.init(4)
		want := map[uint64]bool{}
		key := func() uint64 {
			// Few distinct low bits (home slots), distinct high ones;
			// 0 and 1 among them (one key to the set).
			k := rng.Uint64N(spread) | rng.Uint64N(40)<<32
			if rng.IntN(50) == 0 {
				k = rng.Uint64N(2)
			}
			return k
		}
		for step := range 20000 {
			k := key()
			if rng.IntN(3) == 0 {
				s.remove(k)
				delete(want, keyOf(k))
			} else {
				if got, was := s.add(k), want[keyOf(k)]; got == was {
					t.Fatalf("spread %d step %d: add(%#x) = %v, set had it: %v", spread, step, k, got, was)
				}
				want[keyOf(k)] = true
			}
			if s.n != len(want) {
				t.Fatalf("spread %d step %d: %d hashes, want %d", spread, step, s.n, len(want))
			}
			if step%97 == 0 {
				for k := range want {
					if !s.has(k) {
						t.Fatalf("spread %d step %d: %#x lost", spread, step, k)
					}
				}
				for range 50 {
					if k := key(); s.has(k) != want[keyOf(k)] {
						t.Fatalf("spread %d step %d: has(%#x) = %v", spread, step, k, s.has(k))
					}
				}
			}
		}
		if free := len(s.slots) - s.n; free*4 < len(s.slots) {
			t.Errorf("spread %d: %d of %d slots free, want a quarter", spread, free, len(s.slots))
		}
	}
}
