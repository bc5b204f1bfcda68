package spec

import "encoding/json"

// Route is an APISIX v3 route object as stored and as written in apisix.yaml.
// Field names and JSON keys follow apisix/schema_def.lua `_M.route`.
// Optional scalar fields are pointers so that "absent" and "zero" differ:
// the stored object keeps only what the client sent (schema defaults are
// applied when the worker compiles the Spec, never written back).
//
// The fields most routes leave unset are apart, in Extra, allocated only
// when one of them is set: a worker keeps every route of its Spec beside
// the route compiled from it (the next Delta is applied to that Spec), so
// at 50 000 routes each byte of Route is 50 kB of every worker's heap.
// With them in place Route was 448 bytes; without, 256 (both size classes
// of the allocator), and a route that sets one of them takes a 208-byte
// RouteExtra more. Read them with Rare, write them through MakeExtra. The
// JSON form is the same: every key in schema_def.lua's order (routeJSON),
// Extra itself never written.
type Route struct {
	ID         ID                         `json:"id,omitzero"`
	Name       string                     `json:"name,omitempty"`
	URI        string                     `json:"uri,omitempty"`
	Priority   *int                       `json:"priority,omitempty"`
	Methods    []string                   `json:"methods,omitempty"`
	Host       string                     `json:"host,omitempty"`
	Hosts      []string                   `json:"hosts,omitempty"`
	Plugins    map[string]json.RawMessage `json:"plugins,omitzero"`
	Upstream   *Upstream                  `json:"upstream,omitempty"`
	UpstreamID ID                         `json:"upstream_id,omitzero"`
	ServiceID  ID                         `json:"service_id,omitzero"`
	Status     *int                       `json:"status,omitempty"`
	CreateTime int64                      `json:"create_time,omitempty"`
	UpdateTime int64                      `json:"update_time,omitempty"`
	// PluginList is Plugins in the form a worker keeps (CompactPlugins),
	// where Plugins is then nil; never written to JSON.
	PluginList PluginList `json:"-"`
	// Extra holds the fields few routes set; nil when none is.
	Extra *RouteExtra `json:"-"`
}

// RouteExtra is the fields of a Route that few routes set (see Route).
type RouteExtra struct {
	Desc            string            `json:"desc,omitempty"`
	Labels          map[string]string `json:"labels,omitempty"`
	URIs            []string          `json:"uris,omitempty"`
	RemoteAddr      string            `json:"remote_addr,omitempty"`
	RemoteAddrs     []string          `json:"remote_addrs,omitempty"`
	Vars            Vars              `json:"vars,omitempty"`
	FilterFunc      string            `json:"filter_func,omitempty"`
	PluginConfigID  ID                `json:"plugin_config_id,omitzero"`
	Script          string            `json:"script,omitempty"`
	ScriptID        ID                `json:"script_id,omitzero"`
	Timeout         *Timeout          `json:"timeout,omitempty"`
	EnableWebsocket *bool             `json:"enable_websocket,omitempty"`
}

// Rare returns r's rarely set fields: a copy of *r.Extra, the zero
// RouteExtra when it is nil. To change them, MakeExtra.
func (r *Route) Rare() RouteExtra {
	if r.Extra == nil {
		return RouteExtra{}
	}
	return *r.Extra
}

// MakeExtra returns r.Extra, allocated first when it is nil, for setting
// r's rarely set fields. A copy of a Route shares its Extra: give the
// copy a RouteExtra of its own before changing one.
func (r *Route) MakeExtra() *RouteExtra {
	if r.Extra == nil {
		r.Extra = new(RouteExtra)
	}
	return r.Extra
}

// empty reports whether none of e's fields is set (a nil map or slice is
// unset; an empty one written as such is set, as it was decoded).
func (e *RouteExtra) empty() bool {
	return e.Desc == "" && e.Labels == nil && e.URIs == nil && e.RemoteAddr == "" &&
		e.RemoteAddrs == nil && e.Vars == nil && e.FilterFunc == "" && e.PluginConfigID == (ID{}) &&
		e.Script == "" && e.ScriptID == (ID{}) && e.Timeout == nil && e.EnableWebsocket == nil
}

// Service is an APISIX v3 service object: defaults a route inherits.
type Service struct {
	ID              ID                         `json:"id,omitzero"`
	Name            string                     `json:"name,omitempty"`
	Desc            string                     `json:"desc,omitempty"`
	Labels          map[string]string          `json:"labels,omitempty"`
	Plugins         map[string]json.RawMessage `json:"plugins,omitzero"`
	Upstream        *Upstream                  `json:"upstream,omitempty"`
	UpstreamID      ID                         `json:"upstream_id,omitzero"`
	Script          string                     `json:"script,omitempty"`
	EnableWebsocket *bool                      `json:"enable_websocket,omitempty"`
	Hosts           []string                   `json:"hosts,omitempty"`
	CreateTime      int64                      `json:"create_time,omitempty"`
	UpdateTime      int64                      `json:"update_time,omitempty"`
}

// Upstream is an APISIX v3 upstream object (schema_def.lua upstream_schema).
//
// As with Route, the fields most upstreams leave unset are apart, in
// Extra, allocated only when one of them is set: a worker keeps every
// upstream of its Spec (a route's own and the named ones), and an upstream
// of type and nodes alone is the common one (bench admin writes 20 000 of
// them beside 50 000 routes). With them in place Upstream was 352 bytes
// in its size class; without, 96, and an upstream that sets one of them
// takes a 256-byte UpstreamExtra more, 352 in all as before. Read them
// with Rare, write them through MakeExtra. The JSON form is the same:
// every key in schema_def.lua's order (upstreamJSON), Extra itself never
// written.
type Upstream struct {
	ID         ID     `json:"id,omitzero"`
	Type       string `json:"type,omitempty"` // roundrobin (default), chash, ewma, least_conn
	Nodes      Nodes  `json:"nodes,omitzero"`
	CreateTime int64  `json:"create_time,omitempty"`
	UpdateTime int64  `json:"update_time,omitempty"`
	// Extra holds the fields few upstreams set; nil when none is.
	Extra *UpstreamExtra `json:"-"`
}

// UpstreamExtra is the fields of an Upstream that few upstreams set (see
// Upstream).
type UpstreamExtra struct {
	Name          string            `json:"name,omitempty"`
	Desc          string            `json:"desc,omitempty"`
	Labels        map[string]string `json:"labels,omitempty"`
	ServiceName   string            `json:"service_name,omitempty"`
	DiscoveryType string            `json:"discovery_type,omitempty"`
	DiscoveryArgs json.RawMessage   `json:"discovery_args,omitempty"`
	HashOn        string            `json:"hash_on,omitempty"`
	Key           string            `json:"key,omitempty"`
	Retries       *int              `json:"retries,omitempty"`
	RetryTimeout  *float64          `json:"retry_timeout,omitempty"`
	Timeout       *Timeout          `json:"timeout,omitempty"`
	Scheme        string            `json:"scheme,omitempty"`
	PassHost      string            `json:"pass_host,omitempty"` // pass (default), node, rewrite
	UpstreamHost  string            `json:"upstream_host,omitempty"`
	KeepalivePool *KeepalivePool    `json:"keepalive_pool,omitempty"`
	Checks        json.RawMessage   `json:"checks,omitempty"`
	TLS           json.RawMessage   `json:"tls,omitempty"`
}

// Rare returns u's rarely set fields: a copy of *u.Extra, the zero
// UpstreamExtra when it is nil. To change them, MakeExtra.
func (u *Upstream) Rare() UpstreamExtra {
	if u.Extra == nil {
		return UpstreamExtra{}
	}
	return *u.Extra
}

// MakeExtra returns u.Extra, allocated first when it is nil, for setting
// u's rarely set fields. A copy of an Upstream shares its Extra: give the
// copy an UpstreamExtra of its own before changing one.
func (u *Upstream) MakeExtra() *UpstreamExtra {
	if u.Extra == nil {
		u.Extra = new(UpstreamExtra)
	}
	return u.Extra
}

// empty reports whether none of e's fields is set (a nil map or slice is
// unset; an empty one written as such is set, as it was decoded).
func (e *UpstreamExtra) empty() bool {
	return e.Name == "" && e.Desc == "" && e.Labels == nil && e.ServiceName == "" && e.DiscoveryType == "" &&
		e.DiscoveryArgs == nil && e.HashOn == "" && e.Key == "" && e.Retries == nil && e.RetryTimeout == nil &&
		e.Timeout == nil && e.Scheme == "" && e.PassHost == "" && e.UpstreamHost == "" && e.KeepalivePool == nil &&
		e.Checks == nil && e.TLS == nil
}

// Node is one upstream server. Nodes may be written as a map
// {"host:port": weight} or as an array of objects; both decode to []Node.
type Node struct {
	Host     string          `json:"host"`
	Port     int             `json:"port,omitempty"` // 0: the scheme's default (80/443)
	Weight   int             `json:"weight"`
	Priority int             `json:"priority,omitempty"`
	Metadata json.RawMessage `json:"metadata,omitempty"`
}

// Nodes keeps the written form (map or array) so that it is stored back as
// sent; List gives the normalised nodes, in written order (an IPv6 host
// without brackets, Port 0 when none was written). A nil List means no
// nodes were written; an empty one, an empty map or array.
type Nodes struct {
	List  []Node
	IsMap bool
}

// Timeout is APISIX's {connect, send, read} in seconds (fractions allowed).
type Timeout struct {
	Connect float64 `json:"connect"`
	Send    float64 `json:"send"`
	Read    float64 `json:"read"`
}

// KeepalivePool is the upstream keep-alive pool setting. Defaults: size 320,
// idle_timeout 60 s, requests 1000.
type KeepalivePool struct {
	Size        *int     `json:"size,omitempty"`
	IdleTimeout *float64 `json:"idle_timeout,omitempty"`
	Requests    *int     `json:"requests,omitempty"`
}

// Vars is a lua-resty-expr list: [[var, op, val], ...] or with a leading
// "!" negation: [var, "!", op, val]. Val is kept raw (string, number, array).
type Vars []VarExpr

// VarExpr is one [var, op, val] condition.
type VarExpr struct {
	Var    string
	Not    bool
	Op     string // ==, ~=, >, <, >=, <=, ~~, ~*, in, has, ipmatch
	Value  json.RawMessage
	Source json.RawMessage // the expression as written, stored back unchanged
}

// ID is an object id: APISIX accepts a string (1-64 chars of [a-zA-Z0-9-_.])
// or an integer ≥ 1; the written JSON form is kept (Num) and String gives the
// canonical text used for keys and references.
type ID struct {
	Str string
	Num bool // written as a JSON number
}

// Spec is the whole validated configuration a worker compiles: every
// resource keyed by its id. It is plain data, safe to share read-only.
//
// Its lists are never modified once it is built: nothing writes an
// object into one below its length, and nothing appends to one but the
// code that built it, for the next Spec. The configuration store's sync
// (admin/store/storesync), and a worker's Delta decoding
// (worker/control), build a list that begins with all of the last Spec's
// objects in the last one's array, appending past its length, so that
// Specs a few changes apart share an array, each seeing the objects up to
// its own length; the lists they hand on have their capacity cut to
// their length, so that an append to one anywhere else copies it.
// Whoever holds a Spec (a worker's base, the Delta encoder's, the local
// copy's writer) reads its lists as they were built while later Specs
// are built.
//
// Its JSON form (the control protocol's Config frame) is the object
// {"routes":[…],"services":[…],"upstreams":[…],"consumers":[…],
// "plugin_configs":[…],"global_rules":[…],"consumer_groups":[…],"credentials":[…],
// "plugin_metadata":[…],"ssls":[…],"secrets":[…],"hash":"<hex>"}, each object in
// its stored form; see MarshalJSON.
type Spec struct {
	Routes    []*Route    `json:"routes,omitempty"`
	Services  []*Service  `json:"services,omitempty"`
	Upstreams []*Upstream `json:"upstreams,omitempty"`

	// Consumers, PluginConfigs and GlobalRules are decoded and validated
	// as the objects above are (DecodeConsumer, DecodePluginConfig,
	// DecodeGlobalRule); their plugins' configurations are kept as
	// written, for the plugin registry.
	Consumers     []*Consumer     `json:"consumers,omitempty"`
	PluginConfigs []*PluginConfig `json:"plugin_configs,omitempty"`
	GlobalRules   []*GlobalRule   `json:"global_rules,omitempty"`
	// ConsumerGroups are decoded as those above (DecodeConsumerGroup);
	// a consumer takes the plugins of the group its group_id names.
	ConsumerGroups []*ConsumerGroup `json:"consumer_groups,omitempty"`
	// Credentials are the consumers' credential objects, stored at
	// /apisix/consumers/<username>/credentials/<id>, each kept as written
	// with its "id" in the form APISIX's standalone mode gives it:
	// "<username>/credentials/<id>" (CredentialOwner splits it). One whose
	// consumer is missing is kept and ignored, as APISIX ignores it.
	Credentials []json.RawMessage `json:"credentials,omitempty"`
	// PluginMetadata are the plugins' metadata objects, stored at
	// /apisix/plugin_metadata/<plugin>, each kept as written with its
	// plugin's name as "id"; the plugin registry checks them.
	PluginMetadata []json.RawMessage `json:"plugin_metadata,omitempty"`
	// SSLs are the ssl objects (DecodeSSL), of both types, served or not,
	// their private keys as stored (package tlsconf reads them).
	SSLs []*SSL `json:"ssls,omitempty"`
	// Secrets are the secret managers' objects, stored at
	// /apisix/secrets/<manager>/<id>, each kept as stored (its credentials
	// encrypted with apisix.data_encryption's keyring, when it is on) with
	// its "id" "<manager>/<id>", as APISIX stores it: what $secret://
	// references in plugin configurations are read with (package
	// admin/secret).
	Secrets []json.RawMessage `json:"secrets,omitempty"`

	// Hash is the SHA-256 of the canonical JSON of everything above, as set
	// by SetHash; equal hashes mean equal configurations, so a reload that
	// changes nothing can be skipped. The zero value means "not computed".
	// In JSON it is "hash", in hex, absent when zero.
	Hash [32]byte `json:"-"`

	// Checked, when not zero, marks a Spec every plugin configuration of
	// which was checked where it entered the node (the store's sync, the
	// standalone file's loader) by a plugin registry of this fingerprint
	// (plugins.Registry.Fingerprint): a worker whose registry has the same
	// builds them without checking them again (plugins.Registry.Trusts).
	// It is part of neither the JSON form nor Hash: the control protocol
	// carries it beside the Spec, from a node's supervisor to its workers
	// only. Whoever changes a marked Spec's objects clears it.
	Checked [32]byte `json:"-"`
}
