//go:build !race

package batch

import (
	"testing"
	"time"
)

// TestAllocs: Push allocates nothing once the buffers have grown, whether
// it takes the entry or drops it.
func TestAllocs(t *testing.T) {
	cfg := Defaults
	cfg.BatchMaxSize = 1
	const n = 512
	p, err := New(cfg, func(e [][]byte) (int, error) { return len(e), nil }, n, quiet)
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	entry := []byte(`{"route_id":"1","status":200}`)
	for range 2 * n { // every buffer grown
		p.Push(entry)
		for len(p.free) < n/2 {
			time.Sleep(time.Millisecond)
		}
	}
	if n := testing.AllocsPerRun(200, func() { p.Push(entry) }); n != 0 {
		t.Fatalf("%v allocations per Push", n)
	}
}
