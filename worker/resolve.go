package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"coregate/admin/spec"

	"github.com/miekg/dns"
)

// DNS is how the worker resolves the upstream nodes given by host name
// (apisix.dns_resolver, dns_resolver_valid, resolver_timeout).
type DNS struct {
	// Servers are the name servers asked, "ip" or "ip:port" (port 53 by
	// default), in order until one answers. Empty: the system resolver
	// (/etc/hosts, /etc/resolv.conf), which tells no TTL.
	Servers []string
	// Valid, when not zero, is how long a name's addresses are kept,
	// whatever the records' TTLs say (dns_resolver_valid).
	Valid time.Duration
	// Timeout bounds one lookup (resolver_timeout); zero means 5 s.
	Timeout time.Duration
	// Hosts is the hosts file read, once, when Servers are set: a name
	// it lists is given its addresses, the servers not asked, as
	// lua-resty-dns-client reads /etc/hosts before asking. Empty:
	// /etc/hosts.
	Hosts string
}

// hostsFile is the hosts file read by default.
const hostsFile = "/etc/hosts"

// hostsTTL is how long a hosts file entry is kept before the name is
// looked at again: the file is read once, so the answer never changes.
const hostsTTL = 24 * time.Hour

// Resolution bounds. A record's TTL below minTTL is taken as minTTL, so
// that a name served with TTL 0 is not asked in a loop; without a TTL (the
// system resolver) the addresses are kept for systemTTL; a failed lookup is
// tried again after retryAfter, at most, the old addresses served meanwhile.
const (
	minTTL         = time.Second
	systemTTL      = 30 * time.Second
	retryAfter     = 5 * time.Second
	defaultTimeout = 5 * time.Second
)

// resolver resolves node host names off the event loop. Each name is
// looked up once when a snapshot first names it (compile, which runs off
// the loop), then again in the background before its TTL runs out; the
// loop reads the current addresses through an atomic pointer and never
// waits for a lookup. A lookup that fails keeps the addresses of the last
// one that did (logged). A name that the snapshot installed no longer
// names is dropped (retain), and so is a discovery_type dns service_name
// (retainServices): its lookups stop, and a snapshot that names it again
// looks it up anew.
//
// Its methods are safe for concurrent use.
type resolver struct {
	cfg DNS
	log *slog.Logger
	// hosts are the hosts file's names (lowercase) and their addresses,
	// read once when the resolver is made; never changed afterwards.
	hosts map[string][]netip.Addr
	mu    sync.Mutex
	names map[string]*dnsName // guarded by mu
	// services are the service_names of discovery_type dns (guarded by
	// mu); changed, if not nil, is called when one's nodes change.
	services map[string]*dnsService
	changed  func()
	done     chan struct{}
	stop     sync.Once
}

// dnsName is one host name and its current addresses.
type dnsName struct {
	host  string
	addrs atomic.Pointer[dnsAddrs]
	// ready is closed when the first lookup is over, succeeded or not.
	ready chan struct{}
	// dropped is closed when no snapshot names host any more (retain):
	// its lookups stop, the last addresses stay for the requests of an
	// older snapshot still in flight.
	dropped chan struct{}
}

// dnsAddrs is one lookup's answer. It is never changed once stored, so
// the loop reads it without a lock.
type dnsAddrs struct {
	ips []netip.Addr
}

func newResolver(cfg DNS, log *slog.Logger) *resolver {
	if cfg.Timeout <= 0 {
		cfg.Timeout = defaultTimeout
	}
	servers := make([]string, 0, len(cfg.Servers))
	for _, s := range cfg.Servers {
		servers = append(servers, serverAddr(s))
	}
	cfg.Servers = servers
	r := &resolver{cfg: cfg, log: log, names: map[string]*dnsName{}, services: map[string]*dnsService{}, done: make(chan struct{})}
	if len(servers) > 0 {
		if cfg.Hosts == "" {
			cfg.Hosts = hostsFile
		}
		b, err := os.ReadFile(cfg.Hosts)
		if err != nil {
			log.Warn("dns: hosts file not read", "file", cfg.Hosts, "err", err)
		}
		r.hosts = parseHosts(b)
	}
	return r
}

// parseHosts reads a hosts file as lua-resty-dns-client does: each name
// (lowercase) gets the first IPv4 address that a line gives it, or, when
// none does, the first IPv6 address; localhost is 127.0.0.1 (and ::1)
// unless the file says otherwise. Comments (#) and lines that do not
// start with an address are passed over.
func parseHosts(b []byte) map[string][]netip.Addr {
	v4, v6 := map[string]netip.Addr{}, map[string]netip.Addr{}
	for line := range strings.Lines(string(b)) {
		if i := strings.IndexByte(line, '#'); i >= 0 {
			line = line[:i]
		}
		f := strings.Fields(line)
		if len(f) < 2 {
			continue
		}
		a, err := netip.ParseAddr(f[0])
		if err != nil {
			continue
		}
		a = a.Unmap()
		m := v6
		if a.Is4() {
			m = v4
		}
		for _, name := range f[1:] {
			name = strings.ToLower(name)
			if _, ok := m[name]; !ok {
				m[name] = a
			}
		}
	}
	if _, ok := v4["localhost"]; !ok {
		if _, ok := v6["localhost"]; !ok {
			v4["localhost"] = netip.AddrFrom4([4]byte{127, 0, 0, 1})
		}
	}
	hosts := make(map[string][]netip.Addr, len(v4)+len(v6))
	for name, a := range v6 {
		hosts[name] = []netip.Addr{a}
	}
	for name, a := range v4 {
		hosts[name] = []netip.Addr{a} // A before AAAA, as the lookups
	}
	return hosts
}

// serverAddr is s with port 53 when it names none.
func serverAddr(s string) string {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return ap.String()
	}
	if a, err := netip.ParseAddr(strings.Trim(s, "[]")); err == nil {
		return netip.AddrPortFrom(a, 53).String()
	}
	return s
}

// close stops the background lookups.
func (r *resolver) close() { r.stop.Do(func() { close(r.done) }) }

// name returns host's entry, made and looked up (waiting for the first
// lookup, at most the lookup timeout: await) when host is new. It blocks: call
// it off the loop.
func (r *resolver) name(host string) *dnsName {
	r.mu.Lock()
	n := r.names[host]
	if n == nil {
		n = &dnsName{host: host, ready: make(chan struct{}), dropped: make(chan struct{})}
		r.names[host] = n
		go r.keep(n)
	}
	r.mu.Unlock()
	r.await(n.ready)
	return n
}

// await waits for ready, at most the lookup timeout, and reports
// whether it was closed: a name whose servers do not answer holds a
// snapshot's build that long, not once per server and record type; its
// node fails meanwhile as one with no address.
func (r *resolver) await(ready <-chan struct{}) bool {
	t := time.NewTimer(r.cfg.Timeout)
	defer t.Stop()
	select {
	case <-ready:
		return true
	case <-r.done:
	case <-t.C:
	}
	return false
}

// sleep waits d, or less when the resolver closes or dropped (nil:
// never) is closed: then it reports false, and the caller's refresh loop
// ends.
func (r *resolver) sleep(d time.Duration, dropped <-chan struct{}) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-r.done:
		return false
	case <-dropped:
		return false
	case <-t.C:
		return true
	}
}

// retain drops the names that used does not hold: the snapshot just
// installed names no other, and their lookups stop. The caller
// serializes retain with the builds that call name (Worker.SetSpec), so
// that a name a build is taking is not dropped under it.
func (r *resolver) retain(used map[*dnsName]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for host, n := range r.names {
		if !used[n] {
			delete(r.names, host)
			close(n.dropped)
		}
	}
}

// retainServices drops the service_names that used does not hold, as
// retain drops names: the snapshot just installed takes no node from any
// other, and their lookups stop. The caller serializes it with the builds
// that call service (Worker.SetSpec).
func (r *resolver) retainServices(used map[*dnsService]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for name, sv := range r.services {
		if !used[sv] {
			delete(r.services, name)
			close(sv.dropped)
		}
	}
}

// serviceCount is how many service_names the resolver keeps.
func (r *resolver) serviceCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.services)
}

// isClosed reports whether ch is closed.
func isClosed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// nameCount is how many names the resolver keeps.
func (r *resolver) nameCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.names)
}

// keep looks n up until the resolver closes, each time before the last
// answer's TTL runs out.
func (r *resolver) keep(n *dnsName) {
	first := true
	for {
		ips, ttl, err := r.lookup(n.host)
		wait := ttl
		if err != nil {
			if old := n.addrs.Load(); old != nil {
				r.log.Error("dns: lookup failed, the old addresses kept", "name", n.host, "addrs", old.ips, "err", err)
			} else {
				r.log.Error("dns: lookup failed", "name", n.host, "err", err)
			}
			wait = retryAfter
		} else {
			n.addrs.Store(&dnsAddrs{ips: ips})
			// Asked again before the records expire, so that the
			// loop never serves addresses past their TTL while the
			// name server answers.
			wait -= wait / 10
		}
		if first {
			close(n.ready)
			first = false
		}
		if !r.sleep(wait, n.dropped) {
			return
		}
	}
}

// lookup asks for host's addresses: its A records, or its AAAA records
// when it has no A record (APISIX's order). ttl is how long they are
// good for: Valid when set, the smallest TTL of the answers otherwise.
func (r *resolver) lookup(host string) (ips []netip.Addr, ttl time.Duration, err error) {
	if len(r.cfg.Servers) == 0 {
		ctx, cancel := context.WithTimeout(context.Background(), r.cfg.Timeout)
		defer cancel()
		all, err := net.DefaultResolver.LookupNetIP(ctx, "ip", host)
		if err != nil {
			return nil, 0, err
		}
		var v4, v6 []netip.Addr
		for _, a := range all {
			if a = a.Unmap(); a.Is4() {
				v4 = append(v4, a)
			} else {
				v6 = append(v6, a)
			}
		}
		if len(v4) == 0 {
			v4 = v6
		}
		return v4, r.ttl(systemTTL), nil
	}
	if ips, ok := r.hosts[strings.ToLower(strings.TrimSuffix(host, "."))]; ok {
		return ips, hostsTTL, nil
	}
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA} {
		rrs, err := r.query(host, qt)
		if err != nil {
			return nil, 0, err
		}
		least := time.Duration(-1)
		for _, rr := range rrs {
			var a netip.Addr
			switch rr := rr.(type) {
			case *dns.A:
				a, _ = netip.AddrFromSlice(rr.A.To4())
			case *dns.AAAA:
				a, _ = netip.AddrFromSlice(rr.AAAA)
			default:
				continue
			}
			ips = append(ips, a.Unmap())
			if t := time.Duration(rr.Header().Ttl) * time.Second; least < 0 || t < least {
				least = t
			}
		}
		if len(ips) > 0 {
			return ips, r.ttl(least), nil
		}
	}
	return nil, 0, fmt.Errorf("dns: %s: no A or AAAA record", host)
}

// ttl is Valid when set, else t at least minTTL.
func (r *resolver) ttl(t time.Duration) time.Duration {
	if r.cfg.Valid > 0 {
		return r.cfg.Valid
	}
	return max(t, minTTL)
}

// query asks the servers in turn, until one answers, for host's records
// of type qt; the answer section of a NOERROR answer comes back.
func (r *resolver) query(host string, qt uint16) ([]dns.RR, error) {
	m := new(dns.Msg)
	m.SetQuestion(dns.Fqdn(host), qt)
	c := dns.Client{Timeout: r.cfg.Timeout}
	var err error
	for _, s := range r.cfg.Servers {
		var in *dns.Msg
		in, _, err = c.Exchange(m, s)
		if err != nil {
			continue
		}
		if in.Truncated {
			tc := dns.Client{Net: "tcp", Timeout: r.cfg.Timeout}
			if in, _, err = tc.Exchange(m, s); err != nil {
				continue
			}
		}
		if in.Rcode == dns.RcodeNameError {
			// The name does not exist: no other server is asked.
			return nil, fmt.Errorf("dns: %s: %w (server %s)", host, errNoSuchName, s)
		}
		if in.Rcode != dns.RcodeSuccess {
			err = fmt.Errorf("dns: %s: server %s answered %s", host, s, dns.RcodeToString[in.Rcode])
			continue
		}
		return in.Answer, nil
	}
	if err == nil {
		err = errors.New("dns: no server")
	}
	return nil, err
}

// pick returns one of n's current addresses, at random as APISIX picks
// one of a name's answers; false when n has none (no lookup succeeded
// yet). It runs on the loop: one atomic load, no allocation.
func (n *dnsName) pick() (netip.Addr, bool) {
	a := n.addrs.Load()
	if a == nil || len(a.ips) == 0 {
		return netip.Addr{}, false
	}
	if len(a.ips) == 1 {
		return a.ips[0], true
	}
	return a.ips[rand.IntN(len(a.ips))], true
}

// has reports whether ip is one of the addresses.
func (a *dnsAddrs) has(ip netip.Addr) bool {
	for _, x := range a.ips {
		if x == ip {
			return true
		}
	}
	return false
}

// dnsPrune closes p's idle connections to addresses that node nd's name
// no longer has, once per change of its addresses: a pooled connection
// would otherwise keep a request on an address past its records, as
// nginx's cache of connections is one per address. It runs on the loop.
func (w *Worker) dnsPrune(p *pool, nd *node) {
	a := nd.dns.addrs.Load()
	if a == nil || p.dnsSeen == a {
		return
	}
	p.dnsSeen = a
	for i := 0; i < len(p.idle); {
		uc := p.idle[i]
		if a.has(uc.ap.Addr()) {
			i++
			continue
		}
		p.remove(uc)
		uc.close()
	}
}

// errNoSuchName is a lookup's error for a name that does not exist.
var errNoSuchName = errors.New("no such name")

// errNotResolved is a dial's error for a node whose name has no address.
type errNotResolved string

func (e errNotResolved) Error() string { return "dns: no address for " + string(e) }

// dnsService is one service_name of upstreams with discovery_type dns
// and the nodes its records give.
type dnsService struct {
	host  string
	port  int // service_name's port; 0: the SRV records' (or the scheme's)
	nodes atomic.Pointer[[]spec.Node]
	ready chan struct{} // closed when the first lookup is over
	// first is 0 until the first lookup is over (1), or a build stopped
	// waiting for it (2, service): that build has no node of sv, and the
	// lookup's end rebuilds.
	first atomic.Int32
	// dropped is closed when no snapshot's upstream takes its nodes from
	// sv any more (retainServices): its lookups stop, and a lookup that
	// ends after does not rebuild.
	dropped chan struct{}
}

// service returns the entry of service_name name ("host" or "host:port"),
// made and looked up (waiting for its first lookup) when new. It blocks:
// call it off the loop.
func (r *resolver) service(name string) *dnsService {
	r.mu.Lock()
	sv := r.services[name]
	if sv == nil {
		sv = &dnsService{host: name, ready: make(chan struct{}), dropped: make(chan struct{})}
		if h, p, err := net.SplitHostPort(name); err == nil {
			if n, err := strconv.Atoi(p); err == nil && n > 0 && n < 1<<16 {
				sv.host, sv.port = h, n
			}
		}
		r.services[name] = sv
		go r.keepService(sv)
	}
	r.mu.Unlock()
	if !r.await(sv.ready) {
		sv.first.CompareAndSwap(0, 2)
	}
	return sv
}

// keepService looks sv up until the resolver closes, as keep does, and
// calls r.changed when its nodes differ from the last lookup's: the
// worker then builds its snapshot again with them.
func (r *resolver) keepService(sv *dnsService) {
	first := true
	for {
		nodes, ttl, err := r.lookupService(sv)
		wait := ttl
		if err != nil {
			r.log.Error("dns discovery: lookup failed, the old nodes kept", "service_name", sv.host, "err", err)
			wait = retryAfter
		} else {
			old := sv.nodes.Swap(&nodes)
			changed := !first && (old == nil || !slices.EqualFunc(*old, nodes, sameNode))
			if first && !sv.first.CompareAndSwap(0, 1) {
				changed = true // a build did not wait for it
			}
			if changed && r.changed != nil && !isClosed(sv.dropped) {
				r.changed()
			}
			wait -= wait / 10
		}
		if first {
			close(sv.ready)
			first = false
		}
		if !r.sleep(wait, sv.dropped) {
			return
		}
	}
}

func sameNode(a, b spec.Node) bool {
	return a.Host == b.Host && a.Port == b.Port && a.Weight == b.Weight && a.Priority == b.Priority
}

// lookupService finds sv's nodes as APISIX's dns discovery does: its SRV
// records when it has some, each target's addresses a node with the
// record's port (unless service_name gives one), its weight (0 taken as
// 1) shared among the target's addresses, and its priority negated (a
// lower SRV priority is preferred, a higher node priority is); else its
// A (or AAAA) records, each a node of weight 1.
func (r *resolver) lookupService(sv *dnsService) ([]spec.Node, time.Duration, error) {
	rrs, err := r.query(sv.host, dns.TypeSRV)
	if err != nil && !errors.Is(err, errNoSuchName) {
		return nil, 0, err
	}
	least := time.Duration(-1)
	type target struct {
		srv *dns.SRV
		ips []netip.Addr
	}
	var targets []target
	lcm := 1
	for _, rr := range rrs {
		srv, ok := rr.(*dns.SRV)
		if !ok {
			continue
		}
		ips, ttl, err := r.lookup(strings.TrimSuffix(srv.Target, "."))
		if err != nil {
			return nil, 0, fmt.Errorf("dns discovery: %s: SRV target: %w", sv.host, err)
		}
		targets = append(targets, target{srv, ips})
		lcm = lcm / gcd(lcm, len(ips)) * len(ips)
		least = minTTL2(least, min(ttl, time.Duration(srv.Hdr.Ttl)*time.Second))
	}
	var nodes []spec.Node
	if len(targets) > 0 {
		for _, tg := range targets {
			w := max(int(tg.srv.Weight), 1) * (lcm / len(tg.ips))
			port := sv.port
			if port == 0 {
				port = int(tg.srv.Port)
			}
			for _, ip := range tg.ips {
				nodes = append(nodes, spec.Node{Host: ip.String(), Port: port, Weight: w, Priority: -int(tg.srv.Priority)})
			}
		}
		return nodes, r.ttl(least), nil
	}
	ips, ttl, err := r.lookup(sv.host)
	if err != nil {
		return nil, 0, err
	}
	for _, ip := range ips {
		nodes = append(nodes, spec.Node{Host: ip.String(), Port: sv.port, Weight: 1})
	}
	return nodes, ttl, nil
}

func minTTL2(a, b time.Duration) time.Duration {
	if a < 0 || b < a {
		return b
	}
	return a
}

func gcd(a, b int) int {
	for b != 0 {
		a, b = b, a%b
	}
	return a
}

// discoveredNodes is the nodes of u, an upstream with discovery_type
// dns, as its service's last lookup found them, and that service; none
// without a discovery resolver (discovery.dns.servers not set), as APISIX
// serves none with its dns discovery uninitialised.
func discoveredNodes(u *spec.Upstream, ue upstreamEnv) ([]spec.Node, *dnsService) {
	if ue.disc == nil || u.Rare().ServiceName == "" {
		return nil, nil
	}
	sv := ue.disc.service(u.Rare().ServiceName)
	if p := sv.nodes.Load(); p != nil {
		return *p, sv
	}
	return nil, sv
}

// rediscover builds the snapshot again from the last configuration, on
// the build thread (Background), once a service's nodes changed; changes
// that come while one is queued join it.
func (w *Worker) rediscover() {
	if !w.rebuildQueued.CompareAndSwap(false, true) {
		return
	}
	go Background(func(yield func()) {
		w.rebuildQueued.Store(false)
		s := w.spec.Load()
		if s == nil {
			return
		}
		if err := w.SetSpec(s, yield); err != nil {
			w.log.Error("dns discovery: configuration not rebuilt with the new nodes", "err", err)
		}
	})
}
