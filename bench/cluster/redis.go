package cluster

import (
	"fmt"
	"net/http"
	"time"
)

// redisTimeout is the routes' redis_timeout: no request waits longer for
// a Redis that does not answer. redisSlack: what a loaded 2-CPU machine
// adds to it.
const (
	redisTimeout = 500 * time.Millisecond
	redisSlack   = 300 * time.Millisecond
)

// outage judges the requests sent in [from, to) to a limit-count route
// whose Redis is gone: with allow_degradation every one passes (200),
// without it every one is answered 500 (APISIX's "failed to limit count");
// either way none waits past the Redis timeout.
type outage struct {
	n, wrong int           // requests, and those with another answer
	wait     time.Duration // the longest
}

func judgeOutage(rs []Result, from, to time.Time) (deg, strict outage) {
	for _, r := range rs {
		if r.Sent.Before(from) || !r.Sent.Before(to) {
			continue
		}
		o, want := &deg, http.StatusOK
		if r.Path == "/redis/strict" {
			o, want = &strict, http.StatusInternalServerError
		}
		o.n++
		if r.Status != want {
			o.wrong++
		}
		if d := r.Done.Sub(r.Sent); d > o.wait {
			o.wait = d
		}
	}
	return deg, strict
}

// redisDown: limit-count policy redis with allow_degradation true and
// false under load on the three data planes, first with redis-server
// stopped, then with its namespace's link down (nothing answers, every
// request to it waits for the timeout); each time Redis comes back and
// the strict route passes again by itself.
func redisDown(o *Options, r *Report) (err error) {
	e := o.Env
	hold := time.Duration(o.pick(3, 2)) * time.Second
	for _, p := range []struct{ id, degrade string }{{"degrade", "true"}, {"strict", "false"}} {
		plugin := fmt.Sprintf(`"limit-count":{"count":1000000,"time_window":60,"rejected_code":429,"key_type":"constant",`+
			`"key":"cluster-%s","policy":"redis","redis_host":%q,"redis_port":%s,"redis_timeout":%d,"allow_degradation":%s}`,
			p.id, host(e.Redis), port(e.Redis), redisTimeout.Milliseconds(), p.degrade)
		if err := e.MustPut("routes", "redis-"+p.id, e.UpstreamRoute("/redis/"+p.id, plugin)); err != nil {
			return err
		}
		if _, err := e.ServedEverywhere("/redis/"+p.id, http.StatusOK, nil, 5*time.Second); err != nil {
			return err
		}
	}
	var undo undoList
	defer func() { undo.run(e, &err) }()
	for _, f := range []struct {
		name, how     string
		inject, heal  []string
		judgeDeadline bool
	}{
		{"redis stopped", "redis-server stopped", []string{"stop", "redis"}, []string{"start", "redis"}, false},
		{"redis unreachable", "its link down", []string{"link", "redis", "down"}, []string{"link", "redis", "up"}, true},
	} {
		l := &Load{Nodes: e.DP, Paths: []string{"/redis/degrade", "/redis/strict"}, Conns: 6, Rate: 200,
			Timeout: 3 * time.Second, Limit: time.Minute, Max: 50000}
		l.Start()
		time.Sleep(time.Second)
		if err := e.Run(f.inject...); err != nil {
			l.Stop()
			return err
		}
		// Redis is gone once the script returns (stop waits for the
		// process to exit)
		t1 := time.Now()
		undo = append(undo, f.heal)
		time.Sleep(hold)
		t2 := time.Now()
		if err := e.Run(f.heal...); err != nil {
			l.Stop()
			return err
		}
		undo = undo[:len(undo)-1]
		last, werr := e.ServedEverywhere("/redis/strict", http.StatusOK, nil, 15*time.Second)
		time.Sleep(time.Second)
		t3 := time.Now()
		time.Sleep(time.Second)
		rs := l.Stop()
		if werr != nil {
			return fmt.Errorf("%s, then back: %w", f.name, werr)
		}
		deg, strict := judgeOutage(rs, t1, t2)
		_, after, _ := phaseFailures(rs, t3, time.Now().Add(time.Hour))
		o.logf("%s: allow_degradation true: %d requests, %d not 200, longest %v; false: %d requests, %d not 500, longest %v; back in %v, %d failed after",
			f.name, deg.n, deg.wrong, deg.wait, strict.n, strict.wrong, strict.wait, last.Sub(t2), after)
		s := "Redis down (" + f.how + ")"
		r.add(s, "allow_degradation true: not 200", fmt.Sprintf("%d of %d", deg.wrong, deg.n), "0", deg.wrong == 0 && deg.n > 0)
		r.add(s, "allow_degradation false: not 500", fmt.Sprintf("%d of %d", strict.wrong, strict.n), "0 (APISIX: 500)", strict.wrong == 0 && strict.n > 0)
		longest := deg.wait
		if strict.wait > longest {
			longest = strict.wait
		}
		r.add(s, "longest wait", ms(longest), "<= redis_timeout "+ms(redisTimeout)+" + "+ms(redisSlack), longest <= redisTimeout+redisSlack)
		r.add(s, "back by itself: all 3 nodes pass again", ms(last.Sub(t2))+" after", "recovers", true)
	}
	return nil
}
