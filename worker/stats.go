package worker

import "coregate/worker/control"

// Stats are a worker's connection and request counters, nginx's
// stub_status figures (what APISIX exports as
// apisix_nginx_http_current_connections{state} and
// apisix_http_requests_total), in the shape the supervisor receives them.
// Active counts the client connections open now: Reading (part of a request
// head received), Writing (a request being served) and Waiting (idle
// keep-alive).
type Stats = control.StatsMsg

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
	s := &Stats{Accepted: w.accepted, Handled: w.accepted - w.refused, Requests: w.requests, Active: int64(w.live.Len())}
	for _, cc := range w.live.Items() {
		switch cc.state {
		case csIdle:
			s.Waiting++
		case csHead:
			s.Reading++
		default:
			s.Writing++
		}
	}
	w.stats.Store(s)
}

// Ticks returns how many ticks the event loop has run. A tick is a task
// the loop runs between two batches of events, every 50 ms, so the count
// moves while the loop turns, however busy it is, and stands still while
// it is stuck in one event (or before its first tick). Safe from any
// goroutine.
func (w *Worker) Ticks() uint64 { return w.ticks.Load() }
