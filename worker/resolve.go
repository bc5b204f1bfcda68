package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"time"

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
}

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
// one that did (logged). Names live as long as the worker: a worker is
// restarted with its configuration's names, and the few that a reload
// drops are asked on, at their TTL, until then.
//
// Its methods are safe for concurrent use.
type resolver struct {
	cfg   DNS
	log   *slog.Logger
	mu    sync.Mutex
	names map[string]*dnsName // guarded by mu
	done  chan struct{}
	stop  sync.Once
}

// dnsName is one host name and its current addresses.
type dnsName struct {
	host  string
	addrs atomic.Pointer[dnsAddrs]
	// ready is closed when the first lookup is over, succeeded or not.
	ready chan struct{}
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
	return &resolver{cfg: cfg, log: log, names: map[string]*dnsName{}, done: make(chan struct{})}
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
// lookup, at most the lookup timeout) when host is new. It blocks: call
// it off the loop.
func (r *resolver) name(host string) *dnsName {
	r.mu.Lock()
	n := r.names[host]
	if n == nil {
		n = &dnsName{host: host, ready: make(chan struct{})}
		r.names[host] = n
		go r.keep(n)
	}
	r.mu.Unlock()
	select {
	case <-n.ready:
	case <-r.done:
	}
	return n
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
		t := time.NewTimer(wait)
		select {
		case <-r.done:
			t.Stop()
			return
		case <-t.C:
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
		if in.Rcode != dns.RcodeSuccess {
			err = fmt.Errorf("dns: %s: server %s answered %s", host, s, dns.RcodeToString[in.Rcode])
			if in.Rcode == dns.RcodeNameError {
				return nil, err // the name does not exist: no other server is asked
			}
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

// errNotResolved is a dial's error for a node whose name has no address.
type errNotResolved string

func (e errNotResolved) Error() string { return "dns: no address for " + string(e) }
