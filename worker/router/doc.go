// Package router matches HTTP requests to routes the way Apache APISIX's
// radixtree_host_uri (the default) and radixtree_uri routers do, as
// implemented by lua-resty-radixtree with no_param_match set.
//
// # Paths
//
// A route path without '*' is an exact match. A '*' makes a prefix match on
// the text before the first '*': "/foo/*" matches "/foo/" and "/foo/a/b" but
// not "/foo"; "/foo*" matches "/foo", "/foobar" and "/foo/x". ":name"
// segments are literal text. When a '*' is followed by more text ("/a/*/b"),
// the rest is checked the way lua-resty-radixtree does, with a regular
// expression built from the path's segments.
//
// Exact paths are found with one hash lookup, prefixes with one walk of a
// byte-wise radix tree, so a lookup costs O(len(path)) whatever the number
// of routes. Candidates are tried in this order: the exact path's routes,
// then the routes of the longest matching prefix, then shorter prefixes.
// Within one path, routes are ordered by priority (highest first), then by
// the length of the path as written (longest first), then by their order in
// the slice given to [Build]. The first candidate whose method, remote
// address, host and vars conditions all hold wins.
//
// # Hosts
//
// Route hosts are compared case-insensitively. "*.foo.com" is a suffix match
// on ".foo.com" (it does not match "foo.com"); "*" matches any host. A route
// host that contains ':' is compared with the whole Host header, port
// included; other route hosts with the host without its port.
//
// In [HostURI] mode (radixtree_host_uri) routes that have hosts are looked
// up first: the routes of the exact host, then those of each matching
// wildcard, longest wildcard first. Routes without hosts are tried only when
// no host-bound route matched, so a host-bound route beats a host-less one
// whatever their priorities. In [URI] mode (radixtree_uri) there is one
// table and a route's hosts are one more condition.
//
// # Vars
//
// Route vars are lua-resty-expr conditions compiled once by [CompileVars]
// and evaluated against a [VarSource] the caller implements. Their
// variables are httpvar's table, each name resolved by httpvar.Parse when
// the conditions are compiled; the worker's VarSource reads them as the
// plugins and the access log do, the exchange variables (route_id, ...)
// unset since no route is matched yet.
//
// # Concurrency and memory
//
// [Build] runs off the hot path and returns an immutable [*Router]; any
// number of goroutines may call [Router.Match] at once. Match does not
// allocate and keeps no reference to the request after it returns.
//
// [Router.Update] makes the Router of a change from the one being served,
// which it never writes: it copies what the changed routes touch and
// shares the rest. A table's exact paths are sharded by hash past 1024
// (about 64 per shard, the shards in pages of 32) and its prefixes split
// into one trie per first segment, so that a change copies a shard, its
// page and the index of pages, and rebuilds the tries of its own
// prefixes' segments, not the table; host tables are found the same way.
// Changing one route among 50 000 costs about what building one does,
// and the answers are those of a Build from scratch of the same routes
// (the property test TestUpdateAsBuilt, FuzzUpdate), ties between
// routes of equal priority and path length broken by [Route.Order].
package router
