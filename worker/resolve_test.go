package worker

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"

	"coregate/admin/spec"
	"coregate/internal/e2e"
	"coregate/worker/accesslog"
)

// testDNS is a name server on loopback whose records the test changes.
type testDNS struct {
	addr    string
	mu      sync.Mutex
	a       map[string][]string // name (FQDN) → A record addresses
	srv     map[string][]string // name (FQDN) → SRV records' "priority weight port target"
	ttl     uint32
	fail    bool           // answer SERVFAIL
	delay   time.Duration  // before each answer
	queries atomic.Int32   // questions answered or failed
	asked   map[string]int // name (FQDN) → questions, guarded by mu
}

func startDNS(t *testing.T, ttl uint32) *testDNS {
	t.Helper()
	d := &testDNS{a: map[string][]string{}, srv: map[string][]string{}, ttl: ttl, asked: map[string]int{}}
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &dns.Server{PacketConn: pc, Handler: dns.HandlerFunc(d.serve)}
	started := make(chan struct{})
	srv.NotifyStartedFunc = func() { close(started) }
	go func() { _ = srv.ActivateAndServe() }()
	select {
	case <-started:
	case <-time.After(5 * time.Second):
		t.Fatal("dns server did not start")
	}
	t.Cleanup(func() { _ = srv.Shutdown() })
	d.addr = pc.LocalAddr().String()
	return d
}

func (d *testDNS) set(name string, ips ...string) {
	d.mu.Lock()
	d.a[dns.Fqdn(name)] = ips
	d.mu.Unlock()
}

func (d *testDNS) setSRV(name string, recs ...string) {
	d.mu.Lock()
	d.srv[dns.Fqdn(name)] = recs
	d.mu.Unlock()
}

func (d *testDNS) setFail(f bool) {
	d.mu.Lock()
	d.fail = f
	d.mu.Unlock()
}

// askedFor is how many questions name had.
func (d *testDNS) askedFor(name string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.asked[dns.Fqdn(name)]
}

func (d *testDNS) serve(w dns.ResponseWriter, r *dns.Msg) {
	d.queries.Add(1)
	d.mu.Lock()
	delay := d.delay
	d.mu.Unlock()
	time.Sleep(delay)
	m := new(dns.Msg)
	m.SetReply(r)
	d.mu.Lock()
	defer d.mu.Unlock()
	d.asked[r.Question[0].Name]++
	if d.fail {
		m.Rcode = dns.RcodeServerFailure
		_ = w.WriteMsg(m)
		return
	}
	q := r.Question[0]
	ips, ok := d.a[q.Name]
	srvs, isSRV := d.srv[q.Name]
	if !ok && !isSRV {
		m.Rcode = dns.RcodeNameError
	} else if q.Qtype == dns.TypeSRV {
		for _, rec := range srvs {
			rr, err := dns.NewRR(fmt.Sprintf("%s %d IN SRV %s", q.Name, d.ttl, rec))
			if err == nil {
				m.Answer = append(m.Answer, rr)
			}
		}
	} else if q.Qtype == dns.TypeA {
		for _, ip := range ips {
			rr, err := dns.NewRR(fmt.Sprintf("%s %d IN A %s", q.Name, d.ttl, ip))
			if err == nil {
				m.Answer = append(m.Answer, rr)
			}
		}
	}
	_ = w.WriteMsg(m)
}

// getBody sends GET path on c and returns the 200 answer's body.
func getBody(t *testing.T, c net.Conn, br *bufio.Reader, path string) string {
	t.Helper()
	_, _ = io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		t.Fatalf("GET %s: %d %q", path, resp.StatusCode, b)
	}
	return string(b)
}

func dnsWorker(t *testing.T, d *testDNS, route string) (net.Conn, *bufio.Reader) {
	t.Helper()
	w, _ := runWorker(t, Config{DNS: DNS{Servers: []string{d.addr}}}, testSpec(t, nil, route))
	return dialWorker(t, w)
}

// TestDNSRecordsChange checks that a node given by host name is served
// at its name's address, and at the new one once the record changes and
// its TTL has run out, kept-alive connections to the old address left.
func TestDNSRecordsChange(t *testing.T) {
	d := startDNS(t, 1)
	port := e2e.IPOrigins(t, false, "127.0.0.2", "127.0.0.3")
	d.set("svc.test", "127.0.0.2")
	c, br := dnsWorker(t, d, fmt.Sprintf(`{"id":"1","uri":"/a","upstream":{"nodes":{"svc.test:%d":1}}}`, port))
	for range 5 {
		if got := getBody(t, c, br, "/a"); got != "127.0.0.2" {
			t.Fatalf("served by %s, want 127.0.0.2", got)
		}
	}
	d.set("svc.test", "127.0.0.3")
	deadline := time.Now().Add(5 * time.Second)
	for {
		got := getBody(t, c, br, "/a")
		if got == "127.0.0.3" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still served by %s 5 s after the record changed (TTL 1 s)", got)
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 10 {
		if got := getBody(t, c, br, "/a"); got != "127.0.0.3" {
			t.Fatalf("served by %s after the change was seen, want 127.0.0.3", got)
		}
	}
}

// TestDNSLookupFails checks that when the name server fails, the node
// keeps the addresses of the last lookup that succeeded, and that it is
// asked again meanwhile.
func TestDNSLookupFails(t *testing.T) {
	t.Parallel()
	d := startDNS(t, 1)
	port := e2e.IPOrigins(t, true, "127.0.0.2")
	d.set("svc.test", "127.0.0.2")
	c, br := dnsWorker(t, d, fmt.Sprintf(`{"id":"1","uri":"/a","upstream":{"nodes":{"svc.test:%d":1}}}`, port))
	if got := getBody(t, c, br, "/a"); got != "127.0.0.2" {
		t.Fatalf("served by %s, want 127.0.0.2", got)
	}
	d.setFail(true)
	before := d.queries.Load()
	time.Sleep(2500 * time.Millisecond) // past the TTL and a failed lookup
	if d.queries.Load() == before {
		t.Fatal("the name was not asked again after its TTL")
	}
	for range 5 {
		if got := getBody(t, c, br, "/a"); got != "127.0.0.2" {
			t.Fatalf("served by %s while lookups fail, want 127.0.0.2", got)
		}
	}
}

// TestDNSSeveralAddresses checks that a name with several addresses
// spreads new connections over all of them (APISIX picks one of the
// answers at random for each request).
func TestDNSSeveralAddresses(t *testing.T) {
	d := startDNS(t, 60)
	port := e2e.IPOrigins(t, true, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	d.set("svc.test", "127.0.0.2", "127.0.0.3", "127.0.0.4")
	c, br := dnsWorker(t, d, fmt.Sprintf(`{"id":"1","uri":"/a","upstream":{"nodes":{"svc.test:%d":1}}}`, port))
	seen := map[string]int{}
	for range 90 {
		seen[getBody(t, c, br, "/a")]++
	}
	for _, ip := range []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"} {
		if seen[ip] == 0 {
			t.Errorf("no request went to %s: %v", ip, seen)
		}
	}
}

// TestDNSUnknownName checks that a node whose name has no address fails
// as a refused connection does (502), and the next node serves.
func TestDNSUnknownName(t *testing.T) {
	d := startDNS(t, 1)
	port := e2e.IPOrigins(t, true, "127.0.0.2")
	d.set("svc.test", "127.0.0.2")
	c, br := dnsWorker(t, d, fmt.Sprintf(`{"id":"1","uri":"/a","upstream":{"nodes":{"svc.test:%d":1,"nothing.test:%d":1}}}`, port, port))
	for range 6 {
		if got := getBody(t, c, br, "/a"); got != "127.0.0.2" {
			t.Fatalf("served by %s, want 127.0.0.2", got)
		}
	}
}

// TestDNSDroppedName checks that a name a reload drops (no node names it
// any more) is no longer asked, while the name that replaced it is, and
// that a reload naming it again serves it at its current address.
func TestDNSDroppedName(t *testing.T) {
	t.Parallel()
	testDropped(t, "names", func(d *testDNS) Config { return Config{DNS: DNS{Servers: []string{d.addr}}} },
		func(name string, port int) string { return fmt.Sprintf(`"nodes":{"%s:%d":1}`, name, port) },
		func(w *Worker) int { return w.dns.nameCount() })
}

// TestDNSHostsFile checks that with name servers set, a name the hosts
// file lists is served at the file's address and the servers are not
// asked for it, as lua-resty-dns-client reads /etc/hosts first; a name
// it does not list is asked.
func TestDNSHostsFile(t *testing.T) {
	d := startDNS(t, 60)
	port := e2e.IPOrigins(t, true, "127.0.0.2", "127.0.0.3")
	d.set("svc.test", "127.0.0.2")
	d.set("other.test", "127.0.0.2")
	hosts := filepath.Join(t.TempDir(), "hosts")
	if err := os.WriteFile(hosts, []byte("# test\n127.0.0.3 SVC.test alias.test # the file wins\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	s := testSpec(t, nil,
		fmt.Sprintf(`{"id":"1","uri":"/a","upstream":{"nodes":{"svc.test:%d":1}}}`, port),
		fmt.Sprintf(`{"id":"2","uri":"/b","upstream":{"nodes":{"other.test:%d":1}}}`, port))
	w, _ := runWorker(t, Config{DNS: DNS{Servers: []string{d.addr}, Hosts: hosts}}, s)
	c, br := dialWorker(t, w)
	for range 3 {
		if got := getBody(t, c, br, "/a"); got != "127.0.0.3" {
			t.Fatalf("served by %s, want 127.0.0.3 (the hosts file's)", got)
		}
		if got := getBody(t, c, br, "/b"); got != "127.0.0.2" {
			t.Fatalf("served by %s, want 127.0.0.2 (the name server's)", got)
		}
	}
	if n := d.askedFor("svc.test"); n != 0 {
		t.Errorf("the name server was asked %d times for a name the hosts file lists", n)
	}
	if d.askedFor("other.test") == 0 {
		t.Error("the name server was not asked for a name the hosts file does not list")
	}
}

// TestDNSUpstreamAddr checks that the access log's $upstream_addr and
// $balancer_ip of a node given by host name are the address connected
// to, as nginx's, not the name: on a new connection and on a kept-alive
// one.
func TestDNSUpstreamAddr(t *testing.T) {
	d := startDNS(t, 60)
	port := e2e.IPOrigins(t, true, "127.0.0.2")
	d.set("svc.test", "127.0.0.2")
	f, err := accesslog.Compile(`$upstream_addr $balancer_ip`, accesslog.EscapeDefault)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "access.log")
	l, err := accesslog.Open(accesslog.Options{Path: path, Flush: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{DNS: DNS{Servers: []string{d.addr}}, AccessLog: l, AccessLogFormat: f}
	w, done := runWorker(t, cfg, testSpec(t, nil, fmt.Sprintf(`{"id":"1","uri":"/a","upstream":{"nodes":{"svc.test:%d":1}}}`, port)))
	c, br := dialWorker(t, w)
	for range 2 {
		if got := getBody(t, c, br, "/a"); got != "127.0.0.2" {
			t.Fatalf("served by %s, want 127.0.0.2", got)
		}
	}
	if err := w.Stop(context.Background()); err != nil {
		t.Fatal(err)
	}
	<-done
	l.Close()
	got, _ := os.ReadFile(path)
	line := fmt.Sprintf("127.0.0.2:%d 127.0.0.2\n", port)
	if want := line + line; string(got) != want {
		t.Errorf("access log:\n%s\nwant:\n%s", got, want)
	}
}

func TestParseHosts(t *testing.T) {
	h := parseHosts([]byte(`
127.0.0.2 a.test  B.test # comment
10.0.0.1 a.test
::2 a.test v6.test
::3 v6.test
# 10.0.0.9 c.test
bad d.test
`))
	want := map[string]string{"a.test": "127.0.0.2", "b.test": "127.0.0.2", "v6.test": "::2", "localhost": "127.0.0.1"}
	if len(h) != len(want) {
		t.Errorf("parsed %v, want %v", h, want)
	}
	for name, ip := range want {
		if got := h[name]; len(got) != 1 || got[0].String() != ip {
			t.Errorf("%s: %v, want %s", name, got, ip)
		}
	}
	if h := parseHosts([]byte("127.0.0.5 localhost\n")); h["localhost"][0].String() != "127.0.0.5" {
		t.Errorf("localhost: %v, want the file's 127.0.0.5", h["localhost"])
	}
}

func TestServerAddr(t *testing.T) {
	for in, want := range map[string]string{
		"127.0.0.1":      "127.0.0.1:53",
		"127.0.0.1:5353": "127.0.0.1:5353",
		"::1":            "[::1]:53",
		"[::1]:54":       "[::1]:54",
	} {
		if got := serverAddr(in); got != want {
			t.Errorf("serverAddr(%q) = %q, want %q", in, got, want)
		}
	}
}

func discoveryWorker(t *testing.T, d *testDNS, upstream string) (net.Conn, *bufio.Reader) {
	t.Helper()
	cfg := Config{DiscoveryDNS: DNS{Servers: []string{d.addr}}}
	w, _ := runWorker(t, cfg, testSpec(t, nil, `{"id":"1","uri":"/a","upstream":`+upstream+`}`))
	return dialWorker(t, w)
}

// TestDNSDiscoverySRV checks discovery_type dns on a name with SRV
// records, as APISIX's dns discovery reads them: the lowest SRV priority
// served alone, each target's weight, the record's port; and that the
// nodes follow the records when they change.
func TestDNSDiscoverySRV(t *testing.T) {
	d := startDNS(t, 1)
	port := e2e.IPOrigins(t, true, "127.0.0.2", "127.0.0.3", "127.0.0.4")
	d.set("t1.test", "127.0.0.2")
	d.set("t2.test", "127.0.0.3")
	d.set("t3.test", "127.0.0.4")
	d.setSRV("svc.test",
		fmt.Sprintf("10 1 %d t1.test.", port),
		fmt.Sprintf("10 3 %d t2.test.", port),
		fmt.Sprintf("20 5 %d t3.test.", port)) // a backup: a higher SRV priority
	c, br := discoveryWorker(t, d, `{"service_name":"svc.test","discovery_type":"dns"}`)
	seen := map[string]int{}
	for range 40 {
		seen[getBody(t, c, br, "/a")]++
	}
	if seen["127.0.0.2"] != 10 || seen["127.0.0.3"] != 30 || seen["127.0.0.4"] != 0 {
		t.Fatalf("40 requests went %v, want 10 to 127.0.0.2 (weight 1), 30 to 127.0.0.3 (weight 3), none to the backup", seen)
	}
	// t1 and t2 gone: the backup serves, once the TTL ran out.
	d.setSRV("svc.test", fmt.Sprintf("20 5 %d t3.test.", port))
	deadline := time.Now().Add(5 * time.Second)
	for getBody(t, c, br, "/a") != "127.0.0.4" {
		if time.Now().After(deadline) {
			t.Fatal("the new SRV records were not served 5 s after they changed (TTL 1 s)")
		}
		time.Sleep(50 * time.Millisecond)
	}
	for range 10 {
		if got := getBody(t, c, br, "/a"); got != "127.0.0.4" {
			t.Fatalf("served by %s, want 127.0.0.4 alone", got)
		}
	}
}

// TestDNSDiscoveryA checks discovery_type dns on a name with A records:
// each address a node of weight 1, at service_name's port.
func TestDNSDiscoveryA(t *testing.T) {
	d := startDNS(t, 60)
	port := e2e.IPOrigins(t, true, "127.0.0.2", "127.0.0.3")
	d.set("svc.test", "127.0.0.2", "127.0.0.3")
	c, br := discoveryWorker(t, d, fmt.Sprintf(`{"service_name":"svc.test:%d","discovery_type":"dns"}`, port))
	seen := map[string]int{}
	for range 20 {
		seen[getBody(t, c, br, "/a")]++
	}
	if seen["127.0.0.2"] != 10 || seen["127.0.0.3"] != 10 {
		t.Fatalf("20 requests went %v, want 10 to each address", seen)
	}
}

// TestDNSDiscoveryDroppedService checks that a service_name a reload
// drops (no upstream takes its nodes from it any more) is no longer asked,
// while the one that replaced it is, and that a reload naming it again
// serves its current records, as TestDNSDroppedName for host names.
func TestDNSDiscoveryDroppedService(t *testing.T) {
	t.Parallel()
	testDropped(t, "service_names", func(d *testDNS) Config { return Config{DiscoveryDNS: DNS{Servers: []string{d.addr}}} },
		func(name string, port int) string {
			return fmt.Sprintf(`"service_name":"%s:%d","discovery_type":"dns"`, name, port)
		},
		func(w *Worker) int { return w.disc.serviceCount() })
}

// testDropped is TestDNSDroppedName and TestDNSDiscoveryDroppedService:
// a worker (cfg, on a name server whose records live 1 s) whose one
// upstream (members: its nodes by name, or its service) takes its
// addresses from old.test, then from new.test, then from old.test again;
// kept counts the names (what) the resolver keeps.
func testDropped(t *testing.T, what string, cfg func(*testDNS) Config, members func(name string, port int) string, kept func(*Worker) int) {
	t.Helper()
	d := startDNS(t, 1)
	port := e2e.IPOrigins(t, true, "127.0.0.2", "127.0.0.3")
	d.set("old.test", "127.0.0.2")
	d.set("new.test", "127.0.0.3")
	route := func(name string) *spec.Spec {
		return testSpec(t, nil, `{"id":"1","uri":"/a","upstream":{`+members(name, port)+`}}`)
	}
	w, _ := runWorker(t, cfg(d), route("old.test"))
	c, br := dialWorker(t, w)
	if got := getBody(t, c, br, "/a"); got != "127.0.0.2" {
		t.Fatalf("served by %s, want 127.0.0.2", got)
	}
	if err := w.SetSpec(route("new.test"), nil); err != nil {
		t.Fatal(err)
	}
	if n := kept(w); n != 1 {
		t.Fatalf("the resolver keeps %d %s after the reload, want 1", n, what)
	}
	if got := getBody(t, c, br, "/a"); got != "127.0.0.3" {
		t.Fatalf("served by %s after the reload, want 127.0.0.3", got)
	}
	oldAsked, newAsked := d.askedFor("old.test"), d.askedFor("new.test")
	time.Sleep(2500 * time.Millisecond) // past two TTLs
	if n := d.askedFor("old.test"); n != oldAsked {
		t.Errorf("old.test asked %d times after the reload dropped it", n-oldAsked)
	}
	if d.askedFor("new.test") == newAsked {
		t.Error("new.test was not asked again after its TTL")
	}
	d.set("old.test", "127.0.0.3")
	if err := w.SetSpec(route("old.test"), nil); err != nil {
		t.Fatal(err)
	}
	if got := getBody(t, c, br, "/a"); got != "127.0.0.3" {
		t.Fatalf("served by %s once old.test is named again, want its new address 127.0.0.3", got)
	}
	if n := kept(w); n != 1 {
		t.Fatalf("the resolver keeps %d %s once old.test is named again, want 1", n, what)
	}
}

// TestDNSDiscoveryLate checks that a service whose first lookup takes
// longer than the build waits for (the lookup timeout) gets its nodes
// once the lookup ends: the worker builds its snapshot again.
func TestDNSDiscoveryLate(t *testing.T) {
	d := startDNS(t, 60)
	d.delay = 150 * time.Millisecond // SRV, then each target's A: 450 ms
	port := e2e.IPOrigins(t, true, "127.0.0.2", "127.0.0.3")
	d.set("t1.test", "127.0.0.2")
	d.set("t2.test", "127.0.0.3")
	d.setSRV("svc.test", fmt.Sprintf("10 1 %d t1.test.", port), fmt.Sprintf("10 1 %d t2.test.", port))
	cfg := Config{DiscoveryDNS: DNS{Servers: []string{d.addr}, Timeout: 300 * time.Millisecond}}
	w, _ := runWorker(t, cfg, testSpec(t, nil, `{"id":"1","uri":"/a","upstream":{"service_name":"svc.test","discovery_type":"dns"}}`))
	c, br := dialWorker(t, w)
	deadline := time.Now().Add(5 * time.Second)
	for {
		_, _ = io.WriteString(c, "GET /a HTTP/1.1\r\nHost: x\r\n\r\n")
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode == 200 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("still %d %q 5 s after the start: the late lookup's nodes were not built in", resp.StatusCode, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
