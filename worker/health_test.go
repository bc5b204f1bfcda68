package worker

import (
	"fmt"
	"testing"

	"coregate/admin/spec"
	"coregate/worker/router"
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

// TestHealthAttachedAtBuild: the nodes of an upstream with checks get
// their slots of the health region, by the name the supervisor claims
// them under, whether the upstream is compiled by the first build or by
// one made from a snapshot that had none with checks (the names of the
// checked upstreams are listed at the first one compiled); the nodes of
// an upstream without checks get none.
func TestHealthAttachedAtBuild(t *testing.T) {
	seg, err := shm.CreateHealth(16)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = seg.Close() })
	h, err := shm.OpenHealth(seg.File())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = h.Close() })
	const checks = `"checks":{"active":{"http_path":"/","healthy":{"interval":1},"unhealthy":{"interval":1}}}`
	for _, key := range []string{shm.HealthKey("/apisix/upstreams/c1", "127.0.0.1:1981"), shm.HealthKey("/apisix/upstreams/c2", "127.0.0.1:1982")} {
		if seg.Node(key) == nil {
			t.Fatalf("no slot for %s", key)
		}
	}
	upstream := func(id string, port int, withChecks bool) *spec.Upstream {
		c := ""
		if withChecks {
			c = "," + checks
		}
		u, err := spec.DecodeUpstream(fmt.Appendf(nil, `{"id":%q,"nodes":{"127.0.0.1:%d":1}%s}`, id, port, c))
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	route := func(id, up string) *spec.Route {
		r, err := spec.DecodeRoute(fmt.Appendf(nil, `{"id":%q,"uri":"/%s","upstream_id":%q}`, id, id, up))
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ue := upstreamEnv{health: h}
	// health is whether the compiled upstream of u has its node's slot
	health := func(snap *Snapshot, u *spec.Upstream) bool {
		t.Helper()
		ref, ok := snap.upstreams.get(u)
		if !ok || len(ref.cu.nodes) != 1 {
			t.Fatalf("upstream %s not compiled", u.ID.String())
		}
		return ref.cu.nodes[0].health != nil
	}
	plain, c1 := upstream("p", 1980, false), upstream("c1", 1981, true)
	s1 := &spec.Spec{Upstreams: []*spec.Upstream{plain}, Routes: []*spec.Route{route("r1", "p")}}
	snap1, err := compile(s1, router.HostURI, ue, pluginSet{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if health(snap1, plain) {
		t.Error("the node of an upstream without checks has a health slot")
	}
	s2 := &spec.Spec{Upstreams: []*spec.Upstream{plain, c1}, Routes: []*spec.Route{route("r1", "p"), route("r2", "c1")}}
	snap2, err := compile(s2, router.HostURI, ue, pluginSet{}, snap1, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !health(snap2, c1) || health(snap2, plain) {
		t.Errorf("built from a snapshot with no checks: c1's node has a slot %v (want true), p's %v (want false)", health(snap2, c1), health(snap2, plain))
	}
	c2 := upstream("c2", 1982, true)
	s3 := &spec.Spec{Upstreams: []*spec.Upstream{plain, c1, c2}, Routes: []*spec.Route{route("r1", "p"), route("r2", "c1"), route("r3", "c2")}}
	snap3, err := compile(s3, router.HostURI, ue, pluginSet{}, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !health(snap3, c1) || !health(snap3, c2) {
		t.Errorf("a first build: c1's node has a slot %v, c2's %v, want both", health(snap3, c1), health(snap3, c2))
	}
}
