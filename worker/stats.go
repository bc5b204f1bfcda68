package worker

// Stats are a worker's connection and request counters, nginx's
// stub_status figures: what APISIX exports as
// apisix_nginx_http_current_connections{state} and
// apisix_http_requests_total.
type Stats struct {
	// Accepted and Handled count client connections since the worker
	// started (every accepted connection is handled: no connection limit
	// drops one). Requests counts request heads received.
	Accepted uint64 `json:"accepted"`
	Handled  uint64 `json:"handled"`
	Requests uint64 `json:"requests"`
	// Active is the client connections open now: Reading (part of a
	// request head received), Writing (a request being served) and
	// Waiting (idle keep-alive) add up to it.
	Active  int64 `json:"active"`
	Reading int64 `json:"reading"`
	Writing int64 `json:"writing"`
	Waiting int64 `json:"waiting"`
}

// Stats returns the counters as of the last tick (at most 50 ms old).
// Safe from any goroutine.
func (w *Worker) Stats() Stats {
	if s := w.stats.Load(); s != nil {
		return *s
	}
	return Stats{}
}

// publishStats runs on the loop at every tick. The state counts come from
// a walk over the open client connections, so the request path pays only
// two increments.
func (w *Worker) publishStats() {
	s := &Stats{Accepted: w.accepted, Handled: w.accepted, Requests: w.requests, Active: int64(len(w.live))}
	for _, cc := range w.live {
		switch {
		case cc.state != csHead:
			s.Writing++
		case cc.hdrTimer:
			s.Reading++
		default:
			s.Waiting++
		}
	}
	w.stats.Store(s)
}
