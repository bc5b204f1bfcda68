package cluster

import (
	"fmt"
	"net/http"
	"strings"
	"time"
)

// Windows is what a load on a limit-count route saw, window by window.
type Windows struct {
	Count     int // the limit per window
	Windows   int // windows the load opened (answers with Remaining Count-1)
	Admitted  int // 200s
	Rejected  int // 429s
	Other     int // any other answer, or none
	Exact     bool
	Why       string // when not Exact
	InFlight  int    // requests in flight when a later window opened
	InFlightA int    // of them, admitted
}

// JudgeWindows tells whether a limit-count route with count n admitted
// exactly n requests in each window of the load rs. Each admitted request
// carries X-RateLimit-Remaining, n-1 down to 0 in its window: a window is
// opened by the answer with n-1, and over K windows every value is seen K
// times, except in the last window, cut by the load's end, where the values
// from some v down are seen K-1 times. A value seen more than K times, or a
// lower one seen more often than a higher one, is a window that admitted
// more than n (or counted a request twice). Requests in flight when a
// window opens (sent before the opening request was, answered after) may
// be counted in either window: they are counted and reported.
func JudgeWindows(rs []Result, n int) Windows {
	w := Windows{Count: n, Exact: true}
	seen := make([]int, n)
	var opens []time.Time
	for _, r := range rs {
		switch r.Status {
		case http.StatusOK:
			w.Admitted++
			if r.Remaining < 0 || r.Remaining >= n {
				w.Exact = false
				w.Why = fmt.Sprintf("an admitted request with X-RateLimit-Remaining %d", r.Remaining)
				continue
			}
			seen[r.Remaining]++
			if r.Remaining == n-1 {
				opens = append(opens, r.Sent)
			}
		case http.StatusTooManyRequests:
			w.Rejected++
		default:
			w.Other++
		}
	}
	w.Windows = seen[n-1]
	for v := n - 2; v >= 0 && w.Exact; v-- {
		if seen[v] > seen[v+1] || seen[v] < w.Windows-1 {
			w.Exact = false
			w.Why = fmt.Sprintf("remaining %d seen %d times, %d seen %d times", v+1, seen[v+1], v, seen[v])
		}
	}
	if w.Windows == 0 && w.Admitted > 0 && w.Exact {
		w.Exact, w.Why = false, "admitted requests but no window opened"
	}
	for _, t := range opens {
		first := true
		for _, r := range rs {
			if r.Sent.Before(t) && r.Done.After(t) {
				if first && r.Status == http.StatusOK && r.Remaining == n-1 {
					continue
				}
				w.InFlight++
				if r.Status == http.StatusOK {
					w.InFlightA++
				}
			}
		}
	}
	return w
}

// limitCount: limit-count with policy redis, then redis-cluster, count n
// per window, the load spread over the three data planes for 2.5 windows.
func limitCount(o *Options, r *Report) error {
	e := o.Env
	n := o.pick(50, 20)
	const window = 2 // seconds
	for _, p := range []struct{ policy, conf string }{
		{"redis", fmt.Sprintf(`"redis_host":%q,"redis_port":%s`, host(e.Redis), port(e.Redis))},
		{"redis-cluster", fmt.Sprintf(`"redis_cluster_name":"coregate","redis_cluster_nodes":["%s"]`,
			strings.Join(e.RedisCluster, `","`))},
	} {
		path := "/lc/" + p.policy
		plugin := fmt.Sprintf(`"limit-count":{"count":%d,"time_window":%d,"rejected_code":429,"key_type":"constant",`+
			`"key":"cluster","policy":%q,"redis_timeout":1000,%s}`, n, window, p.policy, p.conf)
		if err := e.MustPut("routes", "lc-"+p.policy, e.UpstreamRoute(path, plugin)); err != nil {
			return err
		}
		// served everywhere: a probe of each node spends one of the
		// first window's requests, so the load starts once that window
		// is over
		if _, err := e.ServedEverywhere(path, http.StatusOK, nil, 5*time.Second); err != nil {
			return err
		}
		time.Sleep(window * time.Second)
		l := &Load{Nodes: e.DP, Paths: []string{path}, Conns: 6, Rate: 300, Timeout: 3 * time.Second,
			Limit: window * 2500 * time.Millisecond, Max: 5000}
		l.Start()
		time.Sleep(l.Limit)
		w := JudgeWindows(l.Stop(), n)
		o.logf("limit-count %s: %d windows, %d admitted, %d rejected, %d other; in flight at a window's edge %d (%d admitted)",
			p.policy, w.Windows, w.Admitted, w.Rejected, w.Other, w.InFlight, w.InFlightA)
		s := "limit-count policy " + p.policy
		verdict := fmt.Sprintf("%d per window over %d windows", n, w.Windows)
		if !w.Exact {
			verdict = w.Why
		}
		r.add(s, fmt.Sprintf("admitted (count %d, %ds, 3 nodes)", n, window), verdict, fmt.Sprintf("exactly %d per window", n),
			w.Exact && w.Windows >= 2)
		r.add(s, "answers other than 200/429", fmt.Sprint(w.Other), "0", w.Other == 0)
		r.add(s, "in flight at a window's edge", fmt.Sprintf("%d (%d admitted)", w.InFlight, w.InFlightA), "reported", true)
	}
	return nil
}

func host(addr string) string { h, _, _ := strings.Cut(addr, ":"); return h }
func port(addr string) string { _, p, _ := strings.Cut(addr, ":"); return p }
