// Package trafficsplit is APISIX's traffic-split plugin (priority 966,
// access phase): a route's requests go to other upstreams by weight and by
// lua-resty-expr conditions on the request. Its configuration, defaults
// and error texts are those of apisix/plugins/traffic-split.lua;
// README.md shows them.
//
// Build compiles each rule's match conditions (checked as a route's vars,
// evaluated by varexpr through plugins/internal/varexpr) and takes its weighted upstreams from Env.Upstreams: an
// upstream_id's compiled upstream object, an inline upstream compiled as
// a route's own (balancer, timeouts, pass_host, scheme, TLS, keepalive
// pool), or nil for the route's own. The access phase takes the first
// rule whose match holds (or that has none; an empty match list holds as
// the rule before it did, as in APISIX), chooses an entry by
// lua-resty-balancer's interleaved weighted round robin, over the entries
// in their configured order, and hands it to Ctx.SetUpstream; the worker
// then proxies the request with the route's variant for that upstream.
//
// Differences from APISIX: an inline upstream is checked when the
// configuration is (APISIX checks it when a request first chooses it)
// and keeps all an upstream object's fields, where APISIX keeps a few
// (type, hash_on, key, pass_host, upstream_host, nodes, timeout, scheme,
// name); its checks are ignored in both. The round robin follows the
// configured order, where APISIX's follows its Lua table's. An
// upstream_id the snapshot lacks answers 500 with APISIX's body, as APISIX
// does at request time.
//
// An instance is used by one event loop: its round robins' positions and
// its match evaluator (holding the Ctx only while it evaluates) are its
// own. The access phase does not
// allocate.
package trafficsplit
