// Package realip is APISIX's real-ip plugin (priority 23000, rewrite
// phase): the address a variable gives (source: a header's, an
// argument's…) becomes the client's for the rest of the request, through
// plugins.Ctx.SetClientAddr: $remote_addr and $remote_port for the
// plugins after it, the access log and a chash key, X-Real-IP and the
// end of X-Forwarded-For upstream. The address is parsed as APISIX's
// core.utils.parse_addr does (IPv4 or IPv6, with a port or not, IPv6 in
// brackets or bare); one that is no address, or a port outside 1 to
// 65535, changes nothing. Its configuration, defaults and error texts
// are those of apisix/plugins/real-ip.lua; README.md shows them.
//
// source http_x_forwarded_for reads the last X-Forwarded-For header's
// last address, or with recursive and trusted_addresses its last address
// that trusted_addresses does not hold; with trusted_addresses, a client
// not on the list keeps its own address.
//
// Differences from APISIX: an IPv4-mapped IPv6 address becomes its IPv4
// address. apisix.trusted_addresses of config.yaml (APISIX's stripping of
// a forged X-Forwarded-For from untrusted clients before the plugins run)
// is not implemented, and refused at start (admin/nodeconf). The route is
// matched with the connection's address, as in APISIX.
//
// An instance is read-only once built and shared by the requests of its
// routes; its phase allocates nothing.
package realip
