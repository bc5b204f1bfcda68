package worker

import (
	"testing"

	"coregate/worker/shm"
)

// healthBalancer is a balancer over three nodes of weight 1 whose states
// are slots of a real health region.
func healthBalancer(t testing.TB) (*balancer, []*shm.HealthNode) {
	t.Helper()
	seg, err := shm.CreateHealth(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seg.Close() })
	var nodes []*node
	var hs []*shm.HealthNode
	for _, addr := range []string{"10.0.0.1:80", "10.0.0.2:80", "10.0.0.3:80"} {
		h := seg.Node(shm.HealthKey("/apisix/upstreams/1", addr))
		nodes = append(nodes, &node{addr: addr, weight: 1, health: h})
		hs = append(hs, h)
	}
	return newBalancer(nodes), hs
}

// TestBalancerSkipsUnhealthy: an unhealthy node is never picked while
// another is healthy, is picked again once healthy, and when every node is
// unhealthy all are tried, as APISIX.
func TestBalancerSkipsUnhealthy(t *testing.T) {
	b, hs := healthBalancer(t)
	if !hs[1].Report(shm.TCPFailure, 1) {
		t.Fatal("node not marked")
	}
	seen := map[int]int{}
	for range 30 {
		seen[b.pick(0, 0, 0)]++
	}
	if seen[1] != 0 || seen[0] != 15 || seen[2] != 15 {
		t.Fatalf("picks with node 1 unhealthy: %v", seen)
	}
	// A retry after both healthy nodes failed finds none: node 1 is not
	// given the request.
	var tried triedSet
	tried.add(0)
	tried.add(2)
	if i := b.pick(tried, 0, 0); i != -1 {
		t.Fatalf("picked %d once the healthy nodes were tried", i)
	}
	hs[0].Report(shm.TCPFailure, 1)
	hs[2].Report(shm.TCPFailure, 1)
	seen = map[int]int{}
	for range 30 {
		seen[b.pick(0, 0, 0)]++
	}
	if seen[0] != 10 || seen[1] != 10 || seen[2] != 10 {
		t.Fatalf("picks with every node unhealthy: %v", seen)
	}
	for _, h := range hs {
		h.Report(shm.Success, 1)
	}
	seen = map[int]int{}
	for range 30 {
		seen[b.pick(0, 0, 0)]++
	}
	if seen[0] != 10 || seen[1] != 10 || seen[2] != 10 {
		t.Fatalf("picks with every node healthy again: %v", seen)
	}
}
