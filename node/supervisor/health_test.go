package supervisor

import (
	"bufio"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"coregate/admin/spec"
	"coregate/worker/shm"
)

// testChecks makes the health checks of a region of slots node slots (0:
// the default), stopped when the test ends. The region stays mapped, as
// the supervisor's does: a prober told to stop may still be reading it.
func testChecks(t *testing.T, slots int) *healthChecks {
	t.Helper()
	seg, err := shm.CreateHealth(slots)
	if err != nil {
		t.Fatal(err)
	}
	h := newHealthChecks(seg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	t.Cleanup(h.stop)
	return h
}

// decodeSpec decodes a configuration as the Control API tests do.
func decodeSpec(t *testing.T, js string) *spec.Spec {
	t.Helper()
	var sp spec.Spec
	if err := json.Unmarshal([]byte(js), &sp); err != nil {
		t.Fatal(err)
	}
	return &sp
}

// slowOrigins starts n HTTP origins on loopback that answer 200 after
// hold, and counts the requests they hold at once (most: the highest
// count seen).
func slowOrigins(t *testing.T, n int, hold time.Duration) (addrs []string, most *atomic.Int32, served *atomic.Int32) {
	t.Helper()
	var inFlight atomic.Int32
	most, served = new(atomic.Int32), new(atomic.Int32)
	var wg sync.WaitGroup
	t.Cleanup(wg.Wait) // after the listeners' Close, registered later
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, l.Addr().String())
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				c, err := l.Accept()
				if err != nil {
					return
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer c.Close()
					_ = c.SetDeadline(time.Now().Add(5 * time.Second))
					if _, err := bufio.NewReader(c).ReadString('\n'); err != nil {
						return
					}
					cur := inFlight.Add(1)
					for m := most.Load(); cur > m && !most.CompareAndSwap(m, cur); m = most.Load() {
					}
					time.Sleep(hold)
					inFlight.Add(-1)
					served.Add(1)
					_, _ = io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
				}()
			}
		}()
		t.Cleanup(func() { l.Close() })
	}
	return addrs, most, served
}

// TestHealthConcurrency checks that checks.active.concurrency bounds the
// probes of one upstream in flight at once: six nodes whose probes each
// take 200 ms, probed every 100 ms, never see more than two at a time,
// and do see two (the probes are not run one by one).
func TestHealthConcurrency(t *testing.T) {
	addrs, most, served := slowOrigins(t, 6, 200*time.Millisecond)
	nodes := make([]string, len(addrs))
	for i, a := range addrs {
		nodes[i] = fmt.Sprintf("%q: 1", a)
	}
	h := testChecks(t, 0)
	h.update(decodeSpec(t, `{"upstreams": [{"id": "u1", "nodes": {`+strings.Join(nodes, ", ")+`},
		"checks": {"active": {"concurrency": 2, "timeout": 2,
		"healthy": {"interval": 0.1}, "unhealthy": {"interval": 0.1}}}}]}`))
	deadline := time.Now().Add(10 * time.Second)
	for served.Load() < 12 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	h.stop()
	if served.Load() < 12 {
		t.Fatalf("%d probes answered in 10 s, want 12", served.Load())
	}
	if m := most.Load(); m != 2 {
		t.Errorf("at most %d probes in flight at once, want 2 (concurrency 2)", m)
	}
}

// TestHealthHTTPSTrustedCA checks that an https probe verifies the
// node's certificate against the trusted CAs (ssl_trusted_certificate):
// a node whose certificate they sign stays healthy and is probed, the
// same node checked against the system's CAs alone turns unhealthy, and
// one with https_verify_certificate false is probed without them.
func TestHealthHTTPSTrustedCA(t *testing.T) {
	// Each check has a server of its own: a probe of one check still in
	// flight when it stops is not counted for the next. A check runs
	// until what it waits for is seen (until: probes answered, or the
	// node turned unhealthy), at most 10 s: a fixed wait was too short
	// on a loaded machine, where the first probe's handshake came late.
	check := func(trusted bool, verify string, until func(n *shm.HealthNode, served int32) bool) (*shm.HealthNode, int32) {
		var served atomic.Int32
		srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			served.Add(1)
		}))
		t.Cleanup(srv.Close)
		addr := srv.Listener.Addr().String()
		h := testChecks(t, 0)
		if trusted {
			h.roots = x509.NewCertPool()
			h.roots.AddCert(srv.Certificate())
		}
		h.update(decodeSpec(t, `{"upstreams": [{"id": "u1", "scheme": "https", "nodes": {"`+addr+`": 1},
			"checks": {"active": {"type": "https", "timeout": 2, `+verify+`
			"healthy": {"interval": 0.05}, "unhealthy": {"interval": 0.05, "tcp_failures": 1}}}}]}`))
		n := h.seg.Node(shm.HealthKey("/apisix/upstreams/u1", addr))
		for deadline := time.Now().Add(10 * time.Second); !until(n, served.Load()) && time.Now().Before(deadline); {
			time.Sleep(10 * time.Millisecond)
		}
		// A few more probes: a node seen healthy stays so, one refused
		// is not answered later.
		time.Sleep(150 * time.Millisecond)
		h.stop()
		return n, served.Load()
	}
	probed := func(_ *shm.HealthNode, served int32) bool { return served > 0 }
	down := func(n *shm.HealthNode, _ int32) bool { return !n.Healthy() }
	if n, served := check(true, "", probed); !n.Healthy() || served == 0 {
		t.Errorf("signed by a trusted CA: healthy %v after %d probes answered, want healthy and probed", n.Healthy(), served)
	}
	if n, served := check(false, "", down); n.Healthy() || served != 0 {
		t.Errorf("against the system's CAs: healthy %v after %d probes answered, want unhealthy, none answered", n.Healthy(), served)
	}
	if n, served := check(false, `"https_verify_certificate": false,`, probed); !n.Healthy() || served == 0 {
		t.Errorf("https_verify_certificate false: healthy %v after %d probes answered, want healthy and probed", n.Healthy(), served)
	}
}

// TestHealthSlotsFreed checks that the slots of the nodes a configuration
// drops are given back: a region of 8 slots runs the checks of 20
// upstreams of 3 nodes each, one after the other. A dropped node's slot
// is kept through the next configuration (a worker may still run the one
// that named it) and found again if that one names it again, and freed by
// the one after; at the end the checks still work: the live nodes stay
// healthy and the dead one is seen unhealthy.
func TestHealthSlotsFreed(t *testing.T) {
	live, _, served := slowOrigins(t, 2, 0)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := l.Addr().String()
	l.Close()
	h := testChecks(t, 8)
	conf := func(id string) string {
		return `{"id": "` + id + `", "nodes": {"` + live[0] + `": 1, "` + live[1] + `": 1, "` + dead + `": 1},
			"checks": {"active": {"timeout": 1, "healthy": {"interval": 0.05, "successes": 1},
			"unhealthy": {"interval": 0.05, "tcp_failures": 1}}}}`
	}
	keys := func(id string) []string {
		return []string{shm.HealthKey("/apisix/upstreams/"+id, live[0]), shm.HealthKey("/apisix/upstreams/"+id, live[1]),
			shm.HealthKey("/apisix/upstreams/"+id, dead)}
	}
	found := func(id string) int {
		n := 0
		for _, k := range keys(id) {
			if h.seg.Lookup(k) != nil {
				n++
			}
		}
		return n
	}
	for i := range 20 {
		id := fmt.Sprint("u", i)
		h.update(decodeSpec(t, `{"upstreams": [`+conf(id)+`]}`))
		if n := len(h.statuses()[0].Nodes); n != 3 || found(id) != 3 {
			t.Fatalf("configuration %d: %d nodes checked, %d found, want 3 (region full?)", i, n, found(id))
		}
		if i > 0 && found(fmt.Sprint("u", i-1)) != 3 {
			t.Fatalf("configuration %d: the nodes the previous one checked lost their slots at once", i)
		}
		if i > 1 && found(fmt.Sprint("u", i-2)) != 0 {
			t.Fatalf("configuration %d: the nodes dropped two configurations ago are still found", i)
		}
	}
	// Dropped, then named again by the next configuration: the same slot.
	before := h.seg.Lookup(keys("u19")[0])
	h.update(decodeSpec(t, `{"upstreams": []}`))
	h.update(decodeSpec(t, `{"upstreams": [`+conf("u19")+`]}`))
	if n := h.seg.Lookup(keys("u19")[0]); n == nil || n != before {
		t.Fatal("a node named again by the configuration after the one that dropped it did not find its slot")
	}
	served.Store(0)
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		ns := h.statuses()[0].Nodes
		up := 0
		for _, n := range ns {
			if net.JoinHostPort(n.IP, fmt.Sprint(n.Port)) == dead {
				if n.Status == "unhealthy" {
					up += 10
				}
			} else if n.Status == "healthy" {
				up++
			}
		}
		if up == 12 && served.Load() >= 4 {
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("checks after 22 configurations: %+v, %d probes answered", h.statuses(), served.Load())
}
