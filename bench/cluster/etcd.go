package cluster

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"
)

// phaseFailures counts, among rs, the requests sent in [from, to) that got
// no 200, and those of them that were 5xx or got no answer.
func phaseFailures(rs []Result, from, to time.Time) (n, failed, fivexx int) {
	for _, r := range rs {
		if r.Sent.Before(from) || !r.Sent.Before(to) {
			continue
		}
		n++
		if r.Status != http.StatusOK {
			failed++
		}
		if r.Status == 0 || r.Status >= 500 {
			fivexx++
		}
	}
	return n, failed, fivexx
}

// etcdHealthy waits until the etcd member at ip answers its health check.
func (e *Env) etcdHealthy(member string, limit time.Duration) error {
	c := &http.Client{Timeout: time.Second}
	defer c.CloseIdleConnections()
	addr := e.etcdAddr(member)
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		if r := Get(c, addr, "/health"); r.Status == http.StatusOK {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("cluster: %s (%s) not healthy after %v", member, addr, limit)
}

// etcdLeader names the member that is the etcd cluster's leader, read
// from each member's etcd_server_is_leader metric.
func (e *Env) etcdLeader() (string, error) {
	c := &http.Client{Timeout: 2 * time.Second}
	defer c.CloseIdleConnections()
	for i, addr := range e.Etcd {
		resp, err := c.Get("http://" + addr + "/metrics")
		if err != nil {
			return "", fmt.Errorf("cluster: etcd%d: %w", i+1, err)
		}
		b, err := io.ReadAll(io.LimitReader(resp.Body, 4<<20))
		resp.Body.Close()
		if err != nil {
			return "", fmt.Errorf("cluster: etcd%d: %w", i+1, err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if line == "etcd_server_is_leader 1" {
				return fmt.Sprintf("etcd%d", i+1), nil
			}
		}
	}
	return "", errors.New("cluster: no etcd member says it is the leader")
}

func (e *Env) etcdAddr(member string) string {
	return map[string]string{"etcd1": e.Etcd[0], "etcd2": e.Etcd[1], "etcd3": e.Etcd[2]}[member]
}

// etcdMembers: under steady load on the three data planes, one etcd member
// stopped, the leader (no request fails, a change still applies), then a
// second one
// (quorum lost: the proxies serve their last configuration with no 5xx,
// an Admin API write answers 503), then quorum back (a write retried
// meanwhile until accepted arrives everywhere).
func etcdMembers(o *Options, r *Report) (err error) {
	e := o.Env
	const s = "etcd members stopped"
	hold := time.Duration(o.pick(5, 3)) * time.Second
	if err := e.MustPut("routes", "etcd-base", e.UpstreamRoute("/etcd/base", "")); err != nil {
		return err
	}
	if _, err := e.ServedEverywhere("/etcd/base", http.StatusOK, nil, 5*time.Second); err != nil {
		return err
	}
	// the leader first: the cluster elects another under load
	first, err := e.etcdLeader()
	if err != nil {
		return err
	}
	second := "etcd1"
	if first == second {
		second = "etcd2"
	}
	stopped := map[string]bool{}
	defer func() {
		// whatever happened, the members are started again for the
		// scenarios after this one
		for _, m := range []string{first, second} {
			if stopped[m] {
				if err2 := e.Run("start", m); err2 != nil && err == nil {
					err = err2
				}
			}
		}
	}()
	l := &Load{Nodes: e.DP, Paths: []string{"/etcd/base"}, Conns: 6, Rate: 300, Timeout: 2 * time.Second,
		Limit: 2 * time.Minute, Max: 100000}
	l.Start()
	defer l.Stop()
	time.Sleep(time.Second)

	// One member stopped: the leader.
	t1 := time.Now()
	if err := e.Run("stop", first); err != nil {
		return err
	}
	stopped[first] = true
	time.Sleep(time.Second)
	tc := time.Now()
	if err := e.MustPut("routes", "etcd-a", e.UpstreamRoute("/etcd/a", "")); err != nil {
		return fmt.Errorf("with %s stopped: %w", first, err)
	}
	last, err := e.ServedEverywhere("/etcd/a", http.StatusOK, nil, 10*time.Second)
	if err != nil {
		return fmt.Errorf("with %s stopped: %w", first, err)
	}
	applyOne := last.Sub(tc)
	time.Sleep(hold)

	// Quorum lost.
	t2 := time.Now()
	if err := e.Run("stop", second); err != nil {
		return err
	}
	stopped[second] = true
	time.Sleep(time.Second)
	tw := time.Now()
	st, werr := e.Put("routes", "etcd-b", e.UpstreamRoute("/etcd/b", ""), 15*time.Second)
	writeTook := time.Since(tw)
	o.logf("etcd: quorum lost: Admin API write answered %d (%v) in %v", st, werr, writeTook.Round(time.Millisecond))
	// a write retried until accepted
	var (
		wmu      sync.Mutex
		accepted time.Time
		tries    int
		refusals = map[int]int{}
	)
	wdone := make(chan struct{})
	go func() {
		defer close(wdone)
		deadline := time.Now().Add(time.Minute)
		for time.Now().Before(deadline) {
			st, err := e.Put("routes", "etcd-c", e.UpstreamRoute("/etcd/c", ""), 10*time.Second)
			wmu.Lock()
			tries++
			if err == nil && st/100 == 2 {
				accepted = time.Now()
				wmu.Unlock()
				return
			}
			refusals[st]++
			wmu.Unlock()
			time.Sleep(200 * time.Millisecond)
		}
	}()
	// meanwhile every node serves what it had
	_, err = e.ServedEverywhere("/etcd/a", http.StatusOK, nil, 2*time.Second)
	cachedOK := err == nil
	time.Sleep(hold)

	// Quorum back.
	t3 := time.Now()
	if err := e.Run("start", second); err != nil {
		return err
	}
	stopped[second] = false
	<-wdone
	wmu.Lock()
	acc, ntries := accepted, tries
	ref := fmt.Sprint(refusals)
	wmu.Unlock()
	if acc.IsZero() {
		return fmt.Errorf("the write retried since quorum was lost was never accepted (%d tries: %s)", ntries, ref)
	}
	lastC, err := e.ServedEverywhere("/etcd/c", http.StatusOK, nil, 15*time.Second)
	if err != nil {
		return fmt.Errorf("after quorum came back: %w", err)
	}
	back := lastC.Sub(t3)
	// all three again, and a change after
	if err := e.Run("start", first); err != nil {
		return err
	}
	stopped[first] = false
	if err := e.etcdHealthy(first, 20*time.Second); err != nil {
		return err
	}
	t4 := time.Now()
	if err := e.MustPut("routes", "etcd-d", e.UpstreamRoute("/etcd/d", "")); err != nil {
		return err
	}
	if _, err := e.ServedEverywhere("/etcd/d", http.StatusOK, nil, 10*time.Second); err != nil {
		return fmt.Errorf("with the three members back: %w", err)
	}
	time.Sleep(time.Second)
	rs := l.Stop()
	end := time.Now()

	n1, f1, _ := phaseFailures(rs, t1, t2)
	n2, f2, x2 := phaseFailures(rs, t2, t3)
	n3, f3, _ := phaseFailures(rs, t3, end)
	o.logf("etcd: the leader (%s) stopped, then %s", first, second)
	o.logf("etcd: one member stopped: %d requests, %d failed (%v); change applied in %v", n1, f1, FirstErr(rs), applyOne)
	o.logf("etcd: quorum lost: %d requests, %d not 200, %d 5xx or unanswered; retried write: %d tries (%s)", n2, f2, x2, ntries, ref)
	o.logf("etcd: quorum back: %d requests, %d failed; the retried write everywhere %v after, a later one too (%v)",
		n3, f3, back, time.Since(t4).Round(time.Millisecond))
	r.add(s, "1 of 3 (the leader) stopped: failed requests", fmt.Sprintf("%d of %d", f1, n1), "0", f1 == 0 && n1 > 0)
	r.add(s, "1 of 3 stopped: a change served everywhere", ms(applyOne), "applies", true)
	r.add(s, "quorum lost: Admin API write", fmt.Sprintf("%d in %v", st, writeTook.Round(time.Millisecond)), "503", st == http.StatusServiceUnavailable)
	r.add(s, "quorum lost: proxy 5xx or unanswered", fmt.Sprintf("%d of %d", x2, n2), "0", x2 == 0 && n2 > 0)
	r.add(s, "quorum lost: proxy answers not 200", fmt.Sprintf("%d of %d", f2, n2), "0", f2 == 0)
	r.add(s, "quorum lost: last configuration served", fmt.Sprint(cachedOK), "true on 3 nodes", cachedOK)
	r.add(s, "quorum back: retried write served everywhere", ms(back)+" after", "arrives", true)
	r.add(s, "quorum back: failed requests", fmt.Sprintf("%d of %d", f3, n3), "0", f3 == 0)
	return nil
}
