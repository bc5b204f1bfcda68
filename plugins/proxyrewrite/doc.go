// Package proxyrewrite is APISIX's proxy-rewrite plugin (priority 1008,
// rewrite phase): it changes what the upstream receives, the request
// target (uri, or regex_uri's first matching pattern, applied to nginx's
// $uri and re-escaped as APISIX does, the query kept), the method, the
// Host, and request headers (add, set, remove; values with $var and regex
// captures). See README.md.
//
// Patterns are compiled by Go's regexp (RE2), not PCRE: a pattern RE2
// cannot compile (lookaround, backreferences) is refused by Check. The
// common shape ^literal(.*)literal$ is matched without regexp and without
// allocation; other patterns allocate regexp's submatch indices on a
// match, except for targets in the rule's bounded cache of matches (256
// targets of up to 256 bytes, per instance): package resub, which
// redirect's regex_uri shares.
//
// Importing the package registers the plugin in plugins.Default.
package proxyrewrite
