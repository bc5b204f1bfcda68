//go:build !race

package freelist

import "testing"

// TestAllocs: taking and giving back a value allocates nothing once the
// stack has grown to its use.
func TestAllocs(t *testing.T) {
	var l List[int]
	l.Put(new(int))
	if n := testing.AllocsPerRun(1000, func() { l.Put(l.Get()) }); n != 0 {
		t.Fatalf("%v allocations per Get and Put, want 0", n)
	}
}
