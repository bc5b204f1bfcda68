package worker

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/netip"
	"reflect"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
	"unsafe"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/tlsconf"
	"coregate/worker/control"
	"coregate/worker/router"
	"coregate/worker/shm"
)

// Snapshot is a compiled, immutable view of the configuration: the router and
// everything a request needs once it has matched. It is built off the event
// loop (Compile) and swapped in between requests; a request keeps the snapshot
// it started with until it ends.
//
// The only fields written after Compile are the loop-owned caches noted on
// node and the balancer state, both touched by the one event loop only.
type Snapshot struct {
	router *router.Router
	// routes are in the Spec's order. routes, slots, place and
	// specRoutes are chunked lists, each sharing with prev's what a
	// build from prev did not change (chunked).
	routes chunked[*route]
	// slots are the routes by the router's Index (a request's route is
	// slots[Match's index]); place is each route's, in routes' order.
	// A build from scratch puts route i in slot i; a build from prev
	// (compile) keeps each route it takes over in its slot, so that the
	// router is updated for the changed routes only, and slots has holes
	// (nil), listed in free, where routes were deleted.
	slots chunked[*route]
	place chunked[routePlace]
	free  []int32
	// nodes counts, by node key (node.key), the compiled upstreams of
	// upstreams and inline that have a node of that key: a build from
	// prev changes the counts of the upstreams it adds and drops only.
	nodes *layered[string, int32]
	// globals are the global rules' plugins, one set per rule in the
	// Spec's order, as built; global is what the request path runs: them
	// all in one set, in execution order, a plugin that two rules
	// configure left out (APISIX's merge_global_rules). nil when no rule
	// has a plugin.
	globals []plugins.Phases
	global  *plugins.Phases
	// consumers is the snapshot's consumers and credentials, indexed
	// (Env.Consumers of every plugin built with it); nil when none.
	consumers *plugins.ConsumerIndex
	// upstreams are the compiled upstreams by the Spec object they were
	// compiled from, each with the number of routes (the global rules
	// counting as one) that send requests to it: the next build takes
	// over those whose object it still has (an unchanged one, shared by
	// the configurations; see compile), and a build from prev derives
	// the map and counts in and out the routes it builds and drops, so
	// that an upstream leaves with the last route on it.
	upstreams *layered[*spec.Upstream, upstreamRef]
	// inline are the upstreams the plugins' configurations write out
	// (traffic-split's), compiled, by their JSON: the next build takes
	// over those it still has, as upstreams. globalSplits: the global
	// rules' plugins took upstreams (splitEnv).
	inline       map[string]*upstream
	globalSplits bool
	// instances are the instances of the Shareable plugins
	// (plugins.Shareable) the routes' builds made, by plugin name and
	// configuration (shareKey), and instanceRefs each one's key and the
	// number of routes holding it: routes with the same configuration of
	// such a plugin share one instance, as they share an upstream. A
	// build from prev derives both as upstreams, and an instance leaves
	// with the last route holding it.
	instances    *layered[string, plugins.Instance]
	instanceRefs *layered[plugins.Instance, sharedRef]
	// refused are the objects compile left out because of a plugin
	// configuration's reference (plugins.ErrReference): the consumers and
	// credentials IndexConsumers refused, the routes whose plugins did not
	// build. Each error names the object, the plugin and the field, never
	// a value; SetSpec logs them.
	refused []error
	// certs are the server certificates of the Spec's ssls, for the TLS
	// listeners' handshakes (SetSpec builds them); nil on a worker
	// without TLS listeners. ssls are the objects they were built from,
	// for the next SetSpec to keep them when they did not change.
	certs *tlsconf.Table
	ssls  []*spec.SSL

	// What the snapshot was built from, for the next build to take over
	// the routes that did not change (see compile): the plugin registry
	// and Env (without its per-snapshot Consumers and Metadata), the
	// Spec's JSON-kept resources, and the consumers and plugin metadata
	// as indexed. Each route keeps its own Spec objects and router input
	// (route.from, route.in), so that a build over 5 000 routes allocates
	// no per-snapshot copy of them.
	reg      *plugins.Registry
	env      plugins.Env
	shared   sharedInputs
	consList []*plugins.Consumer
	metadata *plugins.Settings
	// byID are the Spec's upstreams and services, and those lists as
	// given: the next build takes the maps over when its lists hold the
	// same objects, and then a route object it takes over has the
	// service and upstream it had, found without a lookup.
	byID idIndex
	// specRoutes is the Spec's list of routes the snapshot was built
	// from, and runs its stretches whose routes follow one another in
	// routes, each built from its object and taken over as it is by a
	// build over the same upstreams and services (no ssl to read again,
	// no variants): the next build compares its list with specRoutes
	// pointer by pointer and takes a run's routes over in one copy,
	// without reading them (compile). specRoutes is a copy: a caller
	// that puts a route in its list in place, as some tests do, and
	// builds from this snapshot gets the route built.
	specRoutes chunked[*spec.Route]
	runs       []takeRun
	// specList is the Spec's list itself, for the next build to know
	// without reading it that its own list begins with this one's objects
	// (control.Extends: a Delta's list made in the array of the one
	// before). Never written: the array is the Spec's.
	specList []*spec.Route
}

// takenRun is a stretch of a build's routes (compile's taken): the n
// routes of snap.routes from at on are prev.routes' from from on, taken
// over; from is -1 for n routes built. A change of one route of 50 000
// is three of them, where a list of prev's index of each route was
// 200 kB a build.
type takenRun struct{ at, from, n int32 }

// addTaken notes in taken that snap.routes[at] is prev.routes[from] (or
// one built, from -1), and the n-1 after it those after it.
func addTaken(taken []takenRun, at, from, n int) []takenRun {
	if k := len(taken); k > 0 {
		l := &taken[k-1]
		if int(l.at+l.n) == at && (from < 0 && l.from < 0 || from >= 0 && l.from >= 0 && int(l.from+l.n) == from) {
			l.n += int32(n)
			return taken
		}
	}
	return append(taken, takenRun{int32(at), int32(from), int32(n)})
}

// droppedOf returns, in order, the indexes of prev's n routes that taken
// does not take over.
func droppedOf(n int, taken []takenRun) []int32 {
	// taken holds its runs in prev's order but where routes moved (a
	// route's creation time changed); sorted then, in a copy.
	kept, last := taken, int32(-1)
	for _, t := range taken {
		if t.from < 0 {
			continue
		}
		if t.from < last {
			kept = slices.Clone(taken)
			slices.SortFunc(kept, func(a, b takenRun) int { return int(a.from) - int(b.from) })
			break
		}
		last = t.from
	}
	var dropped []int32
	next := int32(0) // prev's routes before next are kept or listed
	for _, t := range kept {
		if t.from < 0 {
			continue
		}
		for ; next < t.from; next++ {
			dropped = append(dropped, next)
		}
		next = max(next, t.from+t.n)
	}
	for ; int(next) < n; next++ {
		dropped = append(dropped, next)
	}
	return dropped
}

// takeRun is one of Snapshot.runs: the n objects of specRoutes from
// spec on are those of the n routes from route on.
type takeRun struct{ spec, route, n int32 }

// addRun notes in runs that the object specRoutes[i] is that of
// routes[ri], which a build from the same upstreams and services takes
// over as it is.
func addRun(runs []takeRun, i, ri int) []takeRun {
	if n := len(runs); n > 0 {
		if l := &runs[n-1]; int(l.spec+l.n) == i && int(l.route+l.n) == ri {
			l.n++
			return runs
		}
	}
	return append(runs, takeRun{int32(i), int32(ri), 1})
}

// sameList is slices.Equal of two of a Spec's lists of objects, without
// reading them when they are one list: the same array and length, with
// no room past it, as a Delta that keeps a resource whole makes its list
// (its base's, control.DecodeDelta). A list's objects are never written in
// place once a snapshot is built from it, and the room check leaves out
// two lists appended to one with room, which the second append wrote
// over. The 20 000 upstreams of the bench admin rows compared one by one
// were a quarter of the instructions of a route added at 50 000 routes
// (140 000 of 584 000: cachegrind, GOMAXPROCS=1 GOGC=off, of the Deltas
// of BenchmarkDeltaApply/added-to-50000 decoded and built).
func sameList[T comparable](a, b []T) bool {
	if len(a) == len(b) && cap(a) == len(a) && cap(b) == len(b) && unsafe.SliceData(a) == unsafe.SliceData(b) {
		return true
	}
	return slices.Equal(a, b)
}

// idIndex is a Spec's upstreams and services by id, and their lists.
type idIndex struct {
	upList  []*spec.Upstream
	svcList []*spec.Service
	ups     map[string]*spec.Upstream
	svcs    map[string]*spec.Service
}

// sharedInputs are the Spec's resources that any route's build may read:
// the consumers and their credentials (auth plugins, consumer variants),
// plugin configs, global rules, consumer groups, plugin metadata and the
// secret objects ($secret:// references).
type sharedInputs struct {
	consumers      []*spec.Consumer
	credentials    []json.RawMessage
	pluginConfigs  []*spec.PluginConfig
	globalRules    []*spec.GlobalRule
	consumerGroups []*spec.ConsumerGroup
	metadata       []json.RawMessage
	secrets        []json.RawMessage
}

func sharedOf(s *spec.Spec) sharedInputs {
	return sharedInputs{s.Consumers, s.Credentials, s.PluginConfigs, s.GlobalRules, s.ConsumerGroups, s.PluginMetadata, s.Secrets}
}

func (a *sharedInputs) equal(b *sharedInputs) bool {
	return sameObjects(a.consumers, b.consumers) && sameRaws(a.credentials, b.credentials) &&
		sameObjects(a.pluginConfigs, b.pluginConfigs) && sameObjects(a.globalRules, b.globalRules) &&
		sameObjects(a.consumerGroups, b.consumerGroups) && sameRaws(a.metadata, b.metadata) &&
		sameRaws(a.secrets, b.secrets)
}

// sameObjects reports whether a and b hold the same objects, or equal
// ones (a Config frame decodes them anew), in the same order.
func sameObjects[T any](a, b []*T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] && !reflect.DeepEqual(a[i], b[i]) {
			return false
		}
	}
	return true
}

func sameRaws(a, b []json.RawMessage) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			return false
		}
	}
	return true
}

// routeFrom is what one route of a snapshot was built from: its Spec
// object, its service's and its upstream's (nil when none).
type routeFrom struct {
	route *spec.Route
	svc   *spec.Service
	up    *spec.Upstream
}

// routePlace is where a route lies in a snapshot's router: its slot and
// its router.Route.Order, which follows the Spec's order of the routes.
type routePlace struct {
	slot  int32
	order uint64
}

// orderGap is the distance between the Orders of consecutive routes of a
// build from scratch: room for the routes created between them since,
// which take Orders in the gap (placeRoutes).
const orderGap = 1 << 20

// hasNode reports whether a node of key key (node.key: its dial address
// for http) is in the snapshot.
func (s *Snapshot) hasNode(key string) bool {
	_, ok := s.nodes.get(key)
	return ok
}

// sharedRef is the key of an instance of Snapshot.instances and the number
// of its routes.
type sharedRef struct {
	key  string
	refs int32
}

// shareKey is the key of a Shareable plugin's instance in
// Snapshot.instances: the plugin's name and its configuration's bytes.
func shareKey(name string, raw []byte) string {
	return name + "\x00" + string(raw)
}

// upstreamRef is a compiled upstream of Snapshot.upstreams and the number
// of its routes.
type upstreamRef struct {
	cu   *upstream
	refs int32
}

// addNodes counts cu's nodes in nodes; dropNodes counts them out, deleting
// the keys no upstream has left.
func addNodes(nodes *layered[string, int32], cu *upstream) {
	for _, nd := range cu.nodes {
		n, _ := nodes.get(nd.key)
		nodes.set(nd.key, n+1)
	}
}

func dropNodes(nodes *layered[string, int32], cu *upstream) {
	for _, nd := range cu.nodes {
		if n, _ := nodes.get(nd.key); n > 1 {
			nodes.set(nd.key, n-1)
		} else {
			nodes.del(nd.key)
		}
	}
}

// route is a route as compile builds it for the request path. A worker
// keeps one per route (50 000 and more): what few routes have (a name, a
// service, consumers' variants) lies behind about, so that the struct
// fits a smaller size class (TestRouteSize).
type route struct {
	up *upstream // nil: the route has no upstream (answered 503)
	// websocket is enable_websocket, the route's or its service's.
	websocket bool
	// renew: up names an ssl object or takes its nodes from discovery
	// (namesSSL), so that the next build builds the route again; kept
	// here for that build's walk over the routes, which reads no
	// upstream.
	renew bool
	// to is the route's proxy timeouts: its upstream's (&up.to), or
	// defaultTimeouts, or where the route sets its own, those. Shared
	// and read-only: a pointer, 16 bytes less in each route of the slab
	// than the three inline (TestRouteSize), most routes having none of
	// their own.
	to *timeouts
	// plugins are the route's plugins in their phase tables: its own
	// over its plugin_config's over its service's (mergePlugins), built
	// once for this snapshot.
	plugins plugins.Phases
	// about is the route's name, service, consumers' variants, host
	// patterns and splits; never nil (noAbout when it has none of them),
	// shared with the route's splits, read-only once built.
	about *routeAbout

	// What the route was built from and what it gave the router (its
	// Index and Order aside, its place in each snapshot: Snapshot.place), for a later
	// build to take it over (see compile). Read by builds, and for the
	// matched_uri variable in.URIs, the uri patterns the route matches
	// by (matchedURI; its hosts are in about): the strings of its Spec
	// route, where the route kept a copy of them as byte slices (24 bytes
	// in the slab and a 24-byte array a route).
	from routeFrom
	in   routeIn
}

// id is the route's id, its Spec route's: a view of that string, where
// the route kept one of its own, 16 bytes more in each route of the slab.
func (rt *route) id() string { return rt.from.route.ID.String() }

// routeIn is a route's router.Route but its Index and Order, which are
// its place in each snapshot (Snapshot.place) and which a build sets
// (at): 16 bytes less in each route of the slab (TestRouteSize).
type routeIn struct {
	URIs        []string
	Priority    int
	Methods     router.Method
	Hosts       []string
	RemoteAddrs []netip.Prefix
	Vars        router.Expr
}

// at is in as the router's input, at index with order.
func (in *routeIn) at(index int, order uint64) router.Route {
	return router.Route{Index: index, URIs: in.URIs, Priority: in.Priority, Methods: in.Methods,
		Hosts: in.Hosts, RemoteAddrs: in.RemoteAddrs, Vars: in.Vars, Order: order}
}

// routeAbout is what few routes have, apart from the struct each route
// has (route.about).
type routeAbout struct {
	// For the log phase's and the access log's variables: the route's
	// name, its service's id and name (nil when none).
	name, serviceID, serviceName []byte
	// byConsumer are the route's plugins merged with a consumer's, for
	// each consumer whose plugins change the route's (consumerPhases);
	// nil when the route cannot attach one.
	byConsumer map[*plugins.Consumer]*consumerPhases
	// hosts are the host patterns the route matches by, for the
	// matched_host variable (matchedPattern); nil when it has none.
	hosts [][]byte
	// splits are the route with another upstream in place of its own,
	// for each upstream its plugins' builds took from Env.Upstreams
	// (traffic-split): Ctx.SetUpstream's choices. nil when none. Here
	// rather than in route, with hosts: 32 bytes less in each route of
	// the slab (TestRouteSize), most routes having neither.
	splits map[*upstream]*route
}

// noAbout is the about of the routes without a name, a service or
// consumers' variants, shared by them all; never written.
var noAbout = &routeAbout{}

// nilIfEmpty is s as bytes, nil when empty: an unset variable ("-" in
// the access log).
func nilIfEmpty(s string) []byte {
	if s == "" {
		return nil
	}
	return []byte(s)
}

// consumerPhases are a route's plugins merged with one consumer's, as
// APISIX's merge_consumer_route: the consumer's configuration of a plugin
// wins over its group's, which wins over the route's. The consumer's authentication plugins
// (CredentialPlugin: their configuration is its credential) are left out:
// they ran in the rewrite phase already. fresh are the rewrite phases of
// the plugins the consumer adds, run once it is attached.
type consumerPhases struct {
	phases plugins.Phases
	fresh  []plugins.RewritePhase
}

const (
	passHostPass = iota
	passHostNode
	passHostRewrite
)

type upstream struct {
	// src is the Spec object compiled (for an inline one of a plugin's
	// configuration, the one decoded from its JSON).
	src   *spec.Upstream
	bal   *balancer
	nodes []*node
	// passive is the upstream's checks.passive (nil: none).
	passive      *spec.PassiveCheck
	retryTimeout time.Duration
	// to is the upstream's timeouts (or the defaults), which its routes
	// without their own point at (route.to).
	to timeouts
	// upstreamHost is pass_host=rewrite's upstream_host, the Spec's
	// string, read as bytes (viewBytes).
	upstreamHost string
	kaSize       int
	kaIdle       time.Duration
	kaRequests   int
	// tls is the TLS side of a scheme: https upstream, nil for http.
	tls *upstreamTLS
	// service is the service_name its nodes come from (nil: no
	// discovery resolver).
	service *dnsService
	// disc: its nodes are discovery_type dns's, which change without
	// the upstream object changing (discoveredNodes).
	disc bool
	// passHost and retries (at most math.MaxInt32, which no request's
	// tries reach) sit beside disc, in one word, and upstreamHost is a
	// string: upstream is 144 bytes, a size class, where it was 160 with
	// retries a word of its own and upstreamHost a byte slice, and 168,
	// in the 176-byte class, with passHost apart from disc
	// (TestUpstreamSize).
	passHost uint8
	retries  int32
}

// node is one upstream server of one upstream.
type node struct {
	addr string // dial address host:port
	// key names the node's pools: addr for http; for https, the scheme,
	// addr and the upstream's TLS identity, to which each pool adds its
	// server name (Worker.poolFor).
	key string
	// ap is addr when its host is an IP address: the loop connects to it
	// itself (Worker.dial). Invalid for a host name.
	ap netip.AddrPort
	// hostHeader is the Host sent with pass_host=node, a string read as
	// bytes where it is used (viewBytes). The node's host, for the
	// balancer_ip variable, is addr's (host): node is 128 bytes, a size
	// class, where it was 144 with a string of it (160 with it and
	// hostHeader as byte slices; a node an upstream: TestNodeSize).
	hostHeader string
	weight     int
	priority   int
	// pool is resolved on the event loop on first use (loop-owned cache).
	pool *pool
	// health is the node's state and counters (worker/health.go); nil
	// when its upstream has no checks.
	health *shm.HealthNode
	// dns is the node's host name when it is not an IP address and the
	// worker resolves names (resolve.go), dnsPort its port: the loop
	// connects to one of the name's current addresses.
	dns     *dnsName
	dnsPort uint16
}

// host is the node's host, for the balancer_ip variable (a node given by
// host name shows the address connected to instead, exchange.upAP;
// upstream_addr reads addr): addr without its port, an IPv6 address
// without its brackets, as the node's spec.Node.Host is written (addr is
// its net.JoinHostPort, which net.SplitHostPort undoes). A view of addr:
// it allocates nothing.
func (nd *node) host() string {
	h, _, err := net.SplitHostPort(nd.addr)
	if err != nil {
		return nd.addr
	}
	return h
}

// Default proxy timeouts when neither route nor upstream sets them: nginx's
// proxy_connect_timeout / proxy_send_timeout / proxy_read_timeout.
const (
	defaultConnectTimeout = 60 * time.Second
	defaultSendTimeout    = 60 * time.Second
	defaultReadTimeout    = 60 * time.Second
)

// timeouts are a route's or an upstream's proxy timeouts: connect, send
// and read (nginx's proxy_*_timeout).
type timeouts struct {
	connect, send, read time.Duration
}

// defaultTimeouts are the timeouts of the routes without their own or an
// upstream's; never written.
var defaultTimeouts = timeouts{defaultConnectTimeout, defaultSendTimeout, defaultReadTimeout}

// Compile turns a validated Spec into a Snapshot. It runs off the event loop
// and allocates freely; an error leaves the caller's current snapshot alone.
//
// A plugin configuration's $env:// reference is resolved when its plugin
// is built (plugins.Registry), from this process's environment. A route,
// a consumer or a credential refused because of one (plugins.ErrReference:
// the variable is not set here, or its value is refused) is left out of
// the snapshot, the error kept in Snapshot.refused, and the rest served: no
// credential is matched against a reference that did not resolve. A
// global rule so refused refuses s, as any other error does: leaving it
// out would serve every route without it.
//
// A Spec marked checked by a registry of the same fingerprint as the one
// building it (spec.Spec.Checked, plugins.Registry.Trusts: its
// supervisor checked every configuration where it entered the node) is
// built without its configurations being checked again, but for those
// holding a reference, which resolve here; any other Spec is checked as
// it is built.
func Compile(s *spec.Spec, mode router.Mode) (*Snapshot, error) {
	return compile(s, mode, upstreamEnv{}, pluginSet{}, nil, nil)
}

// pluginSet is what compile builds plugins with: a registry
// (plugins.Default when nil) and the worker's Env (an in-process one when
// zero), the same for every snapshot so that counters and metric series
// outlive a reload.
type pluginSet struct {
	reg *plugins.Registry
	env plugins.Env
}

// Keepalive is the keep-alive pool an upstream gets when it sets no
// keepalive_pool: nginx_config.http.upstream in config.yaml. Zero fields
// take APISIX's defaults (320, 60 s, 1000).
type Keepalive struct {
	Size     int
	Idle     time.Duration
	Requests int
}

// compile builds s's snapshot. yield, if not nil, is called after every
// route (see Background).
//
// prev, if not nil, is the snapshot being served: an upstream object of s
// that prev was compiled from too (the same pointer: configurations share
// the objects that did not change, control.DecodeDelta) keeps prev's
// compiled upstream, with its balancer's state and its nodes' pools, as
// nginx keeps an upstream across a reload that does not change it. The
// event loop goes on using prev meanwhile: compile reads only what no one
// writes after compiling (the upstream and its nodes' addresses).
func compile(s *spec.Spec, mode router.Mode, ue upstreamEnv, ps pluginSet, prev *Snapshot, yield func()) (*Snapshot, error) {
	if yield == nil {
		yield = func() {}
	}
	if ps.reg == nil {
		ps.reg = plugins.Default
	}
	if ps.env == (plugins.Env{}) {
		ps.env = plugins.NewLocalEnv()
	}
	snap := &Snapshot{reg: ps.reg, env: ps.env, shared: sharedOf(s)}
	checked := ps.reg.Trusts(s.Checked)
	ue.checked = sync.OnceValue(func() map[*spec.Upstream]string { return checkedNames(s) })
	ue.resolve = ps.reg.Resolve
	ue.ssl = func(id string) *spec.SSL {
		for _, sl := range s.SSLs {
			if sl.ID.String() == id {
				return sl
			}
		}
		return nil
	}
	// A route whose Spec objects (route, service, upstream) are those of
	// a route of prev is taken over as prev built it, when nothing else
	// its build reads changed: the same plugin registry and Env, and the
	// same consumers, credentials, plugin configs, global rules, consumer groups, plugin
	// metadata and secrets (whose indexes are then prev's too, so that its consumer
	// variants stay keyed by the same consumers). The configuration store
	// shares unchanged objects between Specs and a Delta keeps them, so a
	// change to one route of 5 000 builds one route, and updates the
	// router for it (updateRouter). A
	// changed secret object builds everything again: its $secret://
	// references are read anew (here, off the event loop).
	reuse := prev != nil && prev.reg == ps.reg && prev.env == ps.env && prev.shared.equal(&snap.shared)
	if !reuse {
		ps.reg.UpdateSecrets(s.Secrets)
	}
	var consumers []*plugins.Consumer
	if reuse {
		snap.consumers, consumers, snap.metadata = prev.consumers, prev.consList, prev.metadata
	} else {
		cons, list, err := indexConsumers(s, ps.reg, checked)
		if err != nil {
			return nil, err
		}
		snap.consumers, consumers = cons, list
		if cons != nil {
			snap.refused = append(snap.refused, cons.Refused()...)
		}
		if snap.metadata, err = ps.reg.IndexMetadataChecked(s.PluginMetadata, checked); err != nil {
			return nil, err
		}
	}
	snap.consList = consumers
	cons := snap.consumers
	if cons != nil {
		ps.env.Consumers = cons
	}
	ps.env.Metadata = snap.metadata
	pluginConfigs := make(map[string]map[string]json.RawMessage, len(s.PluginConfigs))
	for _, pc := range s.PluginConfigs {
		pluginConfigs[pc.ID.String()] = pc.Plugins
	}
	// sameRefs: s has prev's upstream and service objects, in the same
	// order, and their maps are prev's.
	sameRefs := prev != nil && prev.byID.ups != nil &&
		sameList(prev.byID.upList, s.Upstreams) && sameList(prev.byID.svcList, s.Services)
	if sameRefs {
		snap.byID = prev.byID
		snap.byID.upList, snap.byID.svcList = s.Upstreams, s.Services
	} else {
		snap.byID = idIndex{upList: s.Upstreams, svcList: s.Services,
			ups: make(map[string]*spec.Upstream, len(s.Upstreams)), svcs: make(map[string]*spec.Service, len(s.Services))}
		for _, u := range s.Upstreams {
			snap.byID.ups[u.ID.String()] = u
		}
		for _, sv := range s.Services {
			snap.byID.svcs[sv.ID.String()] = sv
		}
	}
	ups, svcs := snap.byID.ups, snap.byID.svcs
	// incremental: the routes prev built from the same objects are
	// taken over (reuseRoutes below), and so is prev's upstream
	// bookkeeping: its maps derived (layered), the routes built counted
	// in, the routes dropped counted out (dropRoutes), where a build
	// from scratch counted every route in anew, 78 % of a change's CPU
	// at 50 000 routes (BenchmarkCompileChange).
	incremental := reuse && !prev.globalSplits
	var compiled *layered[*spec.Upstream, upstreamRef]
	if incremental {
		compiled, snap.nodes = prev.upstreams.derive(), prev.nodes.derive()
		for _, cu := range prev.inline {
			dropNodes(snap.nodes, cu) // the routes that chose them are built again
		}
		snap.instances, snap.instanceRefs = prev.instances.derive(), prev.instanceRefs.derive()
	} else {
		compiled, snap.nodes = (*layered[*spec.Upstream, upstreamRef])(nil).derive(), (*layered[string, int32])(nil).derive()
		snap.instances, snap.instanceRefs = (*layered[string, plugins.Instance])(nil).derive(), (*layered[plugins.Instance, sharedRef])(nil).derive()
	}
	// share gives the routes' builds the instances of the Shareable
	// plugins: one of snap.instances, or one it builds and puts there.
	// routeShared are those the route being built was given, counted in
	// once it is kept; sharedAdded those built, which leave at the end
	// when no route kept holds them (a refused route's).
	var routeShared, sharedAdded []plugins.Instance
	share := func(name string, raw json.RawMessage, build func() (plugins.Instance, error)) (plugins.Instance, error) {
		key := shareKey(name, raw)
		inst, ok := snap.instances.get(key)
		if !ok {
			var err error
			if inst, err = build(); err != nil {
				return nil, err
			}
			snap.instances.set(key, inst)
			snap.instanceRefs.set(inst, sharedRef{key: key})
			sharedAdded = append(sharedAdded, inst)
		}
		routeShared = append(routeShared, inst)
		return inst, nil
	}
	snap.upstreams = compiled
	// held are the upstreams the route (or the global rules) being built
	// chose so far, each once; hold counts them in once it is kept.
	// added are those compiled holds nothing of yet: the ones a refused
	// route alone chose leave at the end (unheld). renewed are prev's
	// upstreams naming an ssl object that this build compiled again.
	var held, added []*spec.Upstream
	var renewed map[*spec.Upstream]bool
	hold := func() {
		for _, u := range held {
			r, _ := compiled.get(u)
			r.refs++
			compiled.set(u, r)
		}
		held = held[:0]
	}
	upFor := func(u *spec.Upstream) (*upstream, error) {
		if !slices.Contains(held, u) {
			held = append(held, u)
		}
		r, ok := compiled.get(u)
		if ok && !(incremental && namesSSL(r.cu) && !renewed[u]) {
			return r.cu, nil
		}
		cu := (*upstream)(nil)
		if !ok && prev != nil {
			p, _ := prev.upstreams.get(u)
			if cu = p.cu; namesSSL(cu) {
				cu = nil // its ssl object may have changed
			}
		}
		if cu == nil {
			var err error
			if cu, err = compileUpstream(u, ue); err != nil {
				return nil, err
			}
		}
		if ok {
			// prev's, taken over with its routes: compiled again.
			if renewed == nil {
				renewed = map[*spec.Upstream]bool{}
			}
			renewed[u] = true
			dropNodes(snap.nodes, r.cu)
		} else {
			added = append(added, u)
		}
		r.cu = cu
		compiled.set(u, r)
		addNodes(snap.nodes, cu)
		return cu, nil
	}
	// The upstreams the plugins send requests to (traffic-split): their
	// builds take them through ps.env.Upstreams, which notes them for
	// the route being built (splits).
	se := &splitEnv{ups: ups, upFor: upFor, ue: ue, snap: snap, prev: prev}
	ps.env.Upstreams = se

	// Global rules that chose upstreams give every route their variants:
	// they are built again, and so is every route, each time.
	if reuse && !prev.globalSplits {
		snap.globals, snap.global = prev.globals, prev.global
	} else {
		for _, gr := range s.GlobalRules {
			ph, err := ps.reg.BuildPhasesChecked(gr.Plugins, ps.env, checked)
			if err != nil {
				return nil, fmt.Errorf("global_rule %s: %w", gr.ID, err)
			}
			snap.globals = append(snap.globals, ph)
		}
		snap.global = mergeGlobals(snap.globals)
		hold()
	}
	globalSplits := se.take()
	snap.globalSplits = len(globalSplits) > 0
	reuseRoutes := reuse && !snap.globalSplits && (prev == nil || !prev.globalSplits)
	authGlobal := snap.global != nil && hasAuth(ps.reg, snap.global.Plugins)
	// One allocation for the routes, sized for all of them: a build of
	// 5 000 routes made 5 000 route objects and regrew the slice
	// (BenchmarkCompile5000). A build that takes over prev's routes
	// allocates the few it builds one by one. The router's input is
	// scratch, reused from one build to the next (routeInputs).
	var slab []route
	if !reuseRoutes {
		slab = make([]route, len(s.Routes))
	}
	// routes makes snap.routes, sharing prev's chunks of the routes it
	// takes over at the places they had there.
	var routes chunkBuilder[*route]
	if reuseRoutes {
		routes.prev = &prev.routes
	}
	routes.grow(len(s.Routes))
	// taken is, for each of snap.routes, the index in prev.routes of the
	// route taken over, -1 for one built, in runs.
	var taken []takenRun
	// prevIndex finds the route prev built from r, -1 when prev has none.
	// Routes keep their order (the store serves them in creation order),
	// so it looks where the last one was found first: r is the route
	// there, or replaced it (the same id), or follows one deleted since;
	// past prev's last route, r was created since. Only when none of
	// these holds does it make a map of prev's routes, once per build:
	// one for every build of a bulk load, which appends routes, was a
	// tenth of a worker's garbage. The map is one of routeIndexes,
	// emptied and given back when the build ends.
	var next int
	var byRoute map[*spec.Route]int
	defer func() {
		if byRoute != nil {
			clear(byRoute)
			routeIndexes.Put(byRoute)
		}
	}()
	prevIndex := func(r *spec.Route) int {
		if byRoute == nil {
			switch {
			case next >= prev.routes.len():
				return -1
			case prev.routes.at(next).from.route == r:
				next++
				return next - 1
			case prev.routes.at(next).from.route.ID == r.ID:
				next++
				return -1
			case next+1 < prev.routes.len() && prev.routes.at(next+1).from.route == r:
				next += 2
				return next - 1
			}
			byRoute, _ = routeIndexes.Get().(map[*spec.Route]int)
			if byRoute == nil {
				byRoute = make(map[*spec.Route]int, prev.routes.len())
			}
			for i, pr := range prev.routes.all {
				byRoute[pr.from.route] = i
			}
		}
		i, ok := byRoute[r]
		if !ok {
			return -1
		}
		return i
	}
	// specRoutes makes snap.specRoutes, sharing prev's chunks that hold
	// the same objects at the same places.
	var specRoutes chunkBuilder[*spec.Route]
	if prev != nil {
		specRoutes.prev = &prev.specRoutes
	}
	specRoutes.grow(len(s.Routes))
	// fast: prev's runs are taken over by pointer (Snapshot.runs), j
	// the object of prev.specRoutes that r is expected to be, found
	// again past a route replaced (the same id), created (r not there)
	// or deleted (up to scanAhead of them).
	fast := reuseRoutes && sameRefs
	// extends: s's list begins with the objects of prev's (a Delta that
	// added routes at the end), which a run then takes over to its end
	// without comparing them: samePointers over the 50 000 routes kept
	// was a sixth of the instructions of a route added at 50 000 (98 000
	// of 584 000, BenchmarkDeltaApply/added-to-50000).
	extends := fast && control.Extends(prev.specList, s.Routes)
	var j, at int // prev.specRoutes[j], prev.runs[at]
	const scanAhead = 64
	for i := 0; i < len(s.Routes); i++ {
		r := s.Routes[i]
		yield()
		if fast && j < prev.specRoutes.len() {
			if prev.specRoutes.at(j) != r {
				if prev.specRoutes.at(j).ID == r.ID {
					j++ // replaced: r is built below
				} else {
					for k := j + 1; k < min(j+scanAhead, prev.specRoutes.len()); k++ {
						if prev.specRoutes.at(k) == r {
							j = k // the ones between deleted
							break
						}
					}
				}
			}
			if j < prev.specRoutes.len() && prev.specRoutes.at(j) == r {
				for at < len(prev.runs) && int(prev.runs[at].spec+prev.runs[at].n) <= j {
					at++
				}
				if at < len(prev.runs) && int(prev.runs[at].spec) <= j {
					run := prev.runs[at]
					off := j - int(run.spec)
					m := int(run.route) + off
					if prev.routes.at(m).from.route == r {
						lim := min(int(run.n)-off, len(s.Routes)-i)
						k := lim // i == j < len(prev.specList): s.Routes[:len(prev.specList)] is prev's list
						if !extends || i != j {
							k = 1 + samePointers(&prev.specRoutes, j+1, s.Routes[i+1:i+lim])
						}
						ri := routes.out.n
						routes.addFrom(&prev.routes, m, k)
						specRoutes.addFrom(&prev.specRoutes, j, k)
						taken = addTaken(taken, ri, m, k)
						snap.runs = append(snap.runs, takeRun{int32(i), int32(ri), int32(k)})
						if byRoute == nil {
							next = m + k
						}
						i, j = i+k-1, j+k
						continue
					}
				}
				j++
			}
		}
		specRoutes.add(r)
		held = held[:0]
		if !r.Enabled() {
			continue
		}
		pi := -1 // prev's route built from r
		if reuseRoutes {
			pi = prevIndex(r)
		}
		if pi >= 0 && sameRefs {
			// The same route object over the same upstreams and
			// services: the same route.from, as prev found it.
			if pr := prev.routes.at(pi); pr.from.route == r && !pr.renew && pr.about.splits == nil {
				snap.runs = addRun(snap.runs, i, routes.out.n)
				taken = addTaken(taken, routes.out.n, pi, 1)
				routes.add(pr)
				continue
			}
		}
		id := r.ID.String()
		var svc *spec.Service
		if !r.ServiceID.IsZero() {
			svc = svcs[r.ServiceID.String()]
			if svc == nil {
				return nil, fmt.Errorf("route %s: service_id %s not found", id, r.ServiceID.String())
			}
		}
		var su *spec.Upstream
		switch {
		case r.Upstream != nil:
			su = r.Upstream
		case !r.UpstreamID.IsZero():
			su = ups[r.UpstreamID.String()]
			if su == nil {
				return nil, fmt.Errorf("route %s: upstream_id %s not found", id, r.UpstreamID.String())
			}
		case svc != nil && svc.Upstream != nil:
			su = svc.Upstream
		case svc != nil && !svc.UpstreamID.IsZero():
			su = ups[svc.UpstreamID.String()]
			if su == nil {
				return nil, fmt.Errorf("service %s: upstream_id %s not found", svc.ID.String(), svc.UpstreamID.String())
			}
		}
		from := routeFrom{r, svc, su}
		if reuseRoutes {
			if pi >= 0 {
				if pr := prev.routes.at(pi); pr.from == from && !pr.renew && pr.about.splits == nil {
					// The same compiled upstream, counted in prev's
					// bookkeeping, which this build took over.
					snap.runs = addRun(snap.runs, i, routes.out.n)
					taken = addTaken(taken, routes.out.n, pi, 1)
					routes.add(pr)
					continue
				}
			}
		}
		// The route's plugins over its plugin_config's over its
		// service's, built in execution order. A plugin the gateway does
		// not have refuses the configuration rather than serving the
		// route without it.
		rare := r.Rare()
		var pcPlugins, svcPlugins map[string]json.RawMessage
		if !rare.PluginConfigID.IsZero() {
			var ok bool
			if pcPlugins, ok = pluginConfigs[rare.PluginConfigID.String()]; !ok {
				return nil, fmt.Errorf("route %s: plugin_config_id %s not found", id, rare.PluginConfigID.String())
			}
		}
		if svc != nil {
			svcPlugins = svc.Plugins
		}
		// A route decoded by a worker keeps its plugins as a list
		// (spec.Route.CompactPlugins), built as it is when it is the
		// only layer; conf, the layers merged, is made where needed.
		var conf map[string]json.RawMessage
		var phases plugins.Phases
		var err error
		se.take()
		routeShared = routeShared[:0]
		if r.PluginList != nil && len(pcPlugins) == 0 && len(svcPlugins) == 0 {
			phases, err = ps.reg.BuildPhasesList(r.PluginList, ps.env, checked, share)
		} else {
			own := r.Plugins
			if r.PluginList != nil {
				own = r.PluginList.Map()
			}
			conf = mergePlugins(own, pcPlugins, svcPlugins)
			phases, err = ps.reg.BuildPhasesShared(conf, ps.env, checked, share)
		}
		if err != nil {
			if errors.Is(err, plugins.ErrReference) {
				snap.refused = append(snap.refused, fmt.Errorf("route %s: %w", id, err))
				continue
			}
			return nil, fmt.Errorf("route %s: %w", id, err)
		}
		var byConsumer map[*plugins.Consumer]*consumerPhases
		if cons != nil && (authGlobal || hasAuth(ps.reg, phases.Plugins)) {
			if conf == nil {
				conf = r.PluginList.Map()
			}
			if byConsumer, err = consumerVariants(consumers, conf, phases.Plugins, ps, checked); err != nil {
				if errors.Is(err, plugins.ErrReference) {
					snap.refused = append(snap.refused, fmt.Errorf("route %s: %w", id, err))
					continue
				}
				return nil, fmt.Errorf("route %s: %w", id, err)
			}
		}
		var rt *route
		if len(slab) > 0 {
			rt, slab = &slab[0], slab[1:]
		} else {
			rt = new(route)
		}
		*rt = route{plugins: phases, about: noAbout}
		about := routeAbout{name: nilIfEmpty(r.Name), byConsumer: byConsumer}
		rt.websocket = websocketOf(r, svc)
		about.hosts = byteStrings(r.Host, r.Hosts)
		if svc != nil {
			about.serviceID, about.serviceName = []byte(r.ServiceID.String()), nilIfEmpty(svc.Name)
			if r.Host == "" && len(r.Hosts) == 0 {
				about.hosts = byteStrings("", svc.Hosts)
			}
		}
		if about.name != nil || about.serviceID != nil || about.serviceName != nil || about.byConsumer != nil || about.hosts != nil {
			rt.about = new(routeAbout)
			*rt.about = about
		}
		if su != nil {
			cu, err := upFor(su)
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", id, err)
			}
			rt.up, rt.renew = cu, namesSSL(cu)
			rt.to = &cu.to
		}
		if t := rare.Timeout; t != nil {
			rt.to = &timeouts{seconds(t.Connect), seconds(t.Send), seconds(t.Read)}
		}
		if rt.to == nil || rt.to.connect == 0 {
			rt.to = &defaultTimeouts
		}

		hosts := r.AllHosts()
		if len(hosts) == 0 && svc != nil {
			hosts = svc.Hosts
		}
		in := routeIn{
			URIs:     r.AllURIs(),
			Priority: r.EffectivePriority(),
		}
		for _, m := range r.Methods {
			in.Methods |= router.ParseMethod([]byte(m))
		}
		for _, h := range hosts {
			in.Hosts = append(in.Hosts, strings.ToLower(h))
		}
		for _, a := range r.AllRemoteAddrs() {
			p, ok := spec.ParseIPOrCIDR(a)
			if !ok {
				return nil, fmt.Errorf("route %s: remote_addrs: invalid IP address or CIDR %q", id, a)
			}
			in.RemoteAddrs = append(in.RemoteAddrs, p)
		}
		if len(rare.Vars) > 0 {
			e, err := router.CompileVars(rare.Vars)
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", id, err)
			}
			in.Vars = e
		}
		rt.from, rt.in = from, in
		if m := splitRoutes(rt, rare.Timeout != nil, globalSplits, se.take()); m != nil {
			if rt.about == noAbout {
				rt.about = new(routeAbout)
			}
			rt.about.splits = m
			for _, v := range m {
				v.about = rt.about
			}
		}
		if !rt.renew && rt.about.splits == nil {
			snap.runs = addRun(snap.runs, i, routes.out.n)
		}
		if reuseRoutes {
			taken = addTaken(taken, routes.out.n, -1, 1)
		}
		routes.add(rt)
		hold()
		for _, inst := range routeShared {
			r, _ := snap.instanceRefs.get(inst)
			r.refs++
			snap.instanceRefs.set(inst, r)
		}
	}
	snap.routes, snap.specRoutes, snap.specList = routes.done(), specRoutes.done(), s.Routes
	var dropped []int32
	if incremental {
		dropped = droppedOf(prev.routes.len(), taken)
		snap.dropRoutes(prev, dropped)
	}
	snap.unheld(added)
	for _, inst := range sharedAdded {
		if r, ok := snap.instanceRefs.get(inst); ok && r.refs <= 0 {
			snap.instances.del(r.key)
			snap.instanceRefs.del(inst)
		}
	}
	if reuseRoutes && prev.router != nil && prev.router.Mode() == mode {
		ok, err := snap.updateRouter(prev, taken, dropped)
		if err != nil {
			return nil, err
		}
		if ok {
			return snap, nil
		}
	}
	// From scratch: route i in slot i, Orders orderGap apart.
	rts := getRouteInputs(snap.routes.len())
	defer putRouteInputs(rts)
	var place chunkBuilder[routePlace]
	place.grow(snap.routes.len())
	for i, rt := range snap.routes.all {
		in := rt.in.at(i, uint64(i+1)*orderGap)
		place.add(routePlace{slot: int32(i), order: in.Order})
		*rts = append(*rts, in)
	}
	snap.place = place.done()
	rr, err := router.Build(*rts, mode)
	if err != nil {
		return nil, err
	}
	snap.router, snap.slots = rr, snap.routes
	return snap, nil
}

// dropRoutes counts out of snap's upstreams (compile's incremental
// bookkeeping) the routes of prev that snap did not take over (dropped,
// their indexes in prev.routes: droppedOf): each held its own upstream and those of its variants
// that are prev's upstream objects (by upstream_id: an inline one of a
// plugin's configuration is in inline, counted anew). An upstream whose
// last route it was leaves, with its nodes.
func (snap *Snapshot) dropRoutes(prev *Snapshot, dropped []int32) {
	var gone []*spec.Upstream
	for _, j := range dropped {
		rt := prev.routes.at(int(j))
		gone = gone[:0]
		if rt.up != nil {
			gone = append(gone, rt.from.up)
		}
		for cu := range rt.about.splits {
			if u := cu.src; u != nil && !slices.Contains(gone, u) {
				if p, _ := prev.upstreams.get(u); p.cu == cu {
					gone = append(gone, u)
				}
			}
		}
		for _, u := range gone {
			r, ok := snap.upstreams.get(u)
			if !ok {
				continue
			}
			if r.refs--; r.refs > 0 {
				snap.upstreams.set(u, r)
				continue
			}
			snap.upstreams.del(u)
			dropNodes(snap.nodes, r.cu)
		}
		for _, c := range rt.plugins.Plugins {
			if !snap.reg.Shares(c.Name) {
				continue // its instance may not be comparable
			}
			r, ok := snap.instanceRefs.get(c.Instance)
			if !ok {
				continue // built with a reference: its own
			}
			if r.refs--; r.refs > 0 {
				snap.instanceRefs.set(c.Instance, r)
				continue
			}
			snap.instances.del(r.key)
			snap.instanceRefs.del(c.Instance)
		}
	}
}

// unheld takes out of snap's upstreams those of added (compiled by this
// build) that no route kept holds: a refused route's.
func (snap *Snapshot) unheld(added []*spec.Upstream) {
	for _, u := range added {
		if r, ok := snap.upstreams.get(u); ok && r.refs <= 0 {
			snap.upstreams.del(u)
			dropNodes(snap.nodes, r.cu)
		}
	}
}

// updateRouter makes snap's router from prev's (router.Router.Update):
// the routes of prev that snap does not take over (dropped, as
// droppedOf lists them from taken, compile's runs of prev's index of
// each route taken over, -1 for those built) are taken out, the routes
// built for snap put in, each of the others kept in its slot with its
// Order. ok is false, and snap left for a build from scratch, when that
// would not pay or cannot keep the Spec's order: the routes taken over
// are not in prev's order (a route's creation time changed), there is
// no room between two Orders for the routes created between them, the
// changes are many, or half the slots are holes.
//
// The places and slots are derived from prev's (chunked), so that a
// change copies the chunks of them it writes: 0.8 MB of places and
// 0.4 MB of slots a build at 50 000 routes when they were copied whole.
func (snap *Snapshot) updateRouter(prev *Snapshot, taken []takenRun, dropped []int32) (ok bool, err error) {
	nKept, n := 0, 0
	for _, t := range taken {
		if n += int(t.n); t.from >= 0 {
			nKept += int(t.n)
		}
	}
	if prev.place.len() != prev.routes.len() || n != snap.routes.len() {
		return false, nil
	}
	added, removed := n-nKept, len(dropped)
	if added+removed > max(64, n/8) {
		return false, nil
	}
	// Slots: the routes built take those of the routes gone, then the
	// holes prev left, then new ones at the end.
	slots := prev.slots.derive()
	free := make([]int32, 0, removed+len(prev.free))
	remove := make([]router.Route, 0, removed)
	for _, j := range dropped {
		p := prev.place.at(int(j))
		in := prev.routes.at(int(j)).in.at(int(p.slot), p.order)
		remove = append(remove, in)
		slots.set(in.Index, nil)
		free = append(free, int32(in.Index))
	}
	free = append(free, prev.free...)
	// Orders: each route taken over keeps its own, which must grow along
	// snap.routes; each run of routes built between two of them takes
	// Orders evenly spread between theirs (after the last one, orderGap
	// apart). A run taken over grows along prev's, which the routes had
	// in its order too.
	place := chunkBuilder[routePlace]{prev: &prev.place}
	place.grow(n)
	add := make([]router.Route, 0, added)
	last := uint64(0)
	for ti, t := range taken {
		if t.from >= 0 {
			if prev.place.at(int(t.from)).order <= last {
				return false, nil
			}
			place.addFrom(&prev.place, int(t.from), int(t.n))
			last = prev.place.at(int(t.from + t.n - 1)).order
			continue
		}
		step := uint64(orderGap)
		if ti+1 < len(taken) {
			hi := prev.place.at(int(taken[ti+1].from)).order
			if hi <= last || (hi-last)/uint64(t.n+1) == 0 {
				return false, nil
			}
			step = (hi - last) / uint64(t.n+1)
		}
		for i := int(t.at); i < int(t.at+t.n); i++ {
			last += step
			p := routePlace{order: last}
			rt := snap.routes.at(i)
			if k := len(free); k > 0 {
				p.slot, free = free[k-1], free[:k-1]
				slots.set(int(p.slot), rt)
			} else {
				p.slot = int32(slots.len())
				slots.add(rt)
			}
			place.add(p)
			add = append(add, rt.in.at(int(p.slot), p.order))
		}
	}
	if len(free) > 1024 && len(free) > slots.len()/2 {
		return false, nil
	}
	rr, err := prev.router.Update(remove, add)
	if err != nil {
		return false, err
	}
	snap.router, snap.slots, snap.place, snap.free = rr, slots.out, place.done(), free
	return true, nil
}

// mergePlugins merges "plugins" objects, the first one's keys winning:
// a route's own over its plugin_config's (APISIX's plugin_config.merge)
// over its service's (merge_service_route). A plugin is taken whole from
// the layer that has it, never merged field by field.
func mergePlugins(layers ...map[string]json.RawMessage) map[string]json.RawMessage {
	var only map[string]json.RawMessage
	n := 0
	for _, l := range layers {
		if len(l) > 0 {
			only = l
			n++
		}
	}
	if n <= 1 {
		return only
	}
	out := map[string]json.RawMessage{}
	for i := len(layers) - 1; i >= 0; i-- {
		for k, v := range layers[i] {
			out[k] = v
		}
	}
	return out
}

// mergeGlobals puts the global rules' plugins in one set in execution
// order; a plugin configured by two rules is left out, as APISIX's
// merge_global_rules leaves it (and logs it). nil when there is none.
func mergeGlobals(rules []plugins.Phases) *plugins.Phases {
	seen := map[string]int{}
	for _, r := range rules {
		for _, c := range r.Plugins {
			seen[c.Name]++
		}
	}
	var all []plugins.Configured
	for _, r := range rules {
		for _, c := range r.Plugins {
			if seen[c.Name] == 1 {
				all = append(all, c)
			}
		}
	}
	if len(all) == 0 {
		return nil
	}
	sort.SliceStable(all, func(i, j int) bool {
		if all[i].Priority != all[j].Priority {
			return all[i].Priority > all[j].Priority
		}
		return all[i].Name < all[j].Name
	})
	ph := plugins.NewPhases(all)
	return &ph
}

// isAuth reports whether the plugin name is an authentication plugin: one
// that finds consumers by a credential (plugins.CredentialPlugin).
func isAuth(reg *plugins.Registry, name string) bool {
	_, p, ok := reg.Lookup(name)
	if !ok {
		return false
	}
	_, ok = p.(plugins.CredentialPlugin)
	return ok
}

func hasAuth(reg *plugins.Registry, cs []plugins.Configured) bool {
	for _, c := range cs {
		if isAuth(reg, c.Name) {
			return true
		}
	}
	return false
}

// indexConsumers decodes the Spec's consumers and credentials and indexes
// them (Registry.IndexConsumers); nil when there are none. The consumers
// indexed are returned too, in the Spec's order: those it left out
// (ConsumerIndex.Refused) are not. Each carries its group's plugins
// (Consumer.GroupPlugins), which identify no one.
func indexConsumers(s *spec.Spec, reg *plugins.Registry, checked bool) (*plugins.ConsumerIndex, []*plugins.Consumer, error) {
	if len(s.Consumers) == 0 {
		return nil, nil, nil
	}
	groups := make(map[string]map[string]json.RawMessage, len(s.ConsumerGroups))
	for _, g := range s.ConsumerGroups {
		groups[g.ID.String()] = g.Plugins
	}
	cs := make([]*plugins.Consumer, 0, len(s.Consumers))
	for _, c := range s.Consumers {
		pc := &plugins.Consumer{Username: c.Username, Plugins: c.Plugins, CustomID: c.Labels["custom_id"]}
		if !c.GroupID.IsZero() {
			// spec.Check refuses a group_id that names no group.
			pc.GroupID = c.GroupID.String()
			pc.GroupPlugins = groups[pc.GroupID]
		}
		cs = append(cs, pc)
	}
	var creds []plugins.Credential
	for _, raw := range s.Credentials {
		var v struct {
			ID      string                     `json:"id"`
			Plugins map[string]json.RawMessage `json:"plugins"`
		}
		if err := json.Unmarshal(raw, &v); err != nil {
			return nil, nil, fmt.Errorf("credential: %w", err)
		}
		user, id, ok := spec.CredentialOwner(v.ID)
		if !ok {
			return nil, nil, fmt.Errorf("credential %q: the id is not <username>/credentials/<id>", v.ID)
		}
		creds = append(creds, plugins.Credential{Username: user, ID: id, Plugins: v.Plugins})
	}
	x, err := reg.IndexConsumersChecked(cs, creds, checked)
	if err != nil {
		return nil, nil, fmt.Errorf("consumers: %w", err)
	}
	// Those IndexConsumers left out are no route's consumer variants.
	kept := cs[:0]
	for _, c := range cs {
		if x.ByName(c.Username) == c {
			kept = append(kept, c)
		}
	}
	return x, kept, nil
}

// consumerVariants builds a route's plugins (conf, merged from its layers)
// merged with each consumer's whose plugins, authentication plugins
// aside, or whose group's (under its own) are not empty. They are built
// with the snapshot, so that a request that attaches a consumer builds
// nothing: the cost is one build per route that can attach a consumer and
// per consumer with plugins of its own or of its group. checked: as Compile says; a consumer's configuration of a plugin
// with a consumer schema was checked against that schema only, and is
// checked again here as a route's.
//
// A plugin of the route (base, its built plugins) that the consumer and
// its group leave as the route has it, and that has a rewrite phase,
// keeps the route's instance in the variant: its rewrite phase ran on
// that instance before the consumer was attached, and what it kept for
// its later phases (Ctx.Keep, owned by the instance: request-id's id,
// opentelemetry's span) is found there.
func consumerVariants(consumers []*plugins.Consumer, conf map[string]json.RawMessage, base []plugins.Configured, ps pluginSet, checked bool) (map[*plugins.Consumer]*consumerPhases, error) {
	rewrote := make(map[string]plugins.Instance, len(base))
	for _, cf := range base {
		if _, ok := cf.Instance.(plugins.RewritePhase); ok {
			rewrote[cf.Name] = cf.Instance
		}
	}
	var out map[*plugins.Consumer]*consumerPhases
	for _, c := range consumers {
		var own []string
		trusted := checked
		for name := range c.Plugins {
			if !isAuth(ps.reg, name) {
				own = append(own, name)
				if _, p, _ := ps.reg.Lookup(name); p != nil {
					_, cs := p.(plugins.ConsumerSchemaPlugin)
					trusted = trusted && !cs
				}
			}
		}
		// The group's, under the consumer's own; checked as a route's.
		var fromGroup []string
		for name := range c.GroupPlugins {
			if _, mine := c.Plugins[name]; !mine && !isAuth(ps.reg, name) {
				fromGroup = append(fromGroup, name)
			}
		}
		if len(own) == 0 && len(fromGroup) == 0 {
			continue
		}
		merged := make(map[string]json.RawMessage, len(conf)+len(own)+len(fromGroup))
		for k, v := range conf {
			merged[k] = v
		}
		added := map[string]bool{}
		for _, name := range fromGroup {
			if _, onRoute := conf[name]; !onRoute {
				added[name] = true
			}
			merged[name] = c.GroupPlugins[name]
		}
		for _, name := range own {
			if _, onRoute := conf[name]; !onRoute {
				added[name] = true
			}
			merged[name] = c.Plugins[name]
		}
		ph, err := ps.reg.BuildPhasesChecked(merged, ps.env, trusted)
		if err != nil {
			return nil, fmt.Errorf("consumer %s: %w", c.Username, err)
		}
		if kept := keepRewritten(ph.Plugins, rewrote, c); kept != nil {
			ph = plugins.NewPhases(kept)
		}
		cp := &consumerPhases{phases: ph}
		for _, cf := range ph.Plugins {
			if i, ok := cf.Instance.(plugins.RewritePhase); ok && added[cf.Name] {
				cp.fresh = append(cp.fresh, i)
			}
		}
		if out == nil {
			out = map[*plugins.Consumer]*consumerPhases{}
		}
		out[c] = cp
	}
	return out, nil
}

// keepRewritten is built (a consumer variant's plugins) with the route's
// instances (rewrote, by name) of the plugins c and its group do not
// configure; nil when there are none.
func keepRewritten(built []plugins.Configured, rewrote map[string]plugins.Instance, c *plugins.Consumer) []plugins.Configured {
	var out []plugins.Configured
	for i, cf := range built {
		x, ok := rewrote[cf.Name]
		if !ok {
			continue
		}
		if _, own := c.Plugins[cf.Name]; own {
			continue
		}
		if _, group := c.GroupPlugins[cf.Name]; group {
			continue
		}
		if out == nil {
			out = slices.Clone(built)
		}
		out[i].Instance = x
	}
	return out
}

// namesSSL reports whether cu's TLS takes its client certificate from an
// ssl object (tls.client_cert_id), which a configuration may change
// without changing the upstream: such a route is built again each time.
func namesSSL(cu *upstream) bool {
	// Nor is one whose nodes come from discovery.
	return cu != nil && (cu.tls != nil && cu.tls.certID != "" || cu.disc)
}

// upstreamEnv is what compiling an upstream takes from the worker: the
// keep-alive pools' settings, and the keyring's decryption of a
// tls.client_key stored encrypted (nil: keys as stored).
type upstreamEnv struct {
	ka      Keepalive
	decrypt func(field, s string) (string, error)
	// ssl finds an ssl object of the Spec by id (tls.client_cert_id);
	// compile sets it.
	ssl func(id string) *spec.SSL
	// resolve reads a $env:// or $secret:// reference of that object's
	// cert and key (plugins.Registry.Resolve); compile sets it.
	resolve func(s string) (string, bool, error)
	// health is the node's health region (nil: none) and checked the
	// names of the Spec's upstreams with checks, made at its first call
	// (a build that compiles no upstream with checks reads no list of the
	// Spec for them); compile sets checked.
	health  *shm.Health
	checked func() map[*spec.Upstream]string
	// dns resolves the nodes given by host name; nil: they are dialed
	// off the loop, resolved at each dial.
	dns *resolver
	// disc finds the nodes of discovery_type dns; nil: none.
	disc *resolver
}

// dnsNames is the set of host names whose addresses the snapshot's nodes
// take from the resolver.
func (s *Snapshot) dnsNames() map[*dnsName]bool {
	used := map[*dnsName]bool{}
	for _, r := range s.upstreams.all {
		for _, nd := range r.cu.nodes {
			if nd.dns != nil {
				used[nd.dns] = true
			}
		}
	}
	return used
}

// dnsServices is the set of discovery_type dns service_names whose nodes
// the snapshot's upstreams take.
func (s *Snapshot) dnsServices() map[*dnsService]bool {
	used := map[*dnsService]bool{}
	for _, r := range s.upstreams.all {
		if r.cu.service != nil {
			used[r.cu.service] = true
		}
	}
	return used
}

func compileUpstream(u *spec.Upstream, ue upstreamEnv) (*upstream, error) {
	ka, ex := ue.ka, u.Rare()
	scheme := ex.Scheme
	if scheme == "" {
		scheme = "http"
	}
	if scheme != "http" && scheme != "https" {
		return nil, fmt.Errorf("upstream scheme %q is not supported yet", scheme)
	}
	cu := &upstream{
		src:     u,
		retries: int32(min(u.EffectiveRetries(), math.MaxInt32)),
		to:      defaultTimeouts,
	}
	if ex.RetryTimeout != nil {
		cu.retryTimeout = seconds(*ex.RetryTimeout)
	}
	if t := ex.Timeout; t != nil {
		cu.to = timeouts{seconds(t.Connect), seconds(t.Send), seconds(t.Read)}
	}
	switch ex.PassHost {
	case "", "pass":
		cu.passHost = passHostPass
	case "node":
		cu.passHost = passHostNode
	case "rewrite":
		cu.passHost = passHostRewrite
		cu.upstreamHost = ex.UpstreamHost
	default:
		return nil, fmt.Errorf("pass_host %q is not supported", ex.PassHost)
	}
	if scheme == "https" {
		t, err := compileUpstreamTLS(u, ue)
		if err != nil {
			return nil, err
		}
		cu.tls = t
	}
	cu.kaSize, cu.kaIdle, cu.kaRequests = u.EffectiveKeepalive()
	if ex.KeepalivePool == nil {
		if ka.Size > 0 {
			cu.kaSize = ka.Size
		}
		if ka.Idle > 0 {
			cu.kaIdle = ka.Idle
		}
		if ka.Requests > 0 {
			cu.kaRequests = ka.Requests
		}
	}
	list := u.Nodes.List
	if ex.DiscoveryType == "dns" {
		list, cu.service = discoveredNodes(u, ue)
		cu.disc = true
	}
	for _, n := range list {
		nd := &node{addr: n.Addr(scheme), weight: n.Weight, priority: n.Priority}
		nd.key = nd.addr
		if cu.tls != nil {
			nd.key = "https#" + nd.addr + "#" + cu.tls.ident
		}
		if ap, err := netip.ParseAddrPort(nd.addr); err == nil {
			nd.ap = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port())
		} else if ue.dns != nil {
			nd.dns, nd.dnsPort = ue.dns.name(n.Host), uint16(n.Port)
		}
		host, hasPort := n.Host, n.Port != 0 && n.Port != spec.DefaultPort(scheme)
		switch {
		case hasPort && strings.IndexByte(host, ':') < 0 && !strings.HasPrefix(host, "["):
			// host:port, an IPv4 address or a name with its port, is
			// addr's text (net.JoinHostPort): it shares addr's bytes
			// rather than being joined again, two allocations (the
			// port's text and the join, 16-24 bytes) a node less at
			// 20 000 one-node upstreams.
			host = nd.addr
		default:
			if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
				host = "[" + host + "]"
			}
			if hasPort {
				host += ":" + strconv.Itoa(n.Port)
			}
		}
		nd.hostHeader = host
		cu.nodes = append(cu.nodes, nd)
	}
	if err := ue.attachHealth(u, cu); err != nil {
		return nil, err
	}
	b, err := newUpstreamBalancer(u, cu.nodes)
	if err != nil {
		return nil, err
	}
	cu.bal = b
	return cu, nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }

// byteStrings is one and many as byte slices, the empty ones left out:
// views of the strings' bytes (viewBytes), read-only, not copies.
func byteStrings(one string, many []string) [][]byte {
	var out [][]byte
	if one != "" {
		out = make([][]byte, 0, 1+len(many))
		out = append(out, viewBytes(one))
	}
	for _, s := range many {
		if s != "" {
			out = append(out, viewBytes(s))
		}
	}
	return out
}

// routeIndexes are the maps of prev's routes by object that compile's
// prevIndex makes when a route was created or moved among others, reused:
// a route created in the middle of 50 000 made a map of 1.2 MB and
// dropped it (BenchmarkCompileChange/delete-one-of-50000, whose every
// other build creates one). An emptied map keeps its room, and no route.
var routeIndexes sync.Pool

// routeInputs are the router's input arrays of the builds, reused: the
// router keeps nothing of them (router.Build), and one of 5 000 routes is
// about 600 kB, which every build of a bulk load allocated and dropped.
var routeInputs sync.Pool

// getRouteInputs returns an empty array for n routes' router inputs.
func getRouteInputs(n int) *[]router.Route {
	if p, ok := routeInputs.Get().(*[]router.Route); ok && cap(*p) >= n {
		return p
	}
	// Room to grow: during a bulk load every build has more routes than
	// the one before, and one sized exactly would fit none after it.
	a := make([]router.Route, 0, n+n/4)
	return &a
}

// putRouteInputs empties *p, so that it keeps no configuration alive,
// and gives it back.
func putRouteInputs(p *[]router.Route) {
	clear(*p)
	*p = (*p)[:0]
	routeInputs.Put(p)
}
