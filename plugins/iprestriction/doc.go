// Package iprestriction is APISIX's ip-restriction plugin (priority 3000,
// access phase): a route lets in only the clients whose address is on its
// whitelist, or keeps out those on its blacklist, and answers the others
// with response_code (403 or 404) and {"message": message}. Its
// configuration, defaults and error texts are those of
// apisix/plugins/ip-restriction/init.lua; README.md shows them.
//
// The lists hold IPv4 and IPv6 addresses and CIDRs, parsed by
// spec.ParseIPOrCIDR as the route's remote_addrs are. Build turns a list
// into a Set: sorted, disjoint ranges of integers, one slice per family,
// which a request searches by bisection (O(log n), no allocation), so a
// list of ten thousand CIDRs costs a request about what one does. The
// client's address is $remote_addr, read through Ctx.Var and parsed
// without allocating; one that does not parse is on no list, so a
// whitelist refuses it and a blacklist lets it in.
//
// Differences from APISIX: an IPv4 client is not found in an IPv6 prefix
// of v4-mapped addresses shorter than 96 bits; a prefix length with a
// leading zero ("fe80::/010") is refused, as everywhere in the gateway.
//
// An instance is read-only once built and shared by the requests of its
// routes; its answer's body is made at Build, and Ctx.Exit copies it.
package iprestriction
