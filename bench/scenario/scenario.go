package scenario

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"coregate/bench/certs"
)

// Errors returned by this package.
var (
	ErrUnknown = errors.New("scenario: unknown scenario")
)

// Groups a scenario's rows are reported in.
const (
	GroupMain    = "main"    // the seeds' table: closed loop, 1 worker
	GroupScaling = "scaling" // the same route at 1..N workers
	GroupLatency = "latency" // fixed-rate load, latency percentiles
	GroupTLS     = "tls"     // clients over TLS 1.3 to the gateways' TLS listeners
)

// Load is the load a scenario applies.
type Load struct {
	Conns int // connections, as wrk -c
	// PerWorker multiplies Conns by the gateway's worker count, so that
	// every worker of a scaling curve sees the seeds' 16 connections
	// (weak scaling) rather than a fixed total spread ever thinner.
	PerWorker bool
	Rate      float64 // total requests/s, as wrk2 -R; 0 runs a closed loop
	Header    string  // extra request header lines, each ending in CRLF
}

// Scenario is one row family of the benchmark.
type Scenario struct {
	Name      string // unique, used on the command line
	Title     string // as the report shows it
	Group     string
	Routes    int
	Consumers int    // consumers with key-auth keys user-key1..N (jwt-auth credentials in a JWT scenario)
	Upstream  bool   // false: the gateway answers itself (mocking)
	Plugins   string // the route's plugins object as JSON, "" for none
	Workers   []int  // worker counts to run
	Load      Load
	// KeepaliveRequests is the requests an upstream keep-alive connection
	// serves before both gateways close it and dial anew
	// (keepalive_requests); 0 means unlimited (1e8, the seeds' setting).
	KeepaliveRequests int
	// AccessLog turns both gateways' access logs on (APISIX's default
	// format, to a file); every other scenario runs with them off.
	AccessLog bool
	// Baseline is the no-plugin scenario with as many routes, whose nginx
	// row a plugin scenario is also compared with; "" for the others.
	Baseline string
	// Ready is false for scenarios whose plugins coregate does not have
	// yet: they are listed in reports as pending and run only when named.
	Ready bool
	// Redis: the plugins count in a redis-server the harness starts;
	// RedisPort, set by the harness, replaces $REDIS_PORT in Plugins.
	Redis     bool
	RedisPort int
	// Balancer, if set, is the upstream type (roundrobin, chash,
	// least_conn, ewma) over two nodes: the run's upstream and a second
	// one, Upstream2, which the harness starts and sets. chash hashes the
	// X-User header (hash_on header), nginx's nearest equivalent of each
	// is Equivalent's. "" is the seeds' single node.
	Balancer  string
	Upstream2 string
	// TLS, if set, has the load speak TLS to the gateways' TLS listeners
	// (coregate's apisix.ssl, nginx's listen ... ssl) instead of plain
	// HTTP; the plain listener stays, for the readiness check.
	TLS *TLS
	// JWT, if set, gives the scenario's consumer a jwt-auth credential
	// instead of a key-auth key, and the load its token (WithJWTKey).
	JWT *JWT
}

// TLS is how a scenario's clients and gateways use TLS. Both gateways get
// the same certificate and key, TLS 1.3 only, the same session ticket
// setting; the clients offer X25519 only (certs.ClientConfig).
type TLS struct {
	Key     string // the server certificate's key: certs.ECDSA or certs.RSA
	NewConn bool   // a new connection per request (Connection: close): a handshake each
	// Tickets turns session tickets on at both gateways (nginx with a
	// ticket key file) and has the clients resume with them; off, neither
	// gateway issues tickets or keeps a session cache, so every handshake
	// is a full one.
	Tickets bool
	MTLS    bool // the gateways ask for and verify a client certificate
	// Handshakes, if above 0, is a second load beside the measured
	// keep-alive one: new connections at this total rate, each a full
	// handshake and one request, over HandshakeConns connections.
	Handshakes     float64
	HandshakeConns int

	// Set by the harness: the TLS port of the gateway being configured
	// and the files both gateways read.
	Port  int
	Files Files
}

// Files are the TLS material a gateway is configured with: the server
// certificate and key of the scenario's key type (paths for nginx, PEM
// for coregate's ssls object), the CA that issued the client certificate,
// and nginx's session ticket key file.
type Files struct {
	CertFile, KeyFile, CAFile string
	CertPEM, KeyPEM, CAPEM    string
	TicketKeyFile             string
}

// WithTLSPort returns s with its TLS listener on port; s.TLS is copied,
// so that the gateways of one scenario can each have a port of their own.
func (s Scenario) WithTLSPort(port int) Scenario {
	if s.TLS != nil {
		t := *s.TLS
		t.Port = port
		s.TLS = &t
	}
	return s
}

// PluginsJSON is the route's plugins object as the gateway gets it.
func (s Scenario) PluginsJSON() string {
	return strings.ReplaceAll(s.Plugins, "$REDIS_PORT", strconv.Itoa(s.RedisPort))
}

// Plain is the scenario's no-plugin reference: the same routes and load,
// no plugins, no consumers, what nginx runs beside a plugin scenario in
// its rounds (the no-plugin ratios).
func (s Scenario) Plain() Scenario {
	p := s
	p.Plugins, p.Consumers, p.Redis, p.Upstream, p.JWT = "", 0, false, true, nil
	return p
}

// mockBody is what the gateway answers itself in the no-upstream
// scenario, the 10-byte body of APISIX's run.sh upstream.
const mockBody = "1234567890"

// The fixed loads of tls-p99-under-handshakes: kept-alive requests, and
// beside them new connections, each a full handshake. Both are well
// within what the load generator can send on one CPU beside the
// upstream, so that the two gateways get the same load.
const (
	tlsRate       = 5000.0
	tlsHandshakes = 500.0
)

// Seeds returns the seeds' scenarios. maxWorkers is N for the worker
// scaling curve (1, 2, 4, … N) and rate the fixed rate of the latency scenario.
func Seeds(maxWorkers int, rate float64) []Scenario {
	c16 := Load{Conns: 16}
	one := []int{1}
	limitCount := `"limit-count":{"count":999999999,"time_window":60,"rejected_code":503,"key":"remote_addr"}`
	// The same limit, counted in Redis: what a round trip to it costs
	// per request.
	limitCountRedis := `"limit-count":{"count":999999999,"time_window":60,"rejected_code":503,"key":"remote_addr",` +
		`"policy":"redis","redis_host":"127.0.0.1","redis_port":$REDIS_PORT}`
	// Counted on the worker and sent to Redis once a second
	// (sync_interval): no round trip per request.
	limitCountRedisSync := limitCountRedis[:len(limitCountRedis)-1] + `,"sync_interval":1}`
	keyAuth := `"key-auth":{}`
	jwtAuth := `{"jwt-auth":{}}`
	apikey := "apikey: user-key1\r\n"
	// 1, 2, 4, … and maxWorkers itself: the curve's shape at a cost that
	// grows with log N, not N.
	top := max(1, maxWorkers)
	var scale []int
	for w := 1; w < top; w *= 2 {
		scale = append(scale, w)
	}
	scale = append(scale, top)
	all := []Scenario{
		{Name: "no-plugin", Title: "no plugins", Group: GroupMain, Routes: 1, Upstream: true, Workers: one, Load: c16, Ready: true},
		{Name: "no-plugin-100", Title: "no plugins", Group: GroupMain, Routes: 100, Upstream: true, Workers: one, Load: c16, Ready: true},
		{Name: "routes-5000", Title: "5000 routes", Group: GroupMain, Routes: 5000, Upstream: true, Workers: one, Load: c16, Ready: true},
		{Name: "redial", Title: "no plugins, 1000 requests per upstream connection", Group: GroupMain, Routes: 1, Upstream: true,
			Workers: one, Load: c16, KeepaliveRequests: 1000, Ready: true},
		{Name: "access-log", Title: "no plugins, access log on", Group: GroupMain, Routes: 1, Upstream: true,
			AccessLog: true, Workers: one, Load: c16, Ready: true},
		{Name: "mocking", Title: "mocking plugin only", Group: GroupMain, Routes: 1, Upstream: false,
			Plugins: `{"mocking":{"response_status":200,"response_example":"` + mockBody + `"}}`, Workers: one, Load: c16, Ready: true},
		{Name: "limit-count", Title: "limit-count", Group: GroupMain, Routes: 1, Upstream: true, Plugins: "{" + limitCount + "}", Workers: one, Load: c16, Ready: true},
		{Name: "limit-count-100", Title: "limit-count", Group: GroupMain, Routes: 100, Upstream: true, Plugins: "{" + limitCount + "}", Workers: one, Load: c16, Ready: true},
		{Name: "limit-count-redis", Title: "limit-count, policy redis", Group: GroupMain, Routes: 1, Upstream: true,
			Plugins: "{" + limitCountRedis + "}", Redis: true, Workers: one, Load: c16, Ready: true},
		{Name: "limit-count-redis-sync", Title: "limit-count, policy redis, sync_interval 1", Group: GroupMain, Routes: 1, Upstream: true,
			Plugins: "{" + limitCountRedisSync + "}", Redis: true, Workers: one, Load: c16, Ready: true},
		{Name: "limit-count-prometheus", Title: "limit-count + prometheus", Group: GroupMain, Routes: 1, Upstream: true,
			Plugins: "{" + limitCount + `,"prometheus":{}}`, Workers: one, Load: c16, Ready: true},
		{Name: "key-auth", Title: "key-auth", Group: GroupMain, Routes: 1, Consumers: 1, Upstream: true, Plugins: "{" + keyAuth + "}",
			Workers: one, Load: Load{Conns: 16, Header: apikey}, Ready: true},
		{Name: "key-auth-100", Title: "key-auth", Group: GroupMain, Routes: 100, Consumers: 100, Upstream: true, Plugins: "{" + keyAuth + "}",
			Workers: one, Load: Load{Conns: 16, Header: apikey}, Ready: true},
		{Name: "key-auth-limit-count", Title: "key-auth + limit-count", Group: GroupMain, Routes: 1, Consumers: 1, Upstream: true,
			Plugins: "{" + keyAuth + "," + limitCount + "}", Workers: one, Load: Load{Conns: 16, Header: apikey}, Ready: true},
		{Name: "key-auth-limit-count-100", Title: "key-auth + limit-count", Group: GroupMain, Routes: 100, Consumers: 100, Upstream: true,
			Plugins: "{" + keyAuth + "," + limitCount + "}", Workers: one, Load: Load{Conns: 16, Header: apikey}, Ready: true},
		{Name: "request-id", Title: "request-id", Group: GroupMain, Routes: 1, Upstream: true, Plugins: `{"request-id":{}}`, Workers: one, Load: c16, Ready: true},
		{Name: "jwt-auth-hs256", Title: "jwt-auth, HS256", Group: GroupMain, Routes: 1, Consumers: 1, Upstream: true, Plugins: jwtAuth,
			JWT: &JWT{Alg: HS256}, Workers: one, Load: c16, Ready: true},
		{Name: "jwt-auth-rs256", Title: "jwt-auth, RS256 (2048-bit key)", Group: GroupMain, Routes: 1, Consumers: 1, Upstream: true,
			Plugins: jwtAuth, JWT: &JWT{Alg: RS256}, Workers: one, Load: c16, Ready: true},
		{Name: "ip-restriction", Title: fmt.Sprintf("ip-restriction, %d CIDRs, client allowed", len(ipWhitelist)), Group: GroupMain,
			Routes: 1, Upstream: true, Plugins: ipRestriction(), Workers: one, Load: c16, Ready: true},
		{Name: "cors", Title: "cors, an allowed Origin", Group: GroupMain, Routes: 1, Upstream: true, Plugins: corsPlugins(),
			Workers: one, Load: Load{Conns: 16, Header: "Origin: " + corsOrigin + "\r\n"}, Ready: true},
		{Name: "response-rewrite", Title: "response-rewrite: a header set, a filter on the body", Group: GroupMain, Routes: 1, Upstream: true,
			Plugins: `{"response-rewrite":{"headers":{"set":{"X-Server-Id":"3"}},"filters":[{"regex":"5678","replace":"abcd","scope":"global"}]}}`, Workers: one, Load: c16, Ready: true},
		{Name: "tls-keepalive-ecdsa", Title: "TLS 1.3 keep-alive, ECDSA P-256", Group: GroupTLS, Routes: 1, Upstream: true,
			Workers: one, Load: c16, TLS: &TLS{Key: certs.ECDSA}, Ready: true},
		{Name: "tls-keepalive-rsa", Title: "TLS 1.3 keep-alive, RSA-2048", Group: GroupTLS, Routes: 1, Upstream: true,
			Workers: one, Load: c16, TLS: &TLS{Key: certs.RSA}, Ready: true},
		{Name: "tls-handshake-full", Title: "TLS 1.3 new connection per request, full handshake", Group: GroupTLS, Routes: 1,
			Upstream: true, Workers: one, Load: c16, TLS: &TLS{Key: certs.ECDSA, NewConn: true}, Ready: true},
		{Name: "tls-handshake-resumed", Title: "TLS 1.3 new connection per request, resumed (tickets)", Group: GroupTLS, Routes: 1,
			Upstream: true, Workers: one, Load: c16, TLS: &TLS{Key: certs.ECDSA, NewConn: true, Tickets: true}, Ready: true},
		{Name: "tls-mtls", Title: "TLS 1.3 keep-alive, client certificate verified", Group: GroupTLS, Routes: 1, Upstream: true,
			Workers: one, Load: c16, TLS: &TLS{Key: certs.ECDSA, MTLS: true}, Ready: true},
		{Name: "tls-p99-under-handshakes", Title: fmt.Sprintf("TLS 1.3 keep-alive at %.0f req/s beside %.0f handshakes/s", tlsRate, tlsHandshakes),
			Group: GroupTLS, Routes: 1, Upstream: true, Workers: one, Load: Load{Conns: 16, Rate: tlsRate},
			TLS: &TLS{Key: certs.ECDSA, Handshakes: tlsHandshakes, HandshakeConns: 8}, Ready: true},
		{Name: "balancer-roundrobin", Title: "2 nodes, roundrobin", Group: GroupMain, Routes: 1, Upstream: true,
			Balancer: "roundrobin", Workers: one, Load: c16, Ready: true},
		{Name: "balancer-chash", Title: "2 nodes, chash on a header", Group: GroupMain, Routes: 1, Upstream: true,
			Balancer: "chash", Workers: one, Load: Load{Conns: 16, Header: "X-User: user-1\r\n"}, Ready: true},
		{Name: "balancer-least_conn", Title: "2 nodes, least_conn", Group: GroupMain, Routes: 1, Upstream: true,
			Balancer: "least_conn", Workers: one, Load: c16, Ready: true},
		{Name: "balancer-ewma", Title: "2 nodes, ewma", Group: GroupMain, Routes: 1, Upstream: true,
			Balancer: "ewma", Workers: one, Load: c16, Ready: true},
		{Name: "scaling", Title: "worker scaling, no plugins", Group: GroupScaling, Routes: 1, Upstream: true, Workers: scale,
			Load: Load{Conns: 16, PerWorker: true}, Ready: true},
		{Name: "latency", Title: fmt.Sprintf("no plugins at %.0f req/s", rate), Group: GroupLatency, Routes: 1, Upstream: true,
			Workers: one, Load: Load{Conns: 16, Rate: rate}, Ready: true},
	}
	for i := range all {
		if s := &all[i]; s.Plugins != "" {
			s.Baseline = "no-plugin"
			if s.Routes == 100 {
				s.Baseline = "no-plugin-100"
			}
		}
	}
	return all
}

// ipWhitelist is the ip-restriction row's whitelist: 99 CIDRs no client
// of the benchmark is in, /16s and /24s, then the loopback /8 the load
// comes from, last, so that nginx's allow list, checked in order, is
// read whole before the client is let in.
var ipWhitelist = func() []string {
	var out []string
	for i := range 99 {
		if i%2 == 0 {
			out = append(out, fmt.Sprintf("10.%d.0.0/16", i))
		} else {
			out = append(out, fmt.Sprintf("192.168.%d.0/24", i))
		}
	}
	return append(out, "127.0.0.0/8")
}()

// ipRestriction is the ip-restriction row's plugins object.
func ipRestriction() string {
	return `{"ip-restriction":{"whitelist":["` + strings.Join(ipWhitelist, `","`) + `"]}}`
}

// corsOrigin is the origin the cors row allows and its load sends.
const corsOrigin = "http://bench.test"

// corsHeaders are the headers the cors plugin writes on the cors row's
// responses, as it is configured there (corsPlugins), and nginx adds in
// its place: Vary: Origin is added whatever the origin, the others only
// for an allowed one.
var corsHeaders = []struct{ name, value string }{
	{"Access-Control-Allow-Origin", corsOrigin},
	{"Access-Control-Allow-Methods", "GET,POST"},
	{"Access-Control-Max-Age", "5"},
	{"Access-Control-Expose-Headers", "X-Request-Id"},
	{"Access-Control-Allow-Headers", "Content-Type"},
}

// corsPlugins is the cors row's plugins object: one allowed origin and a
// list of each kind, as a site's configuration names them.
func corsPlugins() string {
	return `{"cors":{"allow_origins":"` + corsOrigin + `","allow_methods":"GET,POST","max_age":5,` +
		`"expose_headers":"X-Request-Id","allow_headers":"Content-Type"}}`
}

// HasPlugin reports whether the scenario's routes carry plugin name.
func (s Scenario) HasPlugin(name string) bool {
	return strings.Contains(s.Plugins, `"`+name+`"`)
}

// Equivalent names what the nginx reference does for the scenario's
// plugins (NginxConfig), "" when it has none.
func (s Scenario) Equivalent() string {
	var parts []string
	if s.HasPlugin("key-auth") {
		parts = append(parts, "map of API keys")
	}
	if s.HasPlugin("limit-count") {
		parts = append(parts, "limit_req")
	}
	if s.HasPlugin("request-id") {
		parts = append(parts, "$request_id both ways")
	}
	if s.HasPlugin("ip-restriction") {
		parts = append(parts, "allow/deny")
	}
	if s.HasPlugin("cors") {
		parts = append(parts, "add_header Access-Control-*")
	}
	if s.HasPlugin("response-rewrite") {
		parts = append(parts, "add_header + sub_filter")
	}
	if !s.Upstream {
		parts = append(parts, "return 200")
	}
	if d := s.nginxBalancer(); d != "" {
		parts = append(parts, strings.TrimSuffix(d, ";"))
	}
	return strings.Join(parts, " + ")
}

// nginxBalancer is the nginx upstream directive nearest to s.Balancer:
// hash consistent on the same header for chash (ketama points, where
// APISIX's chash has resty.chash's), least_conn, and random two
// least_conn for ewma (two nodes drawn, the less loaded taken, where ewma
// takes the faster); "" for round robin, nginx's default, and the seeds'
// single node.
func (s Scenario) nginxBalancer() string {
	switch s.Balancer {
	case "chash":
		return "hash $http_x_user consistent;"
	case "least_conn":
		return "least_conn;"
	case "ewma":
		return "random two least_conn;"
	}
	return ""
}

// ConnsFor returns the connections l opens against a gateway of w workers.
func (l Load) ConnsFor(w int) int {
	if l.PerWorker {
		return l.Conns * max(1, w)
	}
	return l.Conns
}

// Select picks scenarios by comma-separated names from all. The empty
// string and "default" select the ready ones; "all" selects every one,
// pending included.
func Select(all []Scenario, names string) ([]Scenario, error) {
	switch names {
	case "", "default":
		var out []Scenario
		for _, s := range all {
			if s.Ready {
				out = append(out, s)
			}
		}
		return out, nil
	case "all":
		return slices.Clone(all), nil
	}
	var out []Scenario
	for n := range strings.SplitSeq(names, ",") {
		n = strings.TrimSpace(n)
		i := slices.IndexFunc(all, func(s Scenario) bool { return s.Name == n })
		if i < 0 {
			return nil, fmt.Errorf("%w: %q", ErrUnknown, n)
		}
		out = append(out, all[i])
	}
	return out, nil
}

// URI returns the path of route id (1-based) in a scenario with n routes.
func URI(id, n int) string {
	if id == n {
		return "/hello"
	}
	return fmt.Sprintf("/hello%d", id)
}
