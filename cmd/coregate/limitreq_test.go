package main

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// The limit-req plugin end to end: the workers of one node share its
// buckets, so exactly the burst passes at once however many workers serve
// the clients; requests within the burst are delayed by the worker's
// timer, which does not stop it serving others.

// countReq sends requests to path over every connection at once until
// total were sent, and counts the answers: 200, or the rejection (429 with
// the rejected_msg body).
func countReq(t *testing.T, conns []*limitConn, path string, total int) (passed, rejected int) {
	t.Helper()
	return sendAll(t, conns, path, total, func(a limitAnswer) (bool, error) {
		switch {
		case a.status == 200:
			return true, nil
		case a.status == 429 && a.body == `{"error_msg":"slow down"}`+"\n":
			return false, nil
		}
		return false, fmt.Errorf("unexpected answer %+v", a)
	})
}

func TestLimitReqExactAcrossWorkers(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("starts gateways with several workers")
	}
	up := textUpstream(t, "ok")
	const workers, burst = 2, 149
	// A rate so low that the test's duration drains nothing worth a
	// request: exactly burst+1 pass.
	g := startSupervisor(t, routesYAML(
		obj{"id": "limited", "uri": "/limited", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"limit-req": obj{"rate": 0.001, "burst": burst, "key": "remote_addr", "nodelay": true,
				"rejected_code": 429, "rejected_msg": "slow down"}}},
	), func(port int) string { return perCoreConfig(port, workers) }, workers)
	conns := dialSpread(t, g, workers, 4)
	passed, rejected := countReq(t, conns, "/limited", 3*(burst+1))
	if passed != burst+1 || rejected != 2*(burst+1) {
		t.Fatalf("%d workers: %d of %d requests passed, %d rejected; want exactly %d to pass",
			workers, passed, 3*(burst+1), rejected, burst+1)
	}
}

// TestLimitReqDelay: at a rate of 2/s with a burst of 2, of four requests
// sent at once three pass, after about 0, 0.5 and 1 s, and one is
// rejected at once; the worker (one event loop) answers other requests
// meanwhile.
func TestLimitReqDelay(t *testing.T) {
	t.Parallel()
	up := textUpstream(t, "ok")
	g := startGateway(t, routesYAML(
		obj{"id": "slow", "uri": "/slow", "upstream": upstreamOf(nodes(up.Addr()), nil),
			"plugins": obj{"limit-req": obj{"rate": 2, "burst": 2, "key": "http_x_user"}}},
		obj{"id": "other", "uri": "/other", "upstream": upstreamOf(nodes(up.Addr()), nil)},
	), "")
	user := map[string]string{"X-User": "ann"}
	start := time.Now()
	type done struct {
		status int
		after  time.Duration
	}
	results := make(chan done, 4)
	for i := range 4 {
		go func() {
			r, err := tryDo(newClient(t), "GET", g.url("/slow"), "", user, nil)
			if err != nil {
				r.status = -1
			}
			results <- done{r.status, time.Since(start)}
		}()
		if i < 3 {
			time.Sleep(20 * time.Millisecond) // the order of arrival
		}
	}
	// Meanwhile the worker serves others, and the first and the fourth
	// are answered at once.
	c := newClient(t)
	for range 10 {
		if r := do(t, c, "GET", g.url("/other"), "", nil, nil); r.status != 200 {
			t.Fatalf("/other during the delay: %d", r.status)
		}
	}
	var got []done
	for range 4 {
		select {
		case d := <-results:
			got = append(got, d)
		case <-time.After(20 * time.Second):
			t.Fatalf("answers so far: %+v", got)
		}
	}
	// Whichever order they arrived in: three passed, one was rejected
	// before the delayed ones passed, and those were delayed by 0.5 s and
	// 1 s at least (the lower bounds are the point: a loaded machine may
	// add to them).
	var passed []time.Duration
	var rejectedAt time.Duration
	for _, d := range got {
		switch d.status {
		case 200:
			passed = append(passed, d.after)
		case 503:
			rejectedAt = d.after
		default:
			t.Fatalf("answers: %+v", got)
		}
	}
	slices.Sort(passed)
	if len(passed) != 3 || rejectedAt == 0 {
		t.Fatalf("answers: %+v", got)
	}
	if passed[1] < 450*time.Millisecond || passed[2] < 950*time.Millisecond || rejectedAt > passed[1] {
		t.Fatalf("answers: %+v", got)
	}
}
