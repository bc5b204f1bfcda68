package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/internal/e2e"
)

// checkedNode is an upstream node a health test drives: it answers its
// probes (/status) as its mode says, counts the proxied requests (any
// other path) it receives, and can die (its listener and connections
// closed) and come back on the same address.
type checkedNode struct {
	t       *testing.T
	addr    string
	mode    atomic.Value // "ok", "500" or "hang"
	traffic atomic.Int64 // proxied requests received
	// answer is the status of the proxied requests (0: 200).
	answer atomic.Int64
	probes atomic.Int64
	// lastProbe is the last probe's method, Host, X-Probe and body.
	lastProbe atomic.Value
	mu        sync.Mutex
	srv       *http.Server
	hang      chan struct{}
}

func newCheckedNode(t *testing.T) *checkedNode {
	n := &checkedNode{t: t, hang: make(chan struct{})}
	n.mode.Store("ok")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	n.addr = ln.Addr().String()
	n.serve(ln)
	t.Cleanup(func() {
		close(n.hang)
		n.kill()
	})
	return n
}

func (n *checkedNode) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/status" {
			n.traffic.Add(1)
			if s := n.answer.Load(); s != 0 {
				w.WriteHeader(int(s))
			}
			_, _ = w.Write([]byte(n.addr))
			return
		}
		n.probes.Add(1)
		body, _ := io.ReadAll(r.Body)
		n.lastProbe.Store(r.Method + " " + r.Host + " " + r.Header.Get("X-Probe") + " " + string(body))
		switch n.mode.Load().(string) {
		case "500":
			w.WriteHeader(500)
		case "hang":
			select {
			case <-n.hang:
			case <-r.Context().Done():
			}
		}
	})}
	n.mu.Lock()
	n.srv = srv
	n.mu.Unlock()
	go func() { _ = srv.Serve(ln) }()
}

// kill closes the node's listener and every connection: connects are
// refused.
func (n *checkedNode) kill() {
	n.mu.Lock()
	srv := n.srv
	n.srv = nil
	n.mu.Unlock()
	if srv != nil {
		_ = srv.Close()
	}
}

// revive listens again on the node's address.
func (n *checkedNode) revive() {
	n.t.Helper()
	var ln net.Listener
	eventually(n.t, 5*time.Second, func() error {
		var err error
		ln, err = net.Listen("tcp", n.addr)
		return err
	})
	n.serve(ln)
}

// load sends requests to url from conc goroutines until stop is called
// (bounded: at most 60 s and 200 000 requests), and counts the answers by
// status.
type load struct {
	cancel context.CancelFunc
	wg     sync.WaitGroup
	ok     atomic.Int64
	failed atomic.Int64
}

func startLoad(t *testing.T, url string, conc int) *load {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	l := &load{cancel: cancel}
	var sent atomic.Int64
	for range conc {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			c := newClient(t)
			for ctx.Err() == nil && sent.Add(1) <= 200000 {
				r, err := tryDo(c, "GET", url, "", nil, nil)
				if err == nil && r.status == 200 {
					l.ok.Add(1)
				} else {
					l.failed.Add(1)
				}
				time.Sleep(time.Millisecond)
			}
		}()
	}
	t.Cleanup(l.stop)
	return l
}

func (l *load) stop() { l.cancel(); l.wg.Wait() }

// noTrafficTo asserts that node gets no proxied request over d while the
// load runs, after a settle for the requests already sent to it.
func noTrafficTo(t *testing.T, n *checkedNode, l *load, d time.Duration) {
	t.Helper()
	time.Sleep(200 * time.Millisecond)
	before, okBefore := n.traffic.Load(), l.ok.Load()
	time.Sleep(d)
	if got := n.traffic.Load() - before; got != 0 {
		t.Errorf("node %s known unhealthy got %d requests", n.addr, got)
	}
	if l.ok.Load()-okBefore < 20 {
		t.Errorf("only %d requests answered 200 meanwhile", l.ok.Load()-okBefore)
	}
}

// trafficTo waits until node gets proxied requests again.
func trafficTo(t *testing.T, n *checkedNode) {
	t.Helper()
	before := n.traffic.Load()
	eventually(t, 10*time.Second, func() error {
		if n.traffic.Load()-before < 5 {
			return errors.New("no traffic yet")
		}
		return nil
	})
}

func checkedRoute(t *testing.T, active, passive obj, nodes ...*checkedNode) string {
	var ns []nodeSpec
	for _, n := range nodes {
		ns = append(ns, nodeSpec{addr: n.addr, weight: 1})
	}
	checks := obj{"active": active}
	if passive != nil {
		checks["passive"] = passive
	}
	return routesYAML(obj{"id": 1, "uri": "/hc", "upstream": obj{"type": "roundrobin", "retries": 1,
		"nodes": nodeList(t, ns...), "checks": checks}})
}

// TestHealthCheckActive: the supervisor's probes find a node that answers
// 500, one that is dead and one that hangs; from the log line that says so
// on, none of them gets a request under load; each gets traffic again once
// its probes pass. Every node unhealthy: they are tried anyway.
func TestHealthCheckActive(t *testing.T) {
	a, b := newCheckedNode(t), newCheckedNode(t)
	active := obj{"type": "http", "http_path": "/status", "timeout": 0.5,
		"healthy":   obj{"interval": 1, "successes": 1},
		"unhealthy": obj{"interval": 1, "http_failures": 1, "tcp_failures": 1, "timeouts": 1}}
	g := startGateway(t, checkedRoute(t, active, nil, a, b), "")
	l := startLoad(t, g.url("/hc"), 4)
	trafficTo(t, a)
	trafficTo(t, b)

	unhealthy, healthy := 0, 0
	down := func(n *checkedNode, how string) {
		t.Helper()
		switch how {
		case "dead":
			n.kill()
		default:
			n.mode.Store(how)
		}
		unhealthy++
		g.waitLog(`upstream node unhealthy.*node=`+n.addr, unhealthy, 10*time.Second)
		noTrafficTo(t, n, l, 2*time.Second)
	}
	up := func(n *checkedNode, how string) {
		t.Helper()
		if how == "dead" {
			n.revive()
		}
		n.mode.Store("ok")
		healthy++
		g.waitLog(`upstream node healthy.*node=`+n.addr, healthy, 10*time.Second)
		trafficTo(t, n)
	}
	for _, how := range []string{"500", "dead", "hang"} {
		t.Run(how, func(t *testing.T) {
			down(b, how)
			up(b, how)
		})
	}
	t.Run("all", func(t *testing.T) {
		a.mode.Store("500")
		b.mode.Store("500")
		g.waitLog(`upstream node unhealthy.*node=`+a.addr, 1, 10*time.Second)
		unhealthy++
		g.waitLog(`upstream node unhealthy.*node=`+b.addr, unhealthy, 10*time.Second)
		// Both known unhealthy: both still get the traffic.
		trafficTo(t, a)
		trafficTo(t, b)
	})
	l.stop()
	if n := l.failed.Load(); n > 0 {
		t.Logf("%d requests failed (in flight to a node as it died)", n)
	}
}

// TestHealthCheckPassive: a node whose real traffic answers 500 while
// its probes pass is marked unhealthy by the workers' counts of that
// traffic (passive checks), and gets no more requests: its probes, which
// pass, come too seldom to mark it healthy again within the test.
func TestHealthCheckPassive(t *testing.T) {
	a, b := newCheckedNode(t), newCheckedNode(t)
	active := obj{"type": "http", "http_path": "/status",
		"healthy":   obj{"interval": 1, "successes": 3},
		"unhealthy": obj{"interval": 60}}
	passive := obj{"type": "http", "unhealthy": obj{"http_statuses": []int{500}, "http_failures": 3}}
	g := startGateway(t, checkedRoute(t, active, passive, a, b), "")
	l := startLoad(t, g.url("/hc"), 2)
	trafficTo(t, a)
	trafficTo(t, b)
	b.answer.Store(500)
	eventually(t, 10*time.Second, func() error {
		before := l.failed.Load()
		time.Sleep(500 * time.Millisecond)
		if l.failed.Load() != before {
			return errors.New("requests still answered 500")
		}
		return nil
	})
	noTrafficTo(t, b, l, 2*time.Second)
	if n := l.failed.Load(); n < 3 {
		t.Errorf("%d requests answered 500 before the node was marked, want 3 or more", n)
	}
	if a.probes.Load() == 0 {
		t.Error("no probe reached the nodes")
	}
}

// TestHealthCheckMetric: apisix_upstream_status{name,ip,port} says each
// checked node's state (1 healthy, 0 unhealthy) in the node's metrics,
// which promtool accepts, with two workers that both stop sending to the
// node found unhealthy.
func TestHealthCheckMetric(t *testing.T) {
	promtool := requirePromtool(t)
	a, b := newCheckedNode(t), newCheckedNode(t)
	active := obj{"http_path": "/status", "healthy": obj{"successes": 1},
		"unhealthy": obj{"http_failures": 1}, "host": "probe.test", "req_headers": []string{"X-Probe: 1"},
		"http_method": "POST", "http_req_body": "ping"}
	mport := freePort(t)
	g := startSupervisor(t, checkedRoute(t, active, nil, a, b), exportConfig(2, mport), 2)
	status := func() map[string]float64 {
		t.Helper()
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/m", mport))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		promCheckAPISIX(t, promtool, string(body))
		out := map[string]float64{}
		for _, s := range find(parseText(t, string(body)), "apisix_upstream_status", map[string]string{"name": "/apisix/routes/1"}) {
			out[net.JoinHostPort(s.labels["ip"], s.labels["port"])] = s.value
		}
		return out
	}
	if got := status(); got[a.addr] != 1 || got[b.addr] != 1 || len(got) != 2 {
		t.Fatalf("apisix_upstream_status before: %v, want both nodes 1", got)
	}
	eventually(t, 5*time.Second, func() error {
		_, port, _ := net.SplitHostPort(a.addr)
		if got, _ := a.lastProbe.Load().(string); got != "POST probe.test:"+port+" 1 ping" {
			return fmt.Errorf("probe %q", got)
		}
		return nil
	})
	l := startLoad(t, g.url("/hc"), 4)
	b.mode.Store("500")
	g.waitLog(`upstream node unhealthy.*node=`+b.addr, 1, 10*time.Second)
	if got := status(); got[a.addr] != 1 || got[b.addr] != 0 {
		t.Fatalf("apisix_upstream_status with %s unhealthy: %v", b.addr, got)
	}
	noTrafficTo(t, b, l, 2*time.Second)
	b.mode.Store("ok")
	g.waitLog(`upstream node healthy.*node=`+b.addr, 1, 10*time.Second)
	if got := status(); got[b.addr] != 1 {
		t.Fatalf("apisix_upstream_status with %s healthy again: %v", b.addr, got)
	}
}

// TestHealthCheckSlotsFreed: a node whose health region holds 4 slots
// (--health-slots 4) runs the checks of ten routes' upstreams of two nodes
// each, one configuration after the other: the slots of the nodes each
// configuration drops are given back, so the last route's checks still
// find a node that answers 500, which then gets no traffic.
func TestHealthCheckSlotsFreed(t *testing.T) {
	a, b := newCheckedNode(t), newCheckedNode(t)
	active := obj{"type": "http", "http_path": "/status", "timeout": 0.5,
		"healthy":   obj{"interval": 1, "successes": 1},
		"unhealthy": obj{"interval": 1, "http_failures": 1, "tcp_failures": 1}}
	route := func(i int) string {
		return routesYAML(obj{"id": i, "uri": fmt.Sprint("/hc", i), "upstream": obj{"type": "roundrobin", "retries": 1,
			"nodes":  nodeList(t, nodeSpec{addr: a.addr, weight: 1}, nodeSpec{addr: b.addr, weight: 1}),
			"checks": obj{"active": active}}})
	}
	g := bindGateway(e2e.Start(t, e2e.Options{Bin: binPath, APISIX: route(1), Listen: true,
		Config: func(port int) string { return baseConfig(port, "") }, Args: []string{"--health-slots", "4"}}))
	c := newClient(t)
	const last = 10
	for i := 2; i <= last; i++ {
		g.rewrite(route(i))
		eventually(t, 10*time.Second, func() error {
			r, err := tryDo(c, "GET", g.url(fmt.Sprint("/hc", i)), "", nil, nil)
			if err != nil || r.status != 200 {
				return fmt.Errorf("route %d not served yet: %d %v", i, r.status, err)
			}
			return nil
		})
	}
	l := startLoad(t, g.url(fmt.Sprint("/hc", last)), 2)
	trafficTo(t, a)
	trafficTo(t, b)
	b.mode.Store("500")
	g.waitLog(fmt.Sprint(`upstream node unhealthy.*upstream=/apisix/routes/`, last, `.*node=`, b.addr), 1, 10*time.Second)
	noTrafficTo(t, b, l, 2*time.Second)
	if strings.Contains(g.Log(), "health region full") {
		t.Error("the region filled up: slots were not given back")
	}
}
