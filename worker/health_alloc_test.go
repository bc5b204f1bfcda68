//go:build !race

package worker

import (
	"testing"

	"coregate/admin/spec"
	"coregate/worker/shm"
)

// TestAllocPickHealth: picking among checked nodes, one unhealthy, and
// reporting passive results allocate nothing.
func TestAllocPickHealth(t *testing.T) {
	b, hs := healthBalancer(t)
	hs[1].Report(shm.TCPFailure, 1)
	up := &upstream{bal: b, nodes: b.nodes}
	up.passive = &spec.PassiveCheck{Type: "http",
		Healthy:   spec.Thresholds{HTTPStatuses: []int{200}, Successes: 5},
		Unhealthy: spec.Thresholds{HTTPStatuses: []int{500}, HTTPFailures: 1000, TCPFailures: 1000, Timeouts: 1000}}
	if n := testing.AllocsPerRun(1000, func() {
		i := b.pick(0, 0, 0)
		reportPassive(up, b.nodes[i], shm.Success, 200)
		reportPassive(up, b.nodes[i], shm.HTTPFailure, 500)
		reportPassive(up, b.nodes[i], shm.Timeout, 0)
	}); n != 0 {
		t.Fatalf("pick allocates %.1f times", n)
	}
}
