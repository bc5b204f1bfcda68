//go:build !race

package plugins

import "testing"

// TestAllocCounterLookup: finding an existing counter, what limit-count
// does per request, allocates nothing.
func TestAllocCounterLookup(t *testing.T) {
	c := NewCounterTable(4)
	key := []byte("route:1:127.0.0.1")
	c.Counter(key, 0, 20)
	if n := testing.AllocsPerRun(100, func() { v, _ := c.Counter(key, 16, 20); v.Add(1) }); n != 0 {
		t.Fatalf("finding a counter allocates %.1f times", n)
	}
}
