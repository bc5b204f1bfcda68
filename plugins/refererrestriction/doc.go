// Package refererrestriction is APISIX's referer-restriction plugin
// (priority 2990, access phase): a route serves only the requests whose
// Referer's host is on its whitelist, or not on its blacklist, and
// answers the others 403 with {"message": message}. A request without a
// Referer, or with one that is not an http(s) URL ("www.yy.com"), is
// refused too, unless bypass_missing is set. Its configuration, defaults
// and error texts are those of apisix/plugins/referer-restriction.lua;
// README.md shows them.
//
// The host is read as lua-resty-http's parse_uri reads it: after an
// optional "http:" or "https:" and "//", up to the first of ":/?" (a
// bracketed IPv6 literal whole). A list entry starting with '*' matches
// the hosts ending with the rest ("*.xx.com": www.xx.com, not xx.com;
// "*": every host); the others match exactly. Comparisons are
// case-sensitive, as APISIX's. Lookups do not allocate: a map for the
// exact hosts, a scan of the suffixes.
//
// An instance is read-only once built and shared by the requests of its
// routes; its answer's body is made at Build, and Ctx.Exit copies it.
package refererrestriction
