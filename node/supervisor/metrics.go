package supervisor

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"coregate/admin/spec"
	"coregate/worker/control"
	"coregate/worker/shm"
)

// The node's own metrics, served on APISIX's export server
// (plugin_attr.prometheus: export_addr 127.0.0.1:9091, export_uri
// /apisix/prometheus/metrics). The values are kept in atomics the
// supervisor's loop updates and a scrape reads; nothing here touches a
// worker.
type nodeMetrics struct {
	live     atomic.Int64
	restarts atomic.Uint64
	stalls   atomic.Uint64

	mu     sync.Mutex
	state  map[int]workerState // by worker id
	byPID  map[int]workerStats // each worker process's last report
	gone   control.StatsMsg    // the counters of processes that exited
	goneBy map[int]uint64      // requests of exited processes, by worker id
	slots  map[int]slotProc    // each worker slot's current process
	restBy map[int]uint64      // restarts after dying, by worker id
}

// slotProc is a worker slot's current process, as the status page shows
// it: its pid and its heartbeat (proc.beat, the time since the
// Supervisor's epoch of its last Ready or Stats, stored by its control
// reader).
type slotProc struct {
	pid  int
	beat *atomic.Int64
}

// workerState is what a worker slot's current process is doing, as
// coregate_worker_state shows it.
type workerState uint8

const (
	stateStarting workerState = iota // started, not Ready yet
	stateRunning                     // Ready, beating, in the selector
	stateStalled                     // silent, out of the selector
	stateDown                        // exited, its restart pending
	numStates
)

var stateNames = [numStates]string{"starting", "running", "stalled", "down"}

// setState records worker id's state.
func (m *nodeMetrics) setState(id int, st workerState) {
	m.mu.Lock()
	if m.state == nil {
		m.state = map[int]workerState{}
	}
	m.state[id] = st
	m.mu.Unlock()
}

// forget drops the state of a retired worker slot.
func (m *nodeMetrics) forget(id int) {
	m.mu.Lock()
	delete(m.state, id)
	delete(m.slots, id)
	m.mu.Unlock()
}

// setProc records the process now in worker slot id and its heartbeat.
func (m *nodeMetrics) setProc(id, pid int, beat *atomic.Int64) {
	m.mu.Lock()
	if m.slots == nil {
		m.slots = map[int]slotProc{}
	}
	m.slots[id] = slotProc{pid, beat}
	m.mu.Unlock()
}

// restarted counts a restart of worker slot id after its process died.
func (m *nodeMetrics) restarted(id int) {
	m.restarts.Add(1)
	m.mu.Lock()
	if m.restBy == nil {
		m.restBy = map[int]uint64{}
	}
	m.restBy[id]++
	m.mu.Unlock()
}

// states returns each worker slot's state.
func (m *nodeMetrics) states() map[int]workerState {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]workerState, len(m.state))
	for id, st := range m.state {
		out[id] = st
	}
	return out
}

type workerStats struct {
	id int
	st control.StatsMsg
}

// report records the Stats of worker id's process pid.
func (m *nodeMetrics) report(id, pid int, st control.StatsMsg) {
	m.mu.Lock()
	if m.byPID == nil {
		m.byPID = map[int]workerStats{}
	}
	m.byPID[pid] = workerStats{id, st}
	m.mu.Unlock()
}

// exited folds the counters of a process that is gone into the node's
// totals, so that they do not go back when a worker is restarted or
// replaced. What it served after its last report is not counted.
func (m *nodeMetrics) exited(pid int) {
	m.mu.Lock()
	if ws, ok := m.byPID[pid]; ok {
		addCounters(&m.gone, ws.st)
		if m.goneBy == nil {
			m.goneBy = map[int]uint64{}
		}
		m.goneBy[ws.id] += ws.st.Requests
		delete(m.byPID, pid)
	}
	m.mu.Unlock()
}

// sum is the node's figures: the counters of every process it ran, the
// connections of those running now.
func (m *nodeMetrics) sum() control.StatsMsg {
	m.mu.Lock()
	defer m.mu.Unlock()
	t := m.gone
	for _, ws := range m.byPID {
		st := ws.st
		addCounters(&t, st)
		t.Active += st.Active
		t.Reading += st.Reading
		t.Writing += st.Writing
		t.Waiting += st.Waiting
	}
	return t
}

// addCounters adds the counters of st (not its connections now) to t.
func addCounters(t *control.StatsMsg, st control.StatsMsg) {
	t.Accepted += st.Accepted
	t.Handled += st.Handled
	t.Requests += st.Requests
}

// perWorker returns each worker slot's requests (its processes' so far)
// and open client connections, by worker id.
func (m *nodeMetrics) perWorker() (requests map[int]uint64, active map[int]int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	requests, active = map[int]uint64{}, map[int]int64{}
	for id, n := range m.goneBy {
		requests[id] = n
	}
	for _, ws := range m.byPID {
		requests[ws.id] += ws.st.Requests
		active[ws.id] += ws.st.Active
	}
	return requests, active
}

// connCollector exports the workers' Stats under APISIX's names (which are
// nginx's stub_status figures, all gauges), and per worker, to show how
// evenly the socket selector spreads the load.
// With the metrics segment (seg), the counters (accepted, handled,
// requests) are read from the workers' regions, where each worker counts
// as it goes, so that nothing a worker counted is lost when it dies; the
// connections open now come from the running workers' reports.
type connCollector struct {
	m   *nodeMetrics
	seg *shm.MetricsMap
}

var (
	connDesc = prometheus.NewDesc("apisix_nginx_http_current_connections",
		"Number of HTTP connections", []string{"state"}, nil)
	requestsDesc = prometheus.NewDesc("apisix_http_requests_total",
		"The total number of client requests since the gateway started", nil, nil)
	workerRequestsDesc = prometheus.NewDesc("coregate_worker_requests_total",
		"Client requests served by each worker (all its processes so far).", []string{"worker"}, nil)
	workerConnsDesc = prometheus.NewDesc("coregate_worker_connections",
		"Client connections open on each worker.", []string{"worker"}, nil)
	workerStateDesc = prometheus.NewDesc("coregate_worker_state",
		"Each worker's state, 1 for the one it is in: starting, running, stalled (silent past its heartbeats: out of the socket selector) or down (exited, restart pending).",
		[]string{"worker", "state"}, nil)
)

func (c connCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- connDesc
	ch <- requestsDesc
	ch <- workerRequestsDesc
	ch <- workerConnsDesc
	ch <- workerStateDesc
}

func (c connCollector) Collect(ch chan<- prometheus.Metric) {
	t := c.m.sum()
	requests, active := c.m.perWorker()
	if c.seg != nil {
		t.Accepted, t.Handled, t.Requests = 0, 0, 0
		states := c.m.states()
		for i := range c.seg.Regions() {
			n := c.seg.Node(i)
			t.Accepted += n.Accepted.Load()
			t.Handled += n.Handled.Load()
			r := n.Requests.Load()
			t.Requests += r
			if _, ok := states[i]; ok || r > 0 {
				requests[i] = r
			} else {
				delete(requests, i)
			}
		}
	}
	for _, x := range []struct {
		state string
		v     float64
	}{
		{"accepted", float64(t.Accepted)},
		{"active", float64(t.Active)},
		{"handled", float64(t.Handled)},
		{"reading", float64(t.Reading)},
		{"waiting", float64(t.Waiting)},
		{"writing", float64(t.Writing)},
	} {
		ch <- prometheus.MustNewConstMetric(connDesc, prometheus.GaugeValue, x.v, x.state)
	}
	ch <- prometheus.MustNewConstMetric(requestsDesc, prometheus.GaugeValue, float64(t.Requests))
	for id, n := range requests {
		w := strconv.Itoa(id)
		ch <- prometheus.MustNewConstMetric(workerRequestsDesc, prometheus.CounterValue, float64(n), w)
		ch <- prometheus.MustNewConstMetric(workerConnsDesc, prometheus.GaugeValue, float64(active[id]), w)
	}
	for id, cur := range c.m.states() {
		w := strconv.Itoa(id)
		for st, name := range stateNames {
			v := 0.0
			if workerState(st) == cur {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(workerStateDesc, prometheus.GaugeValue, v, w, name)
		}
	}
}

func (s *Supervisor) registry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	host, _ := os.Hostname()
	info := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "apisix_node_info",
		Help:        "Info of the gateway node.",
		ConstLabels: prometheus.Labels{"hostname": host, "version": spec.CompatVersion},
	})
	info.Set(1)
	sel := prometheus.NewGauge(prometheus.GaugeOpts{
		Name:        "coregate_socket_selector",
		Help:        "What steers new connections to workers (1 for the one in use): ebpf, cbpf, kernel_hash or plain, and the eBPF mode.",
		ConstLabels: prometheus.Labels{"kind": s.selKind, "mode": s.opts.Mode.String()},
	})
	sel.Set(1)
	reg.MustRegister(info, sel,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "coregate_workers",
			Help: "Worker processes running now.",
		}, func() float64 { return float64(s.metrics.live.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "coregate_worker_restarts_total",
			Help: "Worker processes restarted after dying.",
		}, func() float64 { return float64(s.metrics.restarts.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "coregate_worker_stalls_total",
			Help: "Times a worker missed its heartbeats and was taken out of the socket selector.",
		}, func() float64 { return float64(s.metrics.stalls.Load()) }),
		connCollector{&s.metrics, s.seriesMap()},
	)
	if s.health != nil {
		reg.MustRegister(healthCollector{s.health})
	}
	if s.series != nil {
		reg.MustRegister(&seriesCollector{seg: s.series.MetricsMap, extra: s.extraLabels})
	}
	reg.MustRegister(s.opts.Collectors...)
	return reg
}

func (s *Supervisor) seriesMap() *shm.MetricsMap {
	if s.series == nil {
		return nil
	}
	return s.series.MetricsMap
}

// ServeMetrics serves the node's metrics on addr at path until ctx is done,
// and the status pages (/status, /status.json: statusHandlers) beside
// them. It returns once listening (or failing to).
func (s *Supervisor) ServeMetrics(ctx context.Context, addr, path string) error {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	mux := http.NewServeMux()
	mux.Handle(path, promhttp.HandlerFor(s.prefixed(s.registry()), promhttp.HandlerOpts{}))
	if path != "/status" && path != "/status.json" {
		s.statusHandlers(ctx, mux, addr)
	} else {
		s.log.Warn("status page not served: export_uri takes its path", "path", path)
	}
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		<-ctx.Done()
		_ = srv.Close()
	}()
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			s.log.Error("metrics server", "err", err)
		}
	}()
	s.log.Info("metrics", "addr", l.Addr().String(), "path", path)
	return nil
}

// countLive refreshes the live-worker gauge from the slots.
func (s *Supervisor) countLive() {
	n := 0
	for _, p := range s.workers {
		if p.ps != nil {
			n++
		}
	}
	s.metrics.live.Store(int64(n))
}
