package worker

// balancer picks upstream nodes for one upstream of a snapshot, by the
// upstream's type (APISIX's balancers, see balancers.go for the three other
// than round robin), inside priority groups, highest priority first: a
// lower group is used only when every node of the higher groups has
// already failed for the request at hand, as APISIX's priority balancer
// wraps each of its balancers. Nodes of weight 0 are never picked.
//
//   - roundrobin: smooth weighted round robin (nginx's
//     ngx_http_upstream_get_peer).
//   - chash: a consistent hash ring per group (chashRing), the request's
//     key hashed when it is routed (requestKey); a retry takes the next
//     node along the ring.
//   - least_conn: the fewest requests in flight from this worker per unit
//     of weight.
//   - ewma: the lower latency of two nodes drawn at random, the latencies
//     decayed as APISIX's ewma.lua decays them.
//
// It is owned by the worker's event loop: no locks, not safe for concurrent
// use. Its state (the round robin's weights, the requests in flight, the
// latencies) is kept while its upstream is unchanged across snapshots
// (compile) and lost when the upstream changes, as nginx loses it on
// reload.
type balancer struct {
	kind  uint8 // balRoundRobin, balCHash, balLeastConn, balEWMA
	nodes []*node
	// groups are the node indexes by priority, highest first: behind a
	// pointer, most balancers' being one of oneGroups, so that balancer
	// is 80 bytes, a size class, where it was 96 with the slice inline.
	groups *[][]int
	cur    []int // smooth WRR current weights, by node index

	// *balancerKinds is the state of the other kinds than roundrobin,
	// nil for a roundrobin one (most of a worker's, and 20 000 of them
	// or more): read only by the code of the kind, which has it.
	*balancerKinds

	// one is cur for an upstream of one node, the common one: in the
	// struct, where cur on its own was an 8-byte allocation more.
	one [1]int
}

// oneGroups[n] is groups for n nodes of one priority, the common case:
// a single group of them all in written order, shared read-only by every
// balancer of that many nodes, where each had its own (48 bytes for an
// upstream of one node).
var oneGroups = func() (t [17][][]int) {
	for n := 1; n < len(t); n++ {
		g := make([]int, n)
		for i := range g {
			g[i] = i
		}
		t[n] = [][]int{g}
	}
	return t
}()

// balancerKinds is a chash, least_conn or ewma balancer's own state.
type balancerKinds struct {
	// chash: the hash key and a ring per group.
	key   hashKey
	rings []chashRing
	// least_conn: requests in flight by node index, and where the next
	// scan for the least loaded starts (ties go round).
	conns []int32
	next  int
	// ewma: the decayed latency of each node.
	lat []ewmaStat
}

// triedSet records the nodes that already failed for one request. Nodes past
// the 64th are never marked, so very large upstreams may retry a node twice.
type triedSet uint64

func (t triedSet) has(i int) bool { return i < 64 && t&(1<<uint(i)) != 0 }
func (t *triedSet) add(i int) {
	if i < 64 {
		*t |= 1 << uint(i)
	}
}

func newBalancer(nodes []*node) *balancer {
	b := &balancer{nodes: nodes}
	if b.cur = b.one[:]; len(nodes) != 1 {
		b.cur = make([]int, len(nodes))
	}
	// Group by priority, descending, keeping the written order inside a group.
	seen := map[int]bool{}
	var prios []int
	for _, n := range nodes {
		if !seen[n.priority] {
			seen[n.priority] = true
			prios = append(prios, n.priority)
		}
	}
	if len(prios) == 1 && len(nodes) < len(oneGroups) {
		b.groups = &oneGroups[len(nodes)]
		return b
	}
	for i := 1; i < len(prios); i++ {
		for j := i; j > 0 && prios[j] > prios[j-1]; j-- {
			prios[j], prios[j-1] = prios[j-1], prios[j]
		}
	}
	groups := make([][]int, 0, len(prios))
	for _, p := range prios {
		var g []int
		for i, n := range nodes {
			if n.priority == p {
				g = append(g, i)
			}
		}
		groups = append(groups, g)
	}
	b.groups = &groups
	return b
}

// pick returns the index of the next node, skipping those in tried, those
// with weight 0 and, while a node is healthy, the unhealthy ones
// (skipDown), or -1 when none is left. key is the request's hash key
// (chash, requestKey) and now Worker.now (ewma); a node picked is held by
// the request (least_conn counts it in flight) until release.
func (b *balancer) pick(tried triedSet, key uint32, now int64) int {
	skipDown := b.skipDown()
	switch b.kind {
	case balCHash:
		return b.pickCHash(tried, key, skipDown)
	case balLeastConn:
		return b.pickLeastConn(tried, skipDown)
	case balEWMA:
		return b.pickEWMA(tried, now, skipDown)
	}
	for _, g := range *b.groups {
		best, total := -1, 0
		for _, i := range g {
			w := b.nodes[i].weight
			if w <= 0 || tried.has(i) || skipDown && !b.nodes[i].health.Healthy() {
				continue
			}
			b.cur[i] += w
			total += w
			if best < 0 || b.cur[i] > b.cur[best] {
				best = i
			}
		}
		if best >= 0 {
			b.cur[best] -= total
			return best
		}
	}
	return -1
}
