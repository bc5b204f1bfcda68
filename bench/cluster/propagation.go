package cluster

import (
	"fmt"
	"net/http"
	"sync"
	"time"

	"coregate/bench/hdr"
)

// propagationTarget: a route PUT on the control plane is served on every
// data plane within this (issue 41).
const propagationTarget = 100 * time.Millisecond

// pollGap: ServedEverywhere asks each node this often, the resolution of
// the times it measures. Shorter, its own requests take a share of the
// 2-CPU machine's time from the nodes it measures.
const pollGap = 2 * time.Millisecond

// ServedEverywhere waits until every data plane (those of nodes, indexes
// into Env.DP; all when nil) answers GET path with want, polling each every
// pollGap, for up to limit. It returns when the last one did, or an
// error naming those that did not.
func (e *Env) ServedEverywhere(path string, want int, nodes []int, limit time.Duration) (time.Time, error) {
	if nodes == nil {
		for i := range e.DP {
			nodes = append(nodes, i)
		}
	}
	var (
		mu   sync.Mutex
		last time.Time
		miss []string
		wg   sync.WaitGroup
	)
	deadline := time.Now().Add(limit)
	for _, n := range nodes {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			c := &http.Client{Transport: NewTransport(1), Timeout: time.Second}
			defer c.CloseIdleConnections()
			var r Result
			for time.Now().Before(deadline) {
				if r = Get(c, addr, path); r.Status == want {
					mu.Lock()
					if r.Done.After(last) {
						last = r.Done
					}
					mu.Unlock()
					return
				}
				time.Sleep(pollGap)
			}
			mu.Lock()
			miss = append(miss, fmt.Sprintf("%s (last answer %d %v)", addr, r.Status, r.Err))
			mu.Unlock()
		}(e.DP[n])
	}
	wg.Wait()
	if len(miss) > 0 {
		return last, fmt.Errorf("cluster: GET %s not %d after %v on %v", path, want, limit, miss)
	}
	return last, nil
}

// propagation: N changes of a route on the control plane, each timed from
// its PUT until every data plane serves it.
func propagation(o *Options, r *Report) error {
	e := o.Env
	n := o.pick(50, 10)
	var lat []time.Duration
	for i := 1; i <= n; i++ {
		path := fmt.Sprintf("/prop/%d", i)
		t0 := time.Now()
		if err := e.MustPut("routes", "prop", e.UpstreamRoute(path, "")); err != nil {
			return err
		}
		last, err := e.ServedEverywhere(path, http.StatusOK, nil, 5*time.Second)
		if err != nil {
			return err
		}
		lat = append(lat, last.Sub(t0))
	}
	med, max := hdr.ExactQuantile(lat, 0.5), hdr.ExactQuantile(lat, 1)
	o.logf("propagation: %d changes, median %v, max %v", n, med, max)
	const s = "1 route PUT -> 3 data planes"
	r.add(s, fmt.Sprintf("median of %d changes", n), ms(med), "<= "+ms(propagationTarget), med <= propagationTarget)
	r.add(s, fmt.Sprintf("max of %d changes", n), ms(max), "<= "+ms(propagationTarget), max <= propagationTarget)
	return nil
}
