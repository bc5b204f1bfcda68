package worker

import (
	"coregate/admin/spec"
	"coregate/worker/shm"
)

// Upstream health checks, the worker's side: the supervisor probes the
// nodes of every upstream with checks (active checks) and keeps their
// states in the node's health region (shm.Health); the worker reads them
// when it picks a node, and counts its own traffic into them (passive
// checks, reportPassive). Nothing here locks or allocates per request.

// checkedNames names s's upstreams with checks as the supervisor does
// (spec.Spec.CheckedUpstreams), so that both find the same slots.
func checkedNames(s *spec.Spec) map[*spec.Upstream]string {
	cus := s.CheckedUpstreams()
	if len(cus) == 0 {
		return nil
	}
	m := make(map[*spec.Upstream]string, len(cus))
	for _, cu := range cus {
		m[cu.Upstream] = cu.Name
	}
	return m
}

// attachHealth gives cu's nodes their slots of the health region when u
// has checks, and cu its passive checks. The supervisor claims the slots
// before it sends the configuration (node/supervisor/health.go); a node
// whose slot it has not (its region full) is not checked.
func (ue *upstreamEnv) attachHealth(u *spec.Upstream, cu *upstream) error {
	if ue.health == nil || ue.checked == nil || len(u.Rare().Checks) == 0 || string(u.Rare().Checks) == "null" {
		return nil // not among the checked (spec.Spec.CheckedUpstreams)
	}
	name, ok := ue.checked()[u]
	if !ok {
		return nil
	}
	checks, err := spec.ParseChecks(u.Rare().Checks)
	if err != nil || checks == nil {
		return err
	}
	cu.passive = checks.Passive
	for _, nd := range cu.nodes {
		nd.health = ue.health.Lookup(shm.HealthKey(name, nd.addr))
	}
	return nil
}

// skipDown reports whether pick skips the unhealthy nodes: when one node
// that may be picked is healthy. When none is, every node is tried, as
// APISIX's fetch_health_nodes gives all nodes back. It does not allocate.
func (b *balancer) skipDown() bool {
	for _, n := range b.nodes {
		if n.weight > 0 && n.health.Healthy() {
			return true
		}
	}
	return false
}

// reportPassive counts what a request's attempt on nd said of it (a status,
// or a TCP failure or a timeout) against up's passive checks, as
// lua-resty-healthcheck's report_http_status, report_tcp_failure and
// report_timeout. Loop-owned; one or two atomic operations on the shared
// region, no allocation.
func reportPassive(up *upstream, nd *node, r shm.Report, status int) {
	p := up.passive
	if p == nil || nd.health == nil {
		return
	}
	switch r {
	case shm.Success, shm.HTTPFailure:
		if p.Type == "tcp" {
			// A tcp passive check counts connections: an answer is one
			// that worked.
			nd.health.Report(shm.Success, p.Healthy.Successes)
			return
		}
		switch {
		case p.Healthy.HasStatus(status):
			nd.health.Report(shm.Success, p.Healthy.Successes)
		case p.Unhealthy.HasStatus(status):
			nd.health.Report(shm.HTTPFailure, p.Unhealthy.HTTPFailures)
		}
	case shm.TCPFailure:
		nd.health.Report(shm.TCPFailure, p.Unhealthy.TCPFailures)
	case shm.Timeout:
		nd.health.Report(shm.Timeout, p.Unhealthy.Timeouts)
	}
}

// passive reports what the current attempt said of its node
// (reportPassive). Loop-owned.
func (cc *clientConn) passive(r shm.Report, status int) {
	if cc.rt == nil || cc.rt.up == nil || cc.rt.up.passive == nil || cc.node < 0 || cc.node >= len(cc.rt.up.nodes) {
		return
	}
	reportPassive(cc.rt.up, cc.rt.up.nodes[cc.node], r, status)
}

// passiveFailure reports an attempt that got no response: a timeout
// (status 504) or a TCP failure, as APISIX's balancer reports the failed
// attempt before the next.
func (cc *clientConn) passiveFailure(status int) {
	if status == 504 {
		cc.passive(shm.Timeout, 0)
		return
	}
	cc.passive(shm.TCPFailure, 0)
}
