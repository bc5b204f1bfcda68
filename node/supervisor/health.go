package supervisor

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"coregate/admin/spec"
	"coregate/worker/shm"
)

// healthChecks are the node's active health checks (APISIX's
// checks.active): one prober per node of every checked upstream of the
// configuration, in the supervisor (not once per worker), reporting into
// the health region that every worker reads when it picks a node
// (shm.Health).
//
// The probers of one upstream's checks share a semaphore of
// checks.active.concurrency probes (probeSlots): at most that many are in
// flight at once, as lua-resty-healthcheck's checker runs that many
// threads over its targets.
//
// The supervisor alone claims and frees the nodes' slots of the region
// (update); the workers look them up when they build a configuration, which
// the supervisor sends after update has run. The slot of a node that a
// configuration drops is kept (retired) until the next configuration's
// update, and freed then unless that one names the node again: the
// supervisor sends the next configuration only once every running worker
// has built the one before, or has held it up for maxHold, so a worker
// that still reads or reports into a freed slot, given meanwhile to another
// node, is one that was held up past maxHold, one that refused the
// configuration that dropped the node, or an old one draining after a
// restart: it sees the other node's state until it moves on, as it would
// a node's state of a moment ago.
//
// update runs on the supervisor's goroutine; the probers run on their own
// goroutines; statuses may be called from any goroutine. mu guards probes,
// order, slots and retired.
type healthChecks struct {
	seg *shm.HealthSegment
	log *slog.Logger
	// roots are the CAs an https probe's certificate is verified against
	// (apisix.ssl.ssl_trusted_certificate, as the workers' https
	// upstreams); nil: the system's. Set before the first update.
	roots *x509.CertPool

	mu     sync.Mutex
	probes map[string]*prober     // by shm.HealthKey
	order  []string               // upstream names, in the configuration's order
	slots  map[string]*probeSlots // by upstream name
	// retired are the slots of the nodes the last update dropped, by
	// shm.HealthKey: the next update frees them.
	retired map[string]*shm.HealthNode
	// checked finds the configuration's checked upstreams from the last
	// one's, at the cost of what changed.
	checked checkedScan
	// settled: the last update started every prober its configuration
	// asked for and logged nothing, so an update given the same checked
	// upstreams has nothing to do but free what that one retired.
	settled bool
}

// probeSlots bounds the probes in flight of one upstream's checks: a
// probe holds one of its len(ch) places while it runs. Safe for
// concurrent use.
type probeSlots struct {
	raw string // the checks it was made for
	// checks are raw's, parsed: the same checks parse the same, so an
	// update that finds an upstream's checks unchanged takes them from
	// here, where parsing them again took 2 000 JSON decodings a push of
	// 2 000 checked upstreams. Read-only, shared by the probers.
	checks *spec.Checks
	ch     chan struct{}
}

// prober probes one node of one upstream.
type prober struct {
	key      string // shm.HealthKey
	upstream string // Control API name: /apisix/upstreams/1
	scheme   string // the upstream's: the port a node without one has
	host     string // the node's host, unbracketed
	port     int
	raw      string // the checks it was started with
	checks   *spec.Checks
	node     *shm.HealthNode
	slots    *probeSlots // shared by the upstream's probers
	roots    *x509.CertPool
	cancel   context.CancelFunc
}

func newHealthChecks(seg *shm.HealthSegment, log *slog.Logger) *healthChecks {
	return &healthChecks{seg: seg, log: log, probes: map[string]*prober{}, slots: map[string]*probeSlots{},
		retired: map[string]*shm.HealthNode{}}
}

// update starts the probers sp's checked upstreams need and stops those
// it no longer needs; a node whose upstream's checks changed starts again
// healthy, as APISIX makes a new checker. It claims the slots of the
// nodes it starts, frees those the previous update retired that sp does
// not name, and retires those of the nodes it stops. It does not block.
//
// It runs on every push, and costs what changed (checkedScan): sp's
// checked upstreams are found from the last update's, and when they are
// the same objects under the same names and the last update settled,
// update would find every prober it wants running with the same checks,
// and so only frees the slots the last update retired (none of which it
// names: they are those it stopped). At 50 000 routes and 20 000
// upstreams, one route replaced a push, it took 0.5 ms of CPU a push
// walking every object (BenchmarkHealthUpdate).
func (h *healthChecks) update(sp *spec.Spec) {
	h.mu.Lock()
	defer h.mu.Unlock()
	cus, changed := h.checked.scan(sp)
	if !changed && h.settled {
		for key, n := range h.retired {
			h.seg.Free(n)
			delete(h.retired, key)
		}
		return
	}
	h.apply(cus)
}

// apply is update's work for a configuration's checked upstreams, in
// spec.Spec.CheckedUpstreams's order: every one looked at.
func (h *healthChecks) apply(cus []spec.CheckedUpstream) {
	want := map[string]bool{}
	var order []string
	var starts []*prober
	h.settled = true
	for _, cu := range cus {
		rare := cu.Upstream.Rare()
		slots := h.slots[cu.Name]
		if slots == nil || slots.raw != string(rare.Checks) {
			checks, err := spec.ParseChecks(rare.Checks)
			if err != nil || checks == nil {
				h.log.Error("health checks not run", "upstream", cu.Name, "err", err)
				h.settled = false
				continue
			}
			slots = &probeSlots{raw: string(rare.Checks), checks: checks, ch: make(chan struct{}, max(checks.Active.Concurrency, 1))}
			h.slots[cu.Name] = slots
		}
		checks := slots.checks
		order = append(order, cu.Name)
		scheme := rare.Scheme
		if scheme == "" {
			scheme = "http"
		}
		for _, n := range cu.Upstream.Nodes.List {
			addr := n.Addr(scheme)
			key := shm.HealthKey(cu.Name, addr)
			if want[key] {
				continue
			}
			want[key] = true
			if p := h.probes[key]; p != nil && p.raw == string(rare.Checks) {
				continue
			} else if p != nil {
				p.cancel()
				delete(h.probes, key)
			}
			host, port, _ := net.SplitHostPort(addr)
			pn, _ := strconv.Atoi(port)
			p := &prober{key: key, upstream: cu.Name, scheme: scheme, host: host, port: pn, raw: string(rare.Checks),
				checks: checks, slots: slots, roots: h.roots}
			h.probes[key] = p
			starts = append(starts, p)
		}
	}
	for key, n := range h.retired {
		if !want[key] {
			h.seg.Free(n)
		}
		delete(h.retired, key)
	}
	for key, p := range h.probes {
		if !want[key] {
			p.cancel()
			delete(h.probes, key)
			h.retired[key] = p.node
		}
	}
	for _, p := range starts {
		if p.node = h.seg.Node(p.key); p.node == nil {
			h.log.Error("health region full: node not checked", "upstream", p.upstream, "node", p.key[len(p.upstream)+1:])
			delete(h.probes, p.key)
			h.settled = false
			continue
		}
		ctx, cancel := context.WithCancel(context.Background())
		p.cancel = cancel
		p.node.Reset()
		go p.run(ctx, h.log)
	}
	if len(h.slots) > 0 {
		listed := make(map[string]bool, len(order))
		for _, name := range order {
			listed[name] = true
		}
		for name := range h.slots {
			if !listed[name] {
				delete(h.slots, name)
			}
		}
	}
	h.order = order
}

// stop stops every prober.
func (h *healthChecks) stop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for key, p := range h.probes {
		p.cancel()
		delete(h.probes, key)
	}
	h.checked.reset()
	h.settled = false
}

// run probes until ctx ends: every healthy.interval while the node is
// healthy, every unhealthy.interval while it is not (an interval of 0
// stops the probes in that state, as lua-resty-healthcheck's).
func (p *prober) run(ctx context.Context, log *slog.Logger) {
	a := &p.checks.Active
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		wait := a.Healthy.Interval
		if !p.node.Healthy() {
			wait = a.Unhealthy.Interval
		}
		probe := wait > 0
		if !probe {
			wait = time.Second // look at the state again
		}
		t.Reset(wait)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !probe {
			continue
		}
		r, counted := p.probe(ctx)
		if !counted || ctx.Err() != nil {
			continue
		}
		limit := a.Healthy.Successes
		switch r {
		case shm.HTTPFailure:
			limit = a.Unhealthy.HTTPFailures
		case shm.TCPFailure:
			limit = a.Unhealthy.TCPFailures
		case shm.Timeout:
			limit = a.Unhealthy.Timeouts
		}
		if p.node.Report(r, limit) {
			if p.node.Healthy() {
				log.Info("upstream node healthy", "upstream", p.upstream, "node", net.JoinHostPort(p.host, strconv.Itoa(p.port)))
			} else {
				log.Warn("upstream node unhealthy", "upstream", p.upstream, "node", net.JoinHostPort(p.host, strconv.Itoa(p.port)), "report", reportName(r))
			}
		}
	}
}

// probe sends one probe: a TCP connect, or an HTTP(S) request of
// http_path (http_method, GET unless written, with req_headers and
// http_req_body) whose status is read. counted is false for a status that
// is in neither list, and for a probe that ctx ended while it waited for
// one of its upstream's places (probeSlots): its timeout starts once it
// has one.
func (p *prober) probe(ctx context.Context) (r shm.Report, counted bool) {
	select {
	case p.slots.ch <- struct{}{}:
		defer func() { <-p.slots.ch }()
	case <-ctx.Done():
		return 0, false
	}
	a := &p.checks.Active
	port := p.port
	if a.Port != 0 {
		port = a.Port
	}
	addr := net.JoinHostPort(p.host, strconv.Itoa(port))
	ctx, cancel := context.WithTimeout(ctx, a.Timeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return failure(err), true
	}
	defer func() { _ = c.Close() }()
	if a.Type == "tcp" {
		return shm.Success, true
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	host := a.Host
	if host == "" {
		host = p.host
	}
	if a.Type == "https" {
		// Verified, unless https_verify_certificate is false, against
		// ssl_trusted_certificate's CAs, as APISIX's probes are
		// (lua_ssl_trusted_certificate).
		tc := tls.Client(c, &tls.Config{ServerName: host, RootCAs: p.roots, InsecureSkipVerify: !a.VerifyCert})
		if err := tc.HandshakeContext(ctx); err != nil {
			return failure(err), true
		}
		c = tc
	}
	if strings.IndexByte(host, ':') >= 0 {
		host = "[" + host + "]"
	}
	if port != spec.DefaultPort(a.Type) {
		host += ":" + strconv.Itoa(port)
	}
	var b strings.Builder
	b.WriteString(a.Method + " " + a.HTTPPath + " HTTP/1.0\r\nHost: " + host + "\r\nConnection: close\r\n")
	for _, h := range a.ReqHeaders {
		b.WriteString(h + "\r\n")
	}
	if a.ReqBody != "" {
		b.WriteString("Content-Length: " + strconv.Itoa(len(a.ReqBody)) + "\r\n")
	}
	b.WriteString("\r\n" + a.ReqBody)
	if _, err := c.Write([]byte(b.String())); err != nil {
		return failure(err), true
	}
	line, err := bufio.NewReaderSize(c, 512).ReadString('\n')
	if err != nil {
		return failure(err), true
	}
	// "HTTP/1.1 200 OK"
	f := strings.Fields(line)
	if len(f) < 2 || !strings.HasPrefix(f[0], "HTTP/") {
		return shm.HTTPFailure, true
	}
	status, err := strconv.Atoi(f[1])
	if err != nil {
		return shm.HTTPFailure, true
	}
	switch {
	case a.Healthy.HasStatus(status):
		return shm.Success, true
	case a.Unhealthy.HasStatus(status):
		return shm.HTTPFailure, true
	}
	return 0, false
}

// failure is a failed probe's report: a timeout, or a TCP failure.
func failure(err error) shm.Report {
	if errors.Is(err, os.ErrDeadlineExceeded) || errors.Is(err, context.DeadlineExceeded) {
		return shm.Timeout
	}
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return shm.Timeout
	}
	return shm.TCPFailure
}

func reportName(r shm.Report) string {
	return [...]string{"success", "http_failure", "tcp_failure", "timeout_failure"}[r]
}

// HealthCounter is a node's counters, as APISIX's Control API shows them.
type HealthCounter struct {
	Success        int `json:"success"`
	HTTPFailure    int `json:"http_failure"`
	TCPFailure     int `json:"tcp_failure"`
	TimeoutFailure int `json:"timeout_failure"`
}

// HealthNode is one checked node, as APISIX's Control API shows it.
type HealthNode struct {
	IP       string        `json:"ip"`
	Port     int           `json:"port"`
	Hostname string        `json:"hostname"`
	Status   string        `json:"status"` // healthy or unhealthy
	Counter  HealthCounter `json:"counter"`
}

// HealthUpstream is one checked upstream, as APISIX's Control API shows
// it (GET /v1/healthcheck): its name, its active check's type, its nodes.
type HealthUpstream struct {
	Name  string       `json:"name"`
	Type  string       `json:"type"`
	Nodes []HealthNode `json:"nodes"`
}

// Health lists the checked upstreams of the configuration and their
// nodes' states and counters, in the configuration's order, nodes by
// address. Safe for concurrent use; nil when no upstream is checked.
func (s *Supervisor) Health() []HealthUpstream {
	if s.health == nil {
		return nil
	}
	return s.health.statuses()
}

func (h *healthChecks) statuses() []HealthUpstream {
	h.mu.Lock()
	defer h.mu.Unlock()
	by := map[string]*HealthUpstream{}
	out := make([]HealthUpstream, len(h.order))
	for i, name := range h.order {
		out[i] = HealthUpstream{Name: name, Nodes: []HealthNode{}}
		by[name] = &out[i]
	}
	for _, p := range h.probes {
		u := by[p.upstream]
		if u == nil {
			continue
		}
		u.Type = p.checks.Active.Type
		su, hf, tf, to := p.node.Counters()
		st := "healthy"
		if !p.node.Healthy() {
			st = "unhealthy"
		}
		u.Nodes = append(u.Nodes, HealthNode{IP: p.host, Port: p.port, Hostname: p.host, Status: st,
			Counter: HealthCounter{Success: su, HTTPFailure: hf, TCPFailure: tf, TimeoutFailure: to}})
	}
	for i := range out {
		slices.SortFunc(out[i].Nodes, func(a, b HealthNode) int {
			if c := strings.Compare(a.IP, b.IP); c != 0 {
				return c
			}
			return a.Port - b.Port
		})
	}
	return out
}

var upstreamStatusDesc = prometheus.NewDesc("apisix_upstream_status",
	"Upstream status from health check", []string{"name", "ip", "port"}, nil)

// healthCollector exports every checked node's state as APISIX's
// apisix_upstream_status: 1 healthy, 0 unhealthy.
type healthCollector struct{ h *healthChecks }

func (c healthCollector) Describe(ch chan<- *prometheus.Desc) { ch <- upstreamStatusDesc }

func (c healthCollector) Collect(ch chan<- prometheus.Metric) {
	for _, u := range c.h.statuses() {
		for _, n := range u.Nodes {
			v := 0.0
			if n.Status == "healthy" {
				v = 1
			}
			ch <- prometheus.MustNewConstMetric(upstreamStatusDesc, prometheus.GaugeValue, v, u.Name, n.IP, strconv.Itoa(n.Port))
		}
	}
}
