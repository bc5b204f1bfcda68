package cluster

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// mockRoute is a route answered by the mocking plugin: a node cut off
// from the network can still be asked it from inside its own namespace.
func mockRoute(uri string) string {
	return fmt.Sprintf(`{"uri":%q,"plugins":{"mocking":{"response_example":"served"}}}`, uri)
}

// localStatus asks data plane member (dp1..dp3) for path from inside its
// own namespace (curl on its loopback): the status, 0 when it got none.
func (e *Env) localStatus(member, path string) int {
	out, err := e.Output("exec", member, "curl", "-s", "-m", "2", "-o", "/dev/null", "-w", "%{http_code}",
		"http://127.0.0.1:9080"+path)
	if err != nil {
		return 0
	}
	var st int
	_, _ = fmt.Sscan(strings.TrimSpace(out), &st)
	return st
}

// dataPlanes: a data plane killed (SIGKILL, its workers with it) while a
// change is made, then started again: it serves the current
// configuration; a data plane cut off (its link down) serves what it had,
// and catches up on what changed meanwhile once its link is back.
func dataPlanes(o *Options, r *Report) (err error) {
	e := o.Env
	var undo undoList
	defer func() { undo.run(e, &err) }()

	// Killed and started again. The other two serve on meanwhile.
	if err := e.MustPut("routes", "dp-base", e.UpstreamRoute("/dp/base", "")); err != nil {
		return err
	}
	if _, err := e.ServedEverywhere("/dp/base", http.StatusOK, nil, 5*time.Second); err != nil {
		return err
	}
	l := &Load{Nodes: e.DP[1:], Paths: []string{"/dp/base"}, Conns: 4, Rate: 200, Timeout: 2 * time.Second,
		Limit: time.Minute, Max: 20000}
	l.Start()
	time.Sleep(500 * time.Millisecond)
	if err := e.Run("stop", "dp1", "KILL"); err != nil {
		l.Stop()
		return err
	}
	undo = append(undo, []string{"start", "dp1"})
	for i := 1; i <= 3; i++ {
		if err := e.MustPut("routes", fmt.Sprintf("dp-down-%d", i), e.UpstreamRoute(fmt.Sprintf("/dp/down/%d", i), "")); err != nil {
			l.Stop()
			return err
		}
	}
	time.Sleep(time.Second)
	t0 := time.Now()
	if err := e.Run("start", "dp1"); err != nil {
		l.Stop()
		return err
	}
	undo = undo[:0]
	last, err := e.ServedEverywhere("/dp/down/3", http.StatusOK, []int{0}, 20*time.Second)
	rs := l.Stop()
	if err != nil {
		return fmt.Errorf("dp1 started again: %w", err)
	}
	back := last.Sub(t0)
	// and every change made while it was down
	for _, p := range []string{"/dp/down/1", "/dp/down/2", "/dp/base"} {
		if _, err := e.ServedEverywhere(p, http.StatusOK, []int{0}, time.Second); err != nil {
			return fmt.Errorf("dp1 started again serves /dp/down/3 but: %w", err)
		}
	}
	by, _ := Tally(rs)
	failed := len(rs) - by[http.StatusOK]
	o.logf("data plane killed: started again, on the current configuration in %v; the other two: %d of %d failed",
		back, failed, len(rs))
	const s = "data plane killed, restarted"
	r.add(s, "start -> current config served", ms(back), "current config", true)
	r.add(s, "the other two nodes: failed requests", fmt.Sprintf("%d of %d", failed, len(rs)), "0", failed == 0 && len(rs) > 0)

	// Cut off.
	const c = "data plane cut off (link down)"
	if err := e.MustPut("routes", "cut-before", mockRoute("/cut/before")); err != nil {
		return err
	}
	if _, err := e.ServedEverywhere("/cut/before", http.StatusOK, nil, 5*time.Second); err != nil {
		return err
	}
	if err := e.Run("link", "dp2", "down"); err != nil {
		return err
	}
	undo = append(undo, []string{"link", "dp2", "up"})
	if err := e.MustPut("routes", "cut-during", mockRoute("/cut/during")); err != nil {
		return err
	}
	if _, err := e.ServedEverywhere("/cut/during", http.StatusOK, []int{0, 2}, 5*time.Second); err != nil {
		return err
	}
	hold := time.Duration(o.pick(10, 4)) * time.Second
	probes, served := 0, 0
	for end := time.Now().Add(hold); time.Now().Before(end); time.Sleep(500 * time.Millisecond) {
		probes++
		if e.localStatus("dp2", "/cut/before") == http.StatusOK {
			served++
		}
	}
	during := e.localStatus("dp2", "/cut/during")
	t1 := time.Now()
	if err := e.Run("link", "dp2", "up"); err != nil {
		return err
	}
	undo = undo[:0]
	last, err = e.ServedEverywhere("/cut/during", http.StatusOK, []int{1}, 60*time.Second)
	if err != nil {
		return fmt.Errorf("dp2's link up again: %w", err)
	}
	caught := last.Sub(t1)
	o.logf("data plane cut off for %v: %d of %d probes served its cache; the change made meanwhile %d there while cut, served %v after its link came up",
		hold, served, probes, during, caught)
	r.add(c, fmt.Sprintf("cached route while cut (%v)", hold), fmt.Sprintf("%d of %d probes 200", served, probes), "all 200",
		served == probes && probes > 0)
	r.add(c, "change made meanwhile, on the cut node", fmt.Sprint(during), "404 (not reached)", during == http.StatusNotFound)
	r.add(c, "reconnect -> change made meanwhile served", ms(caught), "catches up", true)
	return nil
}
