package supervisor

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	_ "embed"
	"encoding/json"
	"html/template"
	"math"
	"net"
	"net/http"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"coregate/admin/adminapi"
	"coregate/plugins"
	"coregate/worker/shm"
)

// The status page: /status (HTML) and /status.json on the export server,
// the node's figures once a second while they are read (statusIdle). A
// goroutine of the supervisor's (statusSampler) reads what the Prometheus collectors read (the metrics
// segment's regions, the workers' reports, the health region) and each
// worker's /proc/<pid>/stat; a request only serves the last Status made.
// Nothing here touches a worker.

// StatusEvery is how often the status figures are sampled; the rates are
// those of the last interval between two samples.
const StatusEvery = time.Second

// statusWindow is the samples a route's p99 is computed over: its
// latencies of the last statusWindow intervals (10 s).
const statusWindow = 10

// statusIdle: the sampler samples while the pages were read within this
// long, and stops until the next read after it. A sample reads every
// series of the metrics segment (BenchmarkStatusSample: 0.7-2.8 µs a
// series, at a load of 16 on two cores): with the prometheus plugin on
// 1 000 routes and two workers, 70 000 series, 0.15-0.2 s of CPU every
// second, on a node whose status nobody reads.
const statusIdle = time.Minute

// clockTicks is the unit of /proc/<pid>/stat's utime and stime (USER_HZ,
// 100 on every Linux architecture's user ABI).
const clockTicks = 100

// Status is what /status.json serves. Its field names are stable; a field
// may be added.
type Status struct {
	// Time is when the figures were sampled (RFC 3339, UTC).
	Time string `json:"time"`
	// IntervalS is the seconds between the two samples the rates are of
	// (0 until there are two).
	IntervalS float64 `json:"interval_s"`
	// Selector is what steers new connections to the workers: ebpf,
	// cbpf, kernel_hash or plain; SelectorMode the eBPF mode.
	Selector     string         `json:"selector"`
	SelectorMode string         `json:"selector_mode"`
	Workers      []StatusWorker `json:"workers"`
	// Routes are the routes with the prometheus plugin on that have
	// served requests, by route (apisix_http_status's route label).
	Routes []StatusRoute `json:"routes"`
	// Upstreams are the health-checked upstreams and their nodes, as
	// Supervisor.Health lists them.
	Upstreams []HealthUpstream `json:"upstreams"`
}

// StatusWorker is one worker slot.
type StatusWorker struct {
	ID    int    `json:"id"`
	PID   int    `json:"pid"`   // its current process; 0 when down
	State string `json:"state"` // starting, running, stalled or down
	// CPUPercent is its process's CPU time (user and system, every
	// thread) over the last interval, in percent of one CPU.
	CPUPercent   float64 `json:"cpu_percent"`
	RequestsPerS float64 `json:"requests_per_s"`
	// RequestsTotal is the requests of every process of the slot so far.
	RequestsTotal uint64 `json:"requests_total"`
	// Connections is the client connections open now (its last report).
	Connections int64 `json:"connections"`
	// Restarts counts the slot's processes restarted after dying.
	Restarts uint64 `json:"restarts"`
	// HeartbeatAgeMS is the time since its process last reported
	// (control.StatsEvery apart when it is well).
	HeartbeatAgeMS float64 `json:"heartbeat_age_ms"`
	// AcceptedPerS and AcceptedTotal are the client connections the slot
	// accepted; SelectorShare is its share (0 to 1) of those accepted by
	// every slot so far: how the socket selector spread them.
	AcceptedPerS  float64 `json:"accepted_per_s"`
	AcceptedTotal uint64  `json:"accepted_total"`
	SelectorShare float64 `json:"selector_share"`
}

// StatusRoute is one route's figures, from the prometheus plugin's
// apisix_http_status and apisix_http_latency series.
type StatusRoute struct {
	Route         string  `json:"route"`
	RequestsPerS  float64 `json:"requests_per_s"`
	RequestsTotal uint64  `json:"requests_total"`
	// Status is its responses so far by status class, StatusPerS the
	// same over the last interval.
	Status     StatusMix     `json:"status"`
	StatusPerS StatusMixRate `json:"status_per_s"`
	// P99MS is the 99th percentile of its request latency
	// (apisix_http_latency{type="request"}) over the last 10 s, in
	// milliseconds, interpolated inside its bucket as Prometheus's
	// histogram_quantile does; null when it served nothing then.
	P99MS *float64 `json:"p99_ms"`
}

// StatusMix counts responses by status class.
type StatusMix struct {
	S1xx uint64 `json:"1xx"`
	S2xx uint64 `json:"2xx"`
	S3xx uint64 `json:"3xx"`
	S4xx uint64 `json:"4xx"`
	S5xx uint64 `json:"5xx"`
}

// StatusMixRate is StatusMix per second.
type StatusMixRate struct {
	S1xx float64 `json:"1xx"`
	S2xx float64 `json:"2xx"`
	S3xx float64 `json:"3xx"`
	S4xx float64 `json:"4xx"`
	S5xx float64 `json:"5xx"`
}

// statusSample is the counters of one moment.
type statusSample struct {
	at      time.Time
	workers map[int]workerSample
	routes  map[string]*routeSample
}

type workerSample struct {
	pid                int
	cpu                uint64 // utime+stime of pid, clock ticks
	cpuRead            bool   // cpu was read
	accepted, requests uint64
}

type routeSample struct {
	codes [6]uint64          // by status class (index 1 to 5; 0 other)
	lat   map[float64]uint64 // request latency's bucket counts by le (not cumulative)
}

// statusSampler samples the node's figures every StatusEvery while they
// are read (statusIdle) and keeps the last Status made of them. Only its
// goroutine (run) writes ring and buf; latest, readAt and parked are read
// by any number of goroutines, which wake a parked sampler through wake
// (current).
type statusSampler struct {
	s      *Supervisor
	ring   []*statusSample // oldest first, statusWindow+1 at most
	buf    []byte
	latest atomic.Pointer[Status]
	idle   time.Duration // statusIdle
	readAt atomic.Int64  // when the pages were last read, in Unix ns
	parked atomic.Bool   // run waits for a read (wake), sampling nothing
	wake   chan chan struct{}
	done   <-chan struct{} // run's ctx's
}

var (
	statusKey  = shm.AppendKey(nil, "apisix_http_status")
	latencyKey = shm.AppendKey(nil, "apisix_http_latency_bucket")
)

// run samples every StatusEvery until ctx is done, while the pages were
// read within st.idle; then it parks until a read wakes it (current).
// It closes first once the first sample is in latest, so that
// statusHandlers never serves a nil Status.
func (st *statusSampler) run(ctx context.Context, first chan<- struct{}) {
	st.step()
	close(first)
	t := time.NewTicker(StatusEvery)
	defer t.Stop()
	for {
		if time.Since(time.Unix(0, st.readAt.Load())) > st.idle {
			st.parked.Store(true)
			select {
			case <-ctx.Done():
				return
			case done := <-st.wake:
				// The samples before are of another time: the rates start
				// again from this one (0 until the next, as at the first).
				st.ring = st.ring[:0]
				st.step()
				st.parked.Store(false)
				close(done)
			}
			t.Reset(StatusEvery)
			continue
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			st.step()
		case done := <-st.wake: // awake already: latest is fresh
			close(done)
		}
	}
}

// current is the Status a request serves: the last one made, after a
// sample taken now when the sampler was parked. It counts as a read.
func (st *statusSampler) current(ctx context.Context) *Status {
	st.readAt.Store(time.Now().UnixNano())
	if st.parked.Load() {
		done := make(chan struct{})
		select {
		case st.wake <- done:
			select {
			case <-done:
			case <-ctx.Done():
			}
		case <-ctx.Done():
		case <-st.done:
		}
	}
	return st.latest.Load()
}

// step takes a sample, keeps the window's, and makes the Status of them.
func (st *statusSampler) step() {
	cur := st.sample()
	if len(st.ring) > statusWindow {
		st.ring = append(st.ring[:0], st.ring[1:]...)
	}
	st.ring = append(st.ring, cur)
	st.latest.Store(st.status())
}

// sample reads the counters now.
func (st *statusSampler) sample() *statusSample {
	s := st.s
	out := &statusSample{at: time.Now(), workers: map[int]workerSample{}, routes: map[string]*routeSample{}}
	views := s.metrics.slotViews()
	seg := s.seriesMap()
	for id, v := range views {
		w := workerSample{pid: v.pid, accepted: v.accepted, requests: v.requests}
		if seg != nil && id < seg.Regions() {
			n := seg.Node(id)
			w.accepted, w.requests = n.Accepted.Load(), n.Requests.Load()
		}
		if v.pid > 0 {
			w.cpu, w.cpuRead = procCPU(v.pid)
		}
		out.workers[id] = w
	}
	if seg == nil {
		return out
	}
	sf, sok := plugins.LookupMetric("apisix_http_status")
	lf, lok := plugins.LookupMetric("apisix_http_latency")
	if !sok && !lok {
		return out
	}
	codeAt, sRouteAt := slices.Index(sf.Labels, "code"), slices.Index(sf.Labels, "route")
	typeAt, lRouteAt := slices.Index(lf.Labels, "type"), slices.Index(lf.Labels, "route")
	route := func(name string) *routeSample {
		r := out.routes[name]
		if r == nil {
			r = &routeSample{lat: map[float64]uint64{}}
			out.routes[name] = r
		}
		return r
	}
	for i := range seg.Regions() {
		st.buf = seg.Each(i, st.buf, func(key []byte, v uint64) {
			switch {
			case sok && codeAt >= 0 && sRouteAt >= 0 && bytes.HasPrefix(key, statusKey):
				_, labels, ok := shm.SplitKey(key)
				if !ok || len(labels) <= max(codeAt, sRouteAt) {
					return
				}
				class := 0
				if c := labels[codeAt]; len(c) == 3 && c[0] >= '1' && c[0] <= '5' {
					class = int(c[0] - '0')
				}
				route(labels[sRouteAt]).codes[class] += v
			case lok && typeAt >= 0 && lRouteAt >= 0 && bytes.HasPrefix(key, latencyKey):
				_, labels, ok := shm.SplitKey(key)
				// The bucket's le is its last label.
				if !ok || len(labels) <= max(typeAt, lRouteAt)+1 || labels[typeAt] != "request" {
					return
				}
				le, err := strconv.ParseFloat(labels[len(labels)-1], 64)
				if err != nil {
					return
				}
				route(labels[lRouteAt]).lat[le] += v
			}
		})
	}
	return out
}

// procCPU is the user and system time of process pid so far (every
// thread's), in clock ticks; ok is false when it cannot be read.
func procCPU(pid int) (ticks uint64, ok bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	return parseStatCPU(b)
}

// parseStatCPU reads utime and stime (fields 14 and 15) from the text of
// a /proc/<pid>/stat; ok is false when they are not there.
func parseStatCPU(b []byte) (ticks uint64, ok bool) {
	// The command name (field 2) is in parentheses and may hold spaces
	// and parentheses: the fields are counted after its last closing
	// one, from field 3 (state).
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	k, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return u + k, true
}

// status makes the Status of the ring's samples.
func (st *statusSampler) status() *Status {
	s := st.s
	cur := st.ring[len(st.ring)-1]
	prev, old := cur, st.ring[0]
	if len(st.ring) > 1 {
		prev = st.ring[len(st.ring)-2]
	}
	dt := cur.at.Sub(prev.at).Seconds()
	rate := func(now, then uint64) float64 {
		if dt <= 0 || now < then {
			return 0
		}
		return float64(now-then) / dt
	}
	out := &Status{
		Time:         cur.at.UTC().Format(time.RFC3339),
		IntervalS:    dt,
		Selector:     s.selKind,
		SelectorMode: s.opts.Mode.String(),
		Workers:      []StatusWorker{},
		Routes:       []StatusRoute{},
		Upstreams:    s.Health(),
	}
	if out.Upstreams == nil {
		out.Upstreams = []HealthUpstream{}
	}
	views := s.metrics.slotViews()
	var accepted uint64
	for _, w := range cur.workers {
		accepted += w.accepted
	}
	since := time.Since(s.epoch)
	for id, w := range cur.workers {
		v := views[id]
		p := prev.workers[id]
		sw := StatusWorker{
			ID: id, PID: w.pid, State: stateNames[v.state],
			RequestsPerS: rate(w.requests, p.requests), RequestsTotal: w.requests,
			Connections: v.active, Restarts: v.restarts,
			AcceptedPerS: rate(w.accepted, p.accepted), AcceptedTotal: w.accepted,
		}
		if p.pid == w.pid && w.cpuRead && p.cpuRead {
			sw.CPUPercent = rate(w.cpu, p.cpu) * 100 / clockTicks
		}
		if v.beat != nil {
			sw.HeartbeatAgeMS = float64((since - time.Duration(v.beat.Load())).Microseconds()) / 1000
		}
		if accepted > 0 {
			sw.SelectorShare = float64(w.accepted) / float64(accepted)
		}
		out.Workers = append(out.Workers, sw)
	}
	slices.SortFunc(out.Workers, func(a, b StatusWorker) int { return a.ID - b.ID })
	for name, r := range cur.routes {
		p := prev.routes[name]
		if p == nil {
			p = &routeSample{}
		}
		sr := StatusRoute{Route: name}
		var now, then uint64
		for c := range r.codes {
			now += r.codes[c]
			then += p.codes[c]
		}
		sr.RequestsTotal, sr.RequestsPerS = now, rate(now, then)
		sr.Status = StatusMix{r.codes[1], r.codes[2], r.codes[3], r.codes[4], r.codes[5]}
		sr.StatusPerS = StatusMixRate{rate(r.codes[1], p.codes[1]), rate(r.codes[2], p.codes[2]),
			rate(r.codes[3], p.codes[3]), rate(r.codes[4], p.codes[4]), rate(r.codes[5], p.codes[5])}
		var base map[float64]uint64
		if o := old.routes[name]; o != nil && old != cur {
			base = o.lat
		}
		if q, ok := quantile(0.99, r.lat, base); ok {
			sr.P99MS = &q
		}
		out.Routes = append(out.Routes, sr)
	}
	slices.SortFunc(out.Routes, func(a, b StatusRoute) int { return strings.Compare(a.Route, b.Route) })
	return out
}

// quantile is the q-quantile of the observations counted in buckets (by
// upper bound, not cumulative) since base (nil: since the start),
// interpolated linearly inside its bucket as Prometheus's
// histogram_quantile does; one that falls in the +Inf bucket is the
// largest finite bound. ok is false when there are none.
func quantile(q float64, buckets, base map[float64]uint64) (v float64, ok bool) {
	bounds := make([]float64, 0, len(buckets))
	var total uint64
	counts := make(map[float64]uint64, len(buckets))
	for le, n := range buckets {
		if b := base[le]; b <= n {
			n -= b
		}
		counts[le] = n
		total += n
		bounds = append(bounds, le)
	}
	if total == 0 {
		return 0, false
	}
	slices.SortFunc(bounds, cmp.Compare)
	rank := q * float64(total)
	var cum uint64
	lower := 0.0
	for _, le := range bounds {
		n := counts[le]
		if float64(cum+n) >= rank && n > 0 {
			if math.IsInf(le, 1) {
				return lower, true
			}
			return lower + (le-lower)*(rank-float64(cum))/float64(n), true
		}
		cum += n
		if !math.IsInf(le, 1) {
			lower = le
		}
	}
	return lower, true
}

// slotView is one worker slot as nodeMetrics knows it.
type slotView struct {
	state              workerState
	pid                int
	beat               *atomic.Int64
	restarts           uint64
	active             int64
	requests, accepted uint64 // its processes' reports (without the metrics segment)
}

// slotViews returns every worker slot that has a state, by worker id.
func (m *nodeMetrics) slotViews() map[int]slotView {
	m.mu.Lock()
	defer m.mu.Unlock()
	out := make(map[int]slotView, len(m.state))
	for id, st := range m.state {
		sp := m.slots[id]
		out[id] = slotView{state: st, pid: sp.pid, beat: sp.beat, restarts: m.restBy[id], requests: m.goneBy[id]}
	}
	for _, ws := range m.byPID {
		v, ok := out[ws.id]
		if !ok {
			continue
		}
		v.active += ws.st.Active
		v.requests += ws.st.Requests
		v.accepted += ws.st.Accepted
		out[ws.id] = v
	}
	return out
}

//go:embed status.html
var statusHTML string

var statusPage = template.Must(template.New("status").Funcs(template.FuncMap{
	"f1":  func(v float64) string { return strconv.FormatFloat(v, 'f', 1, 64) },
	"pct": func(v float64) string { return strconv.FormatFloat(v*100, 'f', 1, 64) },
	"p99": func(v *float64) string {
		if v == nil {
			return "–"
		}
		return strconv.FormatFloat(*v, 'f', 1, 64)
	},
}).Parse(statusHTML))

// statusAuth is the key the status pages ask for when the export server
// listens on an address other than loopback: one of the Admin API's
// keys (SetStatusKeys), given as the Admin API takes it.
type statusAuth struct {
	check bool
	keys  [][sha256.Size]byte
}

// allow reports whether r may read the status; reason says why not.
func (a *statusAuth) allow(r *http.Request) (reason string, ok bool) {
	if !a.check {
		return "", true
	}
	if len(a.keys) == 0 {
		return "no deployment.admin.admin_key to check the key against", false
	}
	tok, found := adminapi.Token(r)
	if !found {
		return "missing apikey", false
	}
	d := sha256.Sum256([]byte(tok))
	match := false
	for i := range a.keys {
		// Every key is compared, so that the time taken does not say which.
		if subtle.ConstantTimeCompare(d[:], a.keys[i][:]) == 1 {
			match = true
		}
	}
	if !match {
		return "wrong apikey", false
	}
	return "", true
}

// loopbackAddr reports whether a listen address's host is loopback only
// ("" and unspecified addresses are every address).
func loopbackAddr(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.IsLoopback()
}

// SetStatusKeys sets the keys (deployment.admin.admin_key's, any role)
// the status pages accept when the export server listens on an address
// other than loopback; with none, they refuse every request there. Call
// it before ServeMetrics.
func (s *Supervisor) SetStatusKeys(keys []string) {
	s.statusKeys = nil
	for _, k := range keys {
		if k != "" {
			s.statusKeys = append(s.statusKeys, sha256.Sum256([]byte(k)))
		}
	}
}

// statusHandlers registers /status and /status.json on mux, sampled by a
// goroutine that runs until ctx is done. addr is the export server's
// address.
func (s *Supervisor) statusHandlers(ctx context.Context, mux *http.ServeMux, addr string) {
	st := &statusSampler{s: s, idle: statusIdle, wake: make(chan chan struct{}), done: ctx.Done()}
	first := make(chan struct{})
	go st.run(ctx, first)
	<-first
	auth := &statusAuth{check: !loopbackAddr(addr), keys: s.statusKeys}
	guard := func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "status: method not allowed", http.StatusMethodNotAllowed)
			return false
		}
		if reason, ok := auth.allow(r); !ok {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			b, _ := json.Marshal(map[string]string{"error_msg": "failed to check token", "description": reason})
			_, _ = w.Write(append(b, '\n'))
			return false
		}
		w.Header().Set("Cache-Control", "no-store")
		return true
	}
	mux.HandleFunc("/status.json", func(w http.ResponseWriter, r *http.Request) {
		if !guard(w, r) {
			return
		}
		b, err := json.Marshal(st.current(r.Context()))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(append(b, '\n'))
	})
	mux.HandleFunc("/status", func(w http.ResponseWriter, r *http.Request) {
		if !guard(w, r) {
			return
		}
		var b bytes.Buffer
		if err := statusPage.Execute(&b, st.current(r.Context())); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		w.Header().Set("Content-Security-Policy", "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'")
		_, _ = w.Write(b.Bytes())
	})
}
