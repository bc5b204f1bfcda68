package cluster

import (
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"
)

// Result is one request of a Load: when it was sent and answered, where,
// and its status (0 when it got no answer: Err says why).
type Result struct {
	Node      int // index into Env.DP
	Path      string
	Sent      time.Time
	Done      time.Time
	Status    int
	Remaining int // X-RateLimit-Remaining, -1 when absent
	Err       error
}

// Load sends GETs of Paths to every data plane in turn from Conns
// goroutines, each with a kept-alive connection of its own, at Rate
// requests per second in all (0: as fast as answers come), until Stop or
// Limit. Results are kept in order of their answer.
type Load struct {
	Nodes   []string      // ip:port
	Paths   []string      // taken in turn
	Conns   int           // goroutines
	Rate    float64       // req/s over all goroutines; 0: closed loop
	Timeout time.Duration // a request not answered within it failed
	Limit   time.Duration // the load never runs longer
	Max     int           // nor sends more requests than this (0: 1e6)

	mu      sync.Mutex
	results []Result
	stop    chan struct{}
	once    sync.Once
	wg      sync.WaitGroup
}

// NewTransport is a client transport with short connect timeouts and
// enough idle connections for conns goroutines.
func NewTransport(conns int) *http.Transport {
	return &http.Transport{
		DialContext:         (&net.Dialer{Timeout: time.Second}).DialContext,
		MaxIdleConnsPerHost: conns,
		MaxIdleConns:        4 * conns,
		DisableCompression:  true,
	}
}

// Start starts the load's goroutines; Stop must follow.
func (l *Load) Start() {
	l.stop = make(chan struct{})
	if l.Max == 0 {
		l.Max = 1000000
	}
	per := l.Max / l.Conns
	if per < 1 {
		per = 1
	}
	deadline := time.Now().Add(l.Limit)
	for g := 0; g < l.Conns; g++ {
		l.wg.Add(1)
		go func(g int) {
			defer l.wg.Done()
			c := &http.Client{Transport: NewTransport(len(l.Nodes)), Timeout: l.Timeout}
			defer c.CloseIdleConnections()
			var gap time.Duration
			if l.Rate > 0 {
				gap = time.Duration(float64(time.Second) * float64(l.Conns) / l.Rate)
			}
			next := time.Now().Add(time.Duration(g) * gap / time.Duration(l.Conns))
			for i := 0; i < per && time.Now().Before(deadline); i++ {
				if gap > 0 {
					if d := time.Until(next); d > 0 {
						select {
						case <-l.stop:
							return
						case <-time.After(d):
						}
					}
					next = next.Add(gap)
				}
				select {
				case <-l.stop:
					return
				default:
				}
				k := g + i*l.Conns
				node, path := k%len(l.Nodes), l.Paths[(k/len(l.Nodes))%len(l.Paths)]
				r := Get(c, l.Nodes[node], path)
				r.Node = node
				l.mu.Lock()
				l.results = append(l.results, r)
				l.mu.Unlock()
			}
		}(g)
	}
}

// Stop stops the load, waits for the requests in flight, and returns
// every result. It may be called again (a deferred clean-up): the load is
// stopped once.
func (l *Load) Stop() []Result {
	l.once.Do(func() { close(l.stop) })
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.results
}

// Get sends GET path to addr with c and reads the whole answer.
func Get(c *http.Client, addr, path string) Result {
	r := Result{Path: path, Sent: time.Now(), Remaining: -1}
	req, err := http.NewRequestWithContext(context.Background(), http.MethodGet, "http://"+addr+path, nil)
	if err != nil {
		r.Err, r.Done = err, time.Now()
		return r
	}
	resp, err := c.Do(req)
	if err != nil {
		r.Err, r.Done = err, time.Now()
		return r
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	r.Done = time.Now()
	if err != nil {
		r.Err = err
		return r
	}
	r.Status = resp.StatusCode
	if v := resp.Header.Get("X-RateLimit-Remaining"); v != "" {
		if n, err := strconv.Atoi(v); err == nil {
			r.Remaining = n
		}
	}
	return r
}

// Tally counts results by status (0: no answer) and gives the longest wait.
func Tally(rs []Result) (by map[int]int, longest time.Duration) {
	by = map[int]int{}
	for _, r := range rs {
		by[r.Status]++
		if d := r.Done.Sub(r.Sent); d > longest {
			longest = d
		}
	}
	return by, longest
}

// FirstErr is the first result that got no answer, for a report.
func FirstErr(rs []Result) error {
	for _, r := range rs {
		if r.Err != nil {
			return r.Err
		}
	}
	return nil
}
