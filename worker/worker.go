package worker

import (
	"context"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/panjf2000/gnet/v2"
	"github.com/panjf2000/gnet/v2/pkg/netpoll"

	"coregate/admin/spec"
	"coregate/httpparse"
	"coregate/plugins"
	"coregate/tlsconf"
	"coregate/worker/accesslog"
	"coregate/worker/internal/indexset"
	"coregate/worker/router"
	"coregate/worker/shm"
)

// Config holds a worker's settings from config.yaml.
type Config struct {
	// Listen are the addresses the worker serves, "127.0.0.1:9080" or
	// ":9080" (apisix.node_listen).
	Listen []string
	// TLSListen are the addresses the worker serves over TLS
	// (apisix.ssl.listen), with the certificates of the snapshot's ssls.
	// A port may not be in both lists.
	TLSListen []string
	// TLS is apisix.ssl's settings, which the certificates of the ssls are
	// served with; Decrypt turns an encrypted private key into PEM
	// (apisix.data_encryption; nil: keys are taken as stored).
	TLS     tlsconf.Settings
	Decrypt func(field, s string) (string, error)
	// ServerHeader is the value of the Server header on every answer,
	// "APISIX/<version>" by default.
	ServerHeader string
	// RouterMode picks radixtree_host_uri (default) or radixtree_uri.
	RouterMode router.Mode
	// Limits bound request heads (414/431).
	Limits httpparse.Limits
	// Client timeouts, nginx's client_header_timeout, client_body_timeout,
	// keepalive_timeout and send_timeout. Zero means 60 s.
	HeaderTimeout    time.Duration
	BodyTimeout      time.Duration
	KeepaliveTimeout time.Duration
	SendTimeout      time.Duration
	// KeepaliveRequests and KeepaliveTime bound a client connection's
	// life, as nginx's keepalive_requests and keepalive_time: the answer
	// to its KeepaliveRequests-th request, or to a request that starts
	// once it has been open for KeepaliveTime, says Connection: close and
	// the connection closes after it. Clients then reconnect, and the
	// socket selector spreads the new connections over the workers: a
	// worker's share of long-lived connections evens out after a worker
	// restarts. Zero means no bound (config.yaml's defaults are nginx's:
	// 1000 and 1 h).
	KeepaliveRequests int
	KeepaliveTime     time.Duration
	// UpstreamKeepalive is the pool of upstreams without keepalive_pool
	// (nginx_config.http.upstream).
	UpstreamKeepalive Keepalive
	// UpstreamCAs are the CAs an https upstream's certificate is verified
	// against when its tls.verify is on (apisix.ssl.ssl_trusted_certificate);
	// nil means the system's.
	UpstreamCAs *x509.CertPool
	// DNS is how the nodes given by host name are resolved (apisix's
	// dns_resolver, dns_resolver_valid, resolver_timeout); zero: the
	// system resolver.
	DNS DNS
	// DiscoveryDNS is discovery.dns: the name servers the nodes of
	// upstreams with discovery_type dns are found with; none: such
	// upstreams have no node.
	DiscoveryDNS DNS
	// MaxBodySize is client_max_body_size; 0 means unlimited.
	MaxBodySize int64
	// DropUnderscores is underscores_in_headers off: a request's fields
	// whose names have a "_" are dropped once its head is parsed, as
	// nginx ignores them (ignore_invalid_headers on), so that no plugin,
	// variable or upstream sees them.
	DropUnderscores bool
	// MaxConns is nginx's worker_connections: the most connections the
	// worker holds at once, client and upstream ones together (as nginx
	// counts them). A client connection accepted at the limit is closed at
	// once; upstream connections are never refused, so that a request
	// already accepted is served (see OnOpen). 0 means no limit.
	MaxConns int
	// ShowUpstreamStatus adds X-APISIX-Upstream-Status to every proxied
	// answer, not only to 5xx ones.
	ShowUpstreamStatus bool
	// NormalizeURILikeServlet is apisix.normalize_uri_like_servlet, for
	// upstreams that are Java servlet containers: routes match the path
	// without its segments' ";" parameters, as the container maps it, a
	// path whose parameters would hide a dot segment is answered 400, and
	// a path that had to be normalised goes upstream as it was routed
	// (servletPath, clientConn.servletRoute). Off, paths cost nothing
	// more.
	NormalizeURILikeServlet bool
	// Plugins is what plugin instances get: the node's shared counters
	// and this worker's metric slots. Zero means an in-process Env
	// (plugins.NewLocalEnv), made once for the worker's life.
	Plugins plugins.Env
	// Node is where the worker counts its connections and requests (the
	// node's apisix_http_requests_total, and nginx's accepted and
	// handled): its worker slot's region of the node's shared memory,
	// read by the supervisor, so that a worker that dies loses nothing it
	// counted. nil means counters of the worker's own.
	Node *shm.NodeCounters
	// TicketKeys are the node's TLS session ticket keys, which the
	// supervisor rotates: the worker's tick reads their generation (Gen)
	// and, when it changed, the keys (Load) for its TLS listeners, so
	// that every worker encrypts tickets with the same key. nil means keys
	// of the worker's own.
	TicketKeys *shm.TicketKeys
	// Health is the node's upstream health region: the states of the
	// checked nodes, which the balancer reads, and the counters the
	// worker's traffic reports into (passive checks). nil means every
	// node is healthy.
	Health *shm.Health
	// Logger receives the worker's log; nil means slog.Default().
	Logger *slog.Logger
	// OnListen, if set, is called on the loop once the listening sockets
	// exist, with a dup of each (the caller owns and closes them): the
	// place to join the socket selector's group.
	OnListen func(fds []int)
	// OnConns, if set, is called on the loop with +1/-1 as client
	// connections open and close (the selector's load counter).
	OnConns func(delta int64)

	// AccessLog, when not nil, gets a line per request in AccessLogFormat
	// (both or neither). The worker's loop fills it and Tick-s it; the
	// caller opened it and closes it once Run has returned.
	AccessLog       *accesslog.Log
	AccessLogFormat *accesslog.Format
}

// Worker is one gnet event loop that parses, routes and proxies HTTP/1.1.
// Everything it holds, but the snapshot pointer, is owned by the loop.
type Worker struct {
	cfg  Config
	log  *slog.Logger
	snap atomic.Pointer[Snapshot]

	engine  gnet.Engine
	loopRef atomic.Pointer[loopHolder]
	// wakes is the stack of Awaits whose operations are done, pushed from
	// any goroutine (ticket.Wake); freeTickets, loop-owned, recycles them.
	wakes       atomic.Pointer[ticket]
	freeTickets []*ticket
	booted      chan struct{}
	// running is closed on the first tick: gnet's loops exist from then on
	// (OnBoot runs before they do).
	running     chan struct{}
	runningOnce sync.Once
	addr        atomic.Pointer[net.TCPAddr]
	tlsAddr     atomic.Pointer[net.TCPAddr]
	// tickets are the session ticket keys (ticketKeys), made once, by the
	// goroutine that builds the configuration.
	tickets    [][32]byte
	ticketOnce sync.Once
	// handshakes hands a handshake to a goroutine that waits for one
	// (goHandshake).
	handshakes chan func()
	// ticketGen and ticketBuf are the loop's: the generation of the
	// node's ticket keys last installed (rotateTickets), and their copy.
	ticketGen uint64
	ticketBuf [][32]byte
	stats     atomic.Pointer[Stats] // published by the loop each tick
	ticks     atomic.Uint64         // ticks the loop has run

	// Loop-owned state.
	loop      gnet.EventLoop
	epfd      int
	now       int64 // coarse clock, ns since the worker's epoch, set at each wake-up of the loop
	epoch     time.Time
	epochUnix int64  // epoch in Unix nanoseconds: now+epochUnix is the wall clock
	dateLine  []byte // "Date: ...\r\n", refreshed each second
	dateNext  int64  // Worker.now when dateLine is due again (the next second of the wall clock)
	timed     indexset.Set[timed]
	pools     map[string]*pool
	poolKey   []byte                 // the key of an https pool being looked up (poolFor)
	sni       []byte                 // the server name of an https attempt (dispatch)
	paused    indexset.Set[pausable] // connections whose reading is paused for a slow peer
	scratch   []byte                 // response heads and our own answers
	connTok   [][]byte               // tokens of the Connection header being processed
	iov       [][]byte
	tlsOut    []byte // records sealed for one write to a TLS client (tlsConn)
	tlsPorts  []int  // the bound ports of TLSListen (set by OnBoot)
	server    []byte
	// hostname is $hostname: the machine's host name, read once by New
	// (empty when it cannot be read), read-only after.
	hostname  []byte
	freeConns []*clientConn
	bodyBufs  [][]byte      // idle request body buffers (teebody.go)
	largeBufs [][]byte      // idle large ones
	wakeFn    gnet.Runnable // runWakes
	// Client connections open now, for draining.
	live          indexset.Set[*clientConn]
	draining      bool
	stopping      bool
	drainDeadline int64
	lastPrune     int64
	pendingRescue int
	faultLog      faultLog
	accepted      uint64        // client connections since start
	refused       uint64        // of which closed at once for worker_connections
	refusedLogged uint64        // refused at the last log line
	lastRefuseLog int64         // Worker.now of that line
	upOpen        int           // upstream connections on the loop
	requests      uint64        // request heads since start
	alog          *accessLogger // nil: no access log
	dns           *resolver     // node host names' addresses
	disc          *resolver     // discovery_type dns's nodes; nil: none
	// spec is the configuration of the snapshot served, built again when
	// discovered nodes change (rediscover), which rebuildQueued coalesces.
	spec          atomic.Pointer[spec.Spec]
	rebuildQueued atomic.Bool
	// building serializes SetSpec: a build, then the resolvers' names
	// and service_names that its snapshot dropped (resolver.retain,
	// retainServices).
	building sync.Mutex
}

type loopHolder struct{ el gnet.EventLoop }

// New makes a worker; Run serves it.
func New(cfg Config) *Worker {
	if cfg.ServerHeader == "" {
		cfg.ServerHeader = "APISIX/" + spec.CompatVersion
	}
	if cfg.Limits == (httpparse.Limits{}) {
		cfg.Limits = httpparse.DefaultLimits()
	}
	def := func(d *time.Duration) {
		if *d == 0 {
			*d = 60 * time.Second
		}
	}
	def(&cfg.HeaderTimeout)
	def(&cfg.BodyTimeout)
	def(&cfg.KeepaliveTimeout)
	def(&cfg.SendTimeout)
	if cfg.Plugins == (plugins.Env{}) {
		cfg.Plugins = plugins.NewLocalEnv()
	}
	if cfg.Node == nil {
		cfg.Node = new(shm.NodeCounters)
	}
	w := &Worker{
		cfg:     cfg,
		log:     cfg.Logger,
		booted:  make(chan struct{}),
		running: make(chan struct{}),
		epfd:    -1,
		pools:   map[string]*pool{},
		epoch:   time.Now(),
		server:  []byte("Server: " + cfg.ServerHeader + "\r\n"),
		timed:   indexset.New(func(t timed) *int32 { return &t.slot().idx }),
		paused:  indexset.New(func(p pausable) *int32 { return &p.pauseSlot().idx }),
		live:    indexset.New(func(cc *clientConn) *int32 { return &cc.liveIdx }),

		handshakes: make(chan func()),
	}
	if w.log == nil {
		w.log = slog.Default()
	}
	if host, err := os.Hostname(); err == nil {
		w.hostname = []byte(host)
	}
	w.dns = newResolver(cfg.DNS, w.log)
	if len(cfg.DiscoveryDNS.Servers) > 0 {
		w.disc = newResolver(cfg.DiscoveryDNS, w.log)
		w.disc.changed = w.rediscover
	}
	w.epochUnix = w.epoch.UnixNano()
	w.alog = newAccessLogger(cfg.AccessLog, cfg.AccessLogFormat)
	w.wakeFn = gnet.RunnableFunc(w.runWakes)
	w.refreshClock()
	return w
}

// SetSnapshot installs a compiled snapshot; requests that start afterwards
// use it, requests in flight finish on the one they started with. It is safe
// to call from any goroutine.
func (w *Worker) SetSnapshot(s *Snapshot) { w.snap.Store(s) }

// SetSpec compiles s and installs it; on error the current snapshot stays.
// The objects left out because a plugin configuration's reference did
// not resolve here (see Snapshot.refused) are logged, one error each, and
// the rest is installed. yield, if not nil, is called after every route
// compiled (Background's).
func (w *Worker) SetSpec(s *spec.Spec, yield func()) error {
	w.building.Lock()
	defer w.building.Unlock()
	snap, err := compile(s, w.cfg.RouterMode, upstreamEnv{ka: w.cfg.UpstreamKeepalive, decrypt: w.cfg.Decrypt,
		health: w.cfg.Health, dns: w.dns, disc: w.disc}, pluginSet{env: w.cfg.Plugins}, w.snap.Load(), yield)
	if err != nil {
		return err
	}
	for _, err := range snap.refused {
		w.log.Error("configuration: object left out", "err", err)
	}
	w.buildCerts(snap, s.SSLs)
	w.SetSnapshot(snap)
	w.spec.Store(s)
	// Each scan below reads every upstream (some 4 ms at 50 000 routes
	// and 20 000 upstreams): done only when there is a name to drop, as
	// there is none when no node is a host name.
	if w.dns.nameCount() > 0 {
		w.dns.retain(snap.dnsNames())
	}
	if w.disc != nil && w.disc.serviceCount() > 0 {
		w.disc.retainServices(snap.dnsServices())
	}
	return nil
}

// Ready is closed once the worker listens.
func (w *Worker) Ready() <-chan struct{} { return w.booted }

// Addr is the bound listen address, known once Ready is closed.
func (w *Worker) Addr() *net.TCPAddr { return w.addr.Load() }

// TLSAddr is the first TLS listener's bound address, known once Ready is
// closed; nil without one.
func (w *Worker) TLSAddr() *net.TCPAddr { return w.tlsAddr.Load() }

// Run serves until Stop or ctx is done. A worker serves no request before
// it has a snapshot: requests that arrive earlier get 503.
func (w *Worker) Run(ctx context.Context) error {
	defer w.dns.close()
	if w.disc != nil {
		defer w.disc.close()
	}
	go func() {
		select {
		case <-ctx.Done():
			_ = w.Stop(context.Background())
		case <-w.booted:
			<-ctx.Done()
			_ = w.Stop(context.Background())
		}
	}()
	addrs := make([]string, 0, len(w.cfg.Listen)+len(w.cfg.TLSListen))
	for _, a := range w.cfg.Listen {
		addrs = append(addrs, "tcp://"+a)
	}
	for _, a := range w.cfg.TLSListen {
		addrs = append(addrs, "tcp://"+a)
	}
	return gnet.Rotate(w, addrs,
		gnet.WithMulticore(false),
		gnet.WithNumEventLoop(1),
		gnet.WithReusePort(true),
		// SO_REUSEADDR too, as nginx sets it: the connections the
		// worker closed first stay in TIME_WAIT on the port, and
		// without it on both sides no server (nginx, or this gateway
		// after one) could bind the port until they expire.
		gnet.WithReuseAddr(true),
		// Not locked to an OS thread: the loop yields to the scheduler
		// every netpoll.YieldInterval, and a locked goroutine turns each
		// yield into a handoff between two threads. The supervisor pins
		// the process to one CPU (GOMAXPROCS: Procs).
		gnet.WithLockOSThread(false),
		// The clock is read once per wake-up of the loop, right after
		// epoll_wait, as nginx updates its cached time: every deadline is
		// counted from the moment the loop woke for the event that set it.
		gnet.WithWakeHook(w.epoch, w.setClock),
		// The tick runs on the loop, whose blocking polls time out for it
		// as nginx's epoll_wait times out for its next timer.
		gnet.WithLoopTick(TickEvery, w.loopTick),
		gnet.WithTCPNoDelay(gnet.TCPNoDelay),
		// Edge-triggered, with EPOLLRDHUP, as nginx's epoll is: a socket
		// the loop read is not polled again at its next epoll_wait, and a
		// read that does not fill the buffer is the only one of its event
		// (third_party/gnet/COREGATE.md, change 10).
		gnet.WithEdgeTriggeredIO(true),
		gnet.WithLogger(gnetLogger{w.log}),
	)
}

// The event loop must pass through the Go scheduler regularly without
// yielding on every empty poll: that is third_party/gnet's change to gnet
// (see Procs). This fails to build against upstream gnet.
var _ = netpoll.YieldInterval

// Stop closes the listener and every connection.
func (w *Worker) Stop(ctx context.Context) error {
	select {
	case <-w.booted:
	default:
		return nil
	}
	return w.engine.Stop(ctx)
}

// OnBoot implements gnet.EventHandler: it learns the bound addresses
// (the first of Listen is Addr, the first of TLSListen TLSAddr; a port 0
// was given one by the kernel) and the ports that serve TLS, and hands
// the first plain listener to OnListen (the socket selector steers that
// port; the TLS ports are left to the kernel's reuseport hash).
func (w *Worker) OnBoot(e gnet.Engine) gnet.Action {
	w.engine = e
	listener := func(a string) (int, *net.TCPAddr) {
		fd, err := e.DupListener("tcp", a)
		if err != nil {
			return -1, nil
		}
		sa, err := unixGetsockname(fd)
		if err != nil {
			closeFD(fd)
			return -1, nil
		}
		return fd, sa
	}
	for i, a := range w.cfg.TLSListen {
		fd, sa := listener(a)
		if fd < 0 {
			continue
		}
		closeFD(fd)
		w.tlsPorts = append(w.tlsPorts, sa.Port)
		if i == 0 {
			w.tlsAddr.Store(sa)
		}
	}
	if len(w.cfg.Listen) > 0 {
		if fd, sa := listener(w.cfg.Listen[0]); fd >= 0 {
			w.addr.Store(sa)
			if w.cfg.OnListen != nil {
				w.cfg.OnListen([]int{fd})
			} else {
				closeFD(fd)
			}
		}
	}
	close(w.booted)
	return gnet.None
}

// OnShutdown implements gnet.EventHandler.
func (w *Worker) OnShutdown(gnet.Engine) {}

// OnOpen implements gnet.EventHandler: a client connection was accepted, or
// an upstream connection the worker dialed joined the loop.
func (w *Worker) OnOpen(c gnet.Conn) ([]byte, gnet.Action) {
	if w.loop == nil {
		w.loop = c.EventLoop()
		w.epfd = gnet.PollerFD(w.loop)
		w.loopRef.Store(&loopHolder{el: w.loop})
	}
	if p, ok := c.Context().(*drainProbe); ok {
		w.startDrain(p.timeout)
		return nil, gnet.Close
	}
	if uc, ok := c.Context().(*upConn); ok {
		w.upOpen++
		uc.opened(c)
		return nil, gnet.None
	}
	if w.cfg.MaxConns > 0 && w.live.Len()+w.upOpen >= w.cfg.MaxConns {
		w.refuse()
		return nil, gnet.Close
	}
	cc := w.newClient(c)
	c.SetContext(cc)
	return nil, gnet.None
}

// OnClose implements gnet.EventHandler.
func (w *Worker) OnClose(c gnet.Conn, err error) gnet.Action {
	switch x := c.Context().(type) {
	case *clientConn:
		x.closedByPeer()
	case *upConn:
		w.upOpen--
		x.closedByPeer(err)
	}
	return gnet.None
}

// refuse counts a client connection closed at once because the worker
// holds worker_connections connections already. nginx does the same
// ("worker_connections are not enough") rather than leave it queued: the
// client learns at once, and another attempt may land on a worker with
// room. Logged at most once a second.
func (w *Worker) refuse() {
	w.accepted++
	w.refused++
	w.cfg.Node.Accepted.Add(1)
	if w.refusedLogged == 0 || w.now-w.lastRefuseLog >= int64(time.Second) {
		w.log.Warn("worker_connections are not enough, closing new connections",
			"worker_connections", w.cfg.MaxConns, "closed", w.refused-w.refusedLogged)
		w.refusedLogged = w.refused
		w.lastRefuseLog = w.now
	}
}

// OnTraffic implements gnet.EventHandler.
func (w *Worker) OnTraffic(c gnet.Conn) gnet.Action {
	switch x := c.Context().(type) {
	case *clientConn:
		return x.traffic()
	case *upConn:
		return x.traffic()
	}
	return gnet.Close
}

// TickEvery is the period of the loop's tick: how late a deadline
// (timeouts, paused readers, a drain's idle connections) may be noticed,
// and how often the published stats and tick count move.
const TickEvery = 50 * time.Millisecond

// OnTick implements gnet.EventHandler. gnet does not call it (no
// gnet.WithTicker): the worker's tick is the loop's own, loopTick.
func (w *Worker) OnTick() (time.Duration, gnet.Action) { return 0, gnet.None }

// loopTick is the loop's tick (gnet.WithLoopTick): gnet calls it on the
// loop every TickEvery, between two batches of events, after the wake
// hook set the clock.
func (w *Worker) loopTick(time.Duration) {
	w.runningOnce.Do(func() { close(w.running) })
	w.tick()
}

// tick runs on the loop: deadlines, paused readers. The clock was set when
// the loop woke to run it.
func (w *Worker) tick() {
	w.ticks.Add(1)
	w.expireDeadlines()
	w.resumePaused()
	w.publishStats()
	w.tickFaultLog()
	w.rotateTickets()
	if w.alog != nil {
		w.alog.log.Tick(w.now)
	}
	if w.draining {
		w.sweepIdle()
		w.checkDrained()
	}
	if w.now-w.lastPrune > int64(pruneEvery) {
		w.lastPrune = w.now
		w.prunePools()
	}
}

// pruneEvery is how often pools of nodes that left the configuration are
// dropped.
const pruneEvery = 10 * time.Second

// prunePools forgets the pools of nodes the current snapshot no longer
// names once they hold no idle connection. A busy connection of a dropped
// pool that finishes later parks in it and expires by idle_timeout.
func (w *Worker) prunePools() {
	snap := w.snap.Load()
	if snap == nil {
		return
	}
	for key, p := range w.pools {
		if len(p.idle) == 0 && !snap.hasNode(p.node) {
			delete(w.pools, key)
		}
	}
}

// refreshClock reads the system clock: for the worker's start, before its
// loop runs.
func (w *Worker) refreshClock() { w.setClock(time.Since(w.epoch)) }

// setClock sets the coarse clock to d since the epoch (monotonic). The loop
// calls it at every wake-up (gnet.WithWakeHook), before any handler runs.
// Once a second it reads the wall clock for the Date line.
func (w *Worker) setClock(d time.Duration) {
	w.now = int64(d)
	if w.now >= w.dateNext {
		t := time.Now()
		w.dateLine = append(append(w.dateLine[:0], "Date: "...), t.UTC().AppendFormat(nil, "Mon, 02 Jan 2006 15:04:05 GMT")...)
		w.dateLine = append(w.dateLine, "\r\n"...)
		w.dateNext = int64(t.Sub(w.epoch)) + int64(time.Second) - int64(t.Nanosecond())
	}
}

// poolFor returns the keep-alive pool of a node, made on first use. The
// pool of an https node is that of the server name name too (the Host the
// request goes with, serverName); nd keeps the last one it gave, so that
// a node's requests that all go with one name look up nothing.
func (w *Worker) poolFor(up *upstream, nd *node, name []byte) *pool {
	if up.tls != nil {
		if p := nd.pool; p == nil || p.name != string(name) {
			w.poolKey = append(append(append(w.poolKey[:0], nd.key...), '#'), name...)
			p = w.pools[string(w.poolKey)]
			if p == nil {
				key := string(w.poolKey)
				p = &pool{w: w, addr: nd.addr, node: nd.key, name: key[len(key)-len(name):]}
				p.tls = up.tls.tlsConfig(p.name, w.cfg.UpstreamCAs)
				w.pools[key] = p
			}
			nd.pool = p
		}
	} else if nd.pool == nil {
		p := w.pools[nd.key]
		if p == nil {
			p = &pool{w: w, addr: nd.addr, node: nd.key}
			w.pools[nd.key] = p
		}
		nd.pool = p
	}
	p := nd.pool
	p.size, p.idleTO, p.maxRequests = up.kaSize, up.kaIdle, up.kaRequests
	return p
}

// dial connects uc to node nd; uc.opened or uc.dialFailed runs on the loop
// when it is done, never before dial returns.
//
// A node given by IP address is connected to by the loop itself, as
// nginx does: a non-blocking connect whose socket joins the loop's poller
// (gnet.ConnectTCP), with timeout as a deadline of uc. A goroutine that
// dialed waited for the Go runtime's netpoller, which nothing may look at
// for up to 10 ms while every P is busy: the collector marking beside a
// configuration build held requests that needed a new upstream connection
// that long. A node given by host name is connected to the same way, at
// one of the addresses the worker's resolver last found for it
// (resolve.go); only a worker without one (Compile's snapshots) dials
// such a node off the loop, where the name is resolved.
func (w *Worker) dial(uc *upConn, nd *node, timeout time.Duration) {
	el := w.loop
	uc.connectTO = timeout
	ap := nd.ap
	if nd.dns != nil {
		ip, ok := nd.dns.pick()
		if !ok {
			_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				uc.dialFailed(errNotResolved(nd.dns.host))
				return nil
			}))
			return
		}
		ap = netip.AddrPortFrom(ip, nd.dnsPort)
	}
	if ap.IsValid() {
		uc.ap = ap
		fd, err := gnet.ConnectTCP(el, ap, uc, uc.dialFailed)
		if err == nil {
			if fd >= 0 {
				uc.connFD = fd
				w.setDeadline(uc, int64(timeout))
			}
			return
		}
		if !errors.Is(err, errors.ErrUnsupported) {
			_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				uc.dialFailed(err)
				return nil
			}))
			return
		}
	}
	addr := nd.addr
	go func() {
		d := net.Dialer{Timeout: timeout}
		conn, err := d.Dial("tcp", addr)
		if err == nil {
			var ch <-chan gnet.RegisteredResult
			ch, err = el.Enroll(gnet.NewContext(context.Background(), uc), conn)
			if err == nil {
				if r := <-ch; r.Err != nil {
					err = r.Err
				}
			} else {
				_ = conn.Close()
			}
		}
		if err != nil {
			_ = el.Execute(context.Background(), gnet.RunnableFunc(func(context.Context) error {
				uc.dialFailed(err)
				return nil
			}))
		}
	}()
}

// dialStatus maps a dial error to the status APISIX answers: 504 for a
// timeout, 502 otherwise.
func dialStatus(err error) int {
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return 504
	}
	return 502
}

// tlsPort tells whether a connection accepted on local port p is served
// over TLS.
func (w *Worker) tlsPort(p int) bool {
	for _, q := range w.tlsPorts {
		if q == p {
			return true
		}
	}
	return false
}

func addrOf(a net.Addr) (netip.Addr, int) {
	if ta, ok := a.(*net.TCPAddr); ok {
		ip, _ := netip.AddrFromSlice(ta.IP)
		return ip.Unmap(), ta.Port
	}
	return netip.Addr{}, 0
}
