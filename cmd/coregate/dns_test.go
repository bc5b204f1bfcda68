package main

import (
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/miekg/dns"

	"coregate/internal/e2e"
)

// nameServer is a DNS server on loopback serving one name's A records,
// which the test changes, with TTL 1 s; fail makes it answer SERVFAIL.
type nameServer struct {
	addr string
	mu   sync.Mutex
	ips  []string
	fail bool
}

func startNameServer(t *testing.T, name string, ips ...string) *nameServer {
	t.Helper()
	ns := &nameServer{ips: ips}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fqdn := dns.Fqdn(name)
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(func(w dns.ResponseWriter, r *dns.Msg) {
		m := new(dns.Msg)
		m.SetReply(r)
		ns.mu.Lock()
		defer ns.mu.Unlock()
		q := r.Question[0]
		switch {
		case ns.fail:
			m.Rcode = dns.RcodeServerFailure
		case q.Name != fqdn:
			m.Rcode = dns.RcodeNameError
		case q.Qtype == dns.TypeA:
			for _, ip := range ns.ips {
				if rr, err := dns.NewRR(fmt.Sprintf("%s 1 IN A %s", q.Name, ip)); err == nil {
					m.Answer = append(m.Answer, rr)
				}
			}
		}
		_ = w.WriteMsg(m)
	})}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("dns server did not start")
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	ns.addr = pc.LocalAddr().String()
	return ns
}

func (ns *nameServer) set(fail bool, ips ...string) {
	ns.mu.Lock()
	ns.fail, ns.ips = fail, ips
	ns.mu.Unlock()
}

// TestNodeByHostName: a node given by host name is resolved with
// config.yaml's apisix.dns_resolver; traffic follows its record once the
// TTL has run out, and stays on the last addresses while the name server
// fails.
func TestNodeByHostName(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t, "svc.test", "127.0.0.2")
	port := e2e.IPOrigins(t, false, "127.0.0.2", "127.0.0.3")
	g := startGatewayConfig(t, routesYAML(
		obj{"id": "dns", "uri": "/dns", "upstream": obj{"nodes": nodes("svc.test:" + strconv.Itoa(port))}},
	), func(p int) string {
		return strings.Replace(baseConfig(p, ""), "apisix:\n", "apisix:\n  dns_resolver:\n    - "+ns.addr+"\n", 1)
	})
	c := newClient(t)
	if r := do(t, c, "GET", g.url("/dns"), "", nil, nil); r.status != 200 || r.body != "127.0.0.2" {
		t.Fatalf("got %d %q, want 200 from 127.0.0.2", r.status, r.body)
	}
	ns.set(false, "127.0.0.3")
	eventually(t, 5*time.Second, func() error {
		if r := do(t, c, "GET", g.url("/dns"), "", nil, nil); r.status != 200 || r.body != "127.0.0.3" {
			return fmt.Errorf("got %d %q, want 200 from 127.0.0.3 once the TTL ran out", r.status, r.body)
		}
		return nil
	})
	ns.set(true)
	g.waitLog(`dns: lookup failed, the old addresses kept`, 1, 5*time.Second)
	for range 5 {
		if r := do(t, c, "GET", g.url("/dns"), "", nil, nil); r.status != 200 || r.body != "127.0.0.3" {
			t.Fatalf("while lookups fail: got %d %q, want 200 from 127.0.0.3", r.status, r.body)
		}
	}
}

// TestDiscoveryDNS: an upstream with discovery_type dns takes its nodes
// from the records of config.yaml's discovery.dns.servers, and the
// gateway follows them when they change.
func TestDiscoveryDNS(t *testing.T) {
	t.Parallel()
	ns := startNameServer(t, "svc.test", "127.0.0.2", "127.0.0.3")
	port := e2e.IPOrigins(t, false, "127.0.0.2", "127.0.0.3")
	g := startGatewayConfig(t, routesYAML(
		obj{"id": "disc", "uri": "/disc", "upstream": obj{"service_name": "svc.test:" + strconv.Itoa(port), "discovery_type": "dns"}},
	), func(p int) string {
		return baseConfig(p, "") + "discovery:\n  dns:\n    servers:\n      - " + ns.addr + "\n"
	})
	c := newClient(t)
	seen := map[string]int{}
	for range 10 {
		r := do(t, c, "GET", g.url("/disc"), "", nil, nil)
		if r.status != 200 {
			t.Fatalf("got %d %q, want 200", r.status, r.body)
		}
		seen[r.body]++
	}
	if seen["127.0.0.2"] != 5 || seen["127.0.0.3"] != 5 {
		t.Fatalf("10 requests went %v, want 5 to each address", seen)
	}
	ns.set(false, "127.0.0.3")
	eventually(t, 5*time.Second, func() error {
		for range 4 {
			if r := do(t, c, "GET", g.url("/disc"), "", nil, nil); r.status != 200 || r.body != "127.0.0.3" {
				return fmt.Errorf("got %d %q, want 200 from 127.0.0.3 alone once the TTL ran out", r.status, r.body)
			}
		}
		return nil
	})
}
