package worker

// balancer picks upstream nodes for one upstream of a snapshot: smooth
// weighted round robin (nginx's ngx_http_upstream_get_peer) inside priority
// groups, highest priority first. A lower group is used only when every node
// of the higher groups has already failed for the request at hand.
//
// It is owned by the worker's event loop: no locks, not safe for concurrent
// use. Its state is lost when the snapshot is replaced, as nginx loses it on
// reload.
type balancer struct {
	nodes  []*node
	groups [][]int // node indexes by priority, highest first
	cur    []int   // smooth WRR current weights, by node index
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
	b := &balancer{nodes: nodes, cur: make([]int, len(nodes))}
	// Group by priority, descending, keeping the written order inside a group.
	seen := map[int]bool{}
	var prios []int
	for _, n := range nodes {
		if !seen[n.priority] {
			seen[n.priority] = true
			prios = append(prios, n.priority)
		}
	}
	for i := 1; i < len(prios); i++ {
		for j := i; j > 0 && prios[j] > prios[j-1]; j-- {
			prios[j], prios[j-1] = prios[j-1], prios[j]
		}
	}
	for _, p := range prios {
		var g []int
		for i, n := range nodes {
			if n.priority == p {
				g = append(g, i)
			}
		}
		b.groups = append(b.groups, g)
	}
	return b
}

// pick returns the index of the next node, skipping those in tried, those
// with weight 0 and the unhealthy ones (skipDown), or -1 when none is
// left.
func (b *balancer) pick(tried triedSet) int {
	skipDown := b.skipDown()
	for _, g := range b.groups {
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
