package worker

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"coregate/admin/spec"
	"coregate/plugins"
	"coregate/worker/router"
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
	routes []*route
	nodes  map[string]struct{} // dial addresses of every node
	// globals are the global rules' plugins, one set per rule in the
	// Spec's order (APISIX runs them before a route's own). Built by
	// compile; the request path does not run plugins yet.
	globals []plugins.Phases
}

// hasNode reports whether a node with dial address addr is in the snapshot.
func (s *Snapshot) hasNode(addr string) bool {
	_, ok := s.nodes[addr]
	return ok
}

type route struct {
	id string
	up *upstream // nil: the route has no upstream (answered 503)
	// timeouts override the upstream's when the route sets them.
	connectTO, sendTO, readTO time.Duration
	// plugins are the route's plugins in their phase tables: its own
	// over its plugin_config's over its service's (mergePlugins), built
	// once for this snapshot.
	plugins plugins.Phases
}

const (
	passHostPass = iota
	passHostNode
	passHostRewrite
)

type upstream struct {
	bal          *balancer
	nodes        []*node
	retries      int
	retryTimeout time.Duration
	connectTO    time.Duration
	sendTO       time.Duration
	readTO       time.Duration
	passHost     uint8
	upstreamHost []byte
	kaSize       int
	kaIdle       time.Duration
	kaRequests   int
}

// node is one upstream server of one upstream.
type node struct {
	addr       string // dial address host:port
	hostHeader []byte // Host sent with pass_host=node
	weight     int
	priority   int
	// pool is resolved on the event loop on first use (loop-owned cache).
	pool *pool
}

// Default proxy timeouts when neither route nor upstream sets them: nginx's
// proxy_connect_timeout / proxy_send_timeout / proxy_read_timeout.
const (
	defaultConnectTimeout = 60 * time.Second
	defaultSendTimeout    = 60 * time.Second
	defaultReadTimeout    = 60 * time.Second
)

// Compile turns a validated Spec into a Snapshot. It runs off the event loop
// and allocates freely; an error leaves the caller's current snapshot alone.
func Compile(s *spec.Spec, mode router.Mode) (*Snapshot, error) {
	return compile(s, mode, Keepalive{}, pluginSet{})
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

func compile(s *spec.Spec, mode router.Mode, ka Keepalive, ps pluginSet) (*Snapshot, error) {
	if ps.reg == nil {
		ps.reg = plugins.Default
	}
	if ps.env == (plugins.Env{}) {
		ps.env = plugins.NewLocalEnv()
	}
	snap := &Snapshot{nodes: map[string]struct{}{}}
	pluginConfigs := make(map[string]map[string]json.RawMessage, len(s.PluginConfigs))
	for _, raw := range s.PluginConfigs {
		pc, err := decodePluginSet(raw)
		if err != nil {
			return nil, fmt.Errorf("plugin_config: %w", err)
		}
		pluginConfigs[pc.id] = pc.plugins
	}
	for _, raw := range s.GlobalRules {
		gr, err := decodePluginSet(raw)
		if err != nil {
			return nil, fmt.Errorf("global_rule: %w", err)
		}
		ph, err := ps.reg.BuildPhases(gr.plugins, ps.env)
		if err != nil {
			return nil, fmt.Errorf("global_rule %s: %w", gr.id, err)
		}
		snap.globals = append(snap.globals, ph)
	}
	ups := map[string]*spec.Upstream{}
	for _, u := range s.Upstreams {
		ups[u.ID.String()] = u
	}
	svcs := map[string]*spec.Service{}
	for _, sv := range s.Services {
		svcs[sv.ID.String()] = sv
	}
	compiled := map[*spec.Upstream]*upstream{}
	upFor := func(u *spec.Upstream) (*upstream, error) {
		if cu, ok := compiled[u]; ok {
			return cu, nil
		}
		cu, err := compileUpstream(u, ka)
		if err != nil {
			return nil, err
		}
		compiled[u] = cu
		for _, nd := range cu.nodes {
			snap.nodes[nd.addr] = struct{}{}
		}
		return cu, nil
	}

	var rts []router.Route
	for _, r := range s.Routes {
		if !r.Enabled() {
			continue
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
		// The route's plugins over its plugin_config's over its
		// service's, built in execution order. A plugin the gateway does
		// not have refuses the configuration rather than serving the
		// route without it.
		var pcPlugins, svcPlugins map[string]json.RawMessage
		if !r.PluginConfigID.IsZero() {
			var ok bool
			if pcPlugins, ok = pluginConfigs[r.PluginConfigID.String()]; !ok {
				return nil, fmt.Errorf("route %s: plugin_config_id %s not found", id, r.PluginConfigID.String())
			}
		}
		if svc != nil {
			svcPlugins = svc.Plugins
		}
		phases, err := ps.reg.BuildPhases(mergePlugins(r.Plugins, pcPlugins, svcPlugins), ps.env)
		if err != nil {
			return nil, fmt.Errorf("route %s: %w", id, err)
		}
		rt := &route{id: id, plugins: phases}
		if su != nil {
			cu, err := upFor(su)
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", id, err)
			}
			rt.up = cu
			rt.connectTO, rt.sendTO, rt.readTO = cu.connectTO, cu.sendTO, cu.readTO
		}
		if t := r.Timeout; t != nil {
			rt.connectTO, rt.sendTO, rt.readTO = seconds(t.Connect), seconds(t.Send), seconds(t.Read)
		}
		if rt.connectTO == 0 {
			rt.connectTO, rt.sendTO, rt.readTO = defaultConnectTimeout, defaultSendTimeout, defaultReadTimeout
		}

		hosts := r.AllHosts()
		if len(hosts) == 0 && svc != nil {
			hosts = svc.Hosts
		}
		in := router.Route{
			Index:    len(snap.routes),
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
		if len(r.Vars) > 0 {
			e, err := router.CompileVars(r.Vars)
			if err != nil {
				return nil, fmt.Errorf("route %s: %w", id, err)
			}
			in.Vars = e
		}
		snap.routes = append(snap.routes, rt)
		rts = append(rts, in)
	}
	rr, err := router.Build(rts, mode)
	if err != nil {
		return nil, err
	}
	snap.router = rr
	return snap, nil
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

// pluginSetJSON is what compile reads of a plugin config or a global rule.
type pluginSetJSON struct {
	id      string
	plugins map[string]json.RawMessage
}

// decodePluginSet reads the id and the plugins of a plugin
// config or a global rule, kept as JSON in the Spec.
func decodePluginSet(raw json.RawMessage) (pluginSetJSON, error) {
	var v struct {
		Plugins map[string]json.RawMessage `json:"plugins"`
	}
	if err := json.Unmarshal(raw, &v); err != nil {
		return pluginSetJSON{}, err
	}
	return pluginSetJSON{id: spec.RawID(raw, "id").String(), plugins: v.Plugins}, nil
}

func compileUpstream(u *spec.Upstream, ka Keepalive) (*upstream, error) {
	scheme := u.Scheme
	if scheme == "" {
		scheme = "http"
	}
	if scheme != "http" {
		return nil, fmt.Errorf("upstream scheme %q is not supported yet", scheme)
	}
	if t := u.Type; t != "" && t != "roundrobin" {
		return nil, fmt.Errorf("upstream type %q is not supported yet", t)
	}
	cu := &upstream{
		retries:   u.EffectiveRetries(),
		connectTO: defaultConnectTimeout,
		sendTO:    defaultSendTimeout,
		readTO:    defaultReadTimeout,
	}
	if u.RetryTimeout != nil {
		cu.retryTimeout = seconds(*u.RetryTimeout)
	}
	if t := u.Timeout; t != nil {
		cu.connectTO, cu.sendTO, cu.readTO = seconds(t.Connect), seconds(t.Send), seconds(t.Read)
	}
	switch u.PassHost {
	case "", "pass":
		cu.passHost = passHostPass
	case "node":
		cu.passHost = passHostNode
	case "rewrite":
		cu.passHost = passHostRewrite
		cu.upstreamHost = []byte(u.UpstreamHost)
	default:
		return nil, fmt.Errorf("pass_host %q is not supported", u.PassHost)
	}
	cu.kaSize, cu.kaIdle, cu.kaRequests = u.EffectiveKeepalive()
	if u.KeepalivePool == nil {
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
	for _, n := range u.Nodes.List {
		nd := &node{addr: n.Addr(scheme), weight: n.Weight, priority: n.Priority}
		host := n.Host
		if strings.IndexByte(host, ':') >= 0 && !strings.HasPrefix(host, "[") {
			host = "[" + host + "]"
		}
		if n.Port != 0 && n.Port != 80 {
			host += ":" + strconv.Itoa(n.Port)
		}
		nd.hostHeader = []byte(host)
		cu.nodes = append(cu.nodes, nd)
	}
	cu.bal = newBalancer(cu.nodes)
	return cu, nil
}

func seconds(f float64) time.Duration { return time.Duration(f * float64(time.Second)) }
