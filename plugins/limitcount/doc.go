// Package limitcount is APISIX's limit-count plugin (priority 1002, access
// phase): at most count requests per time_window seconds for each value of
// a key (the client's address by default), counted in the node's shared
// counter table (plugins.Counters) so that the limit holds across every
// worker of the node: with N workers and a limit L, exactly L requests
// pass per window.
//
// A window starts with the first request a key's counter sees, as
// APISIX's fixed window: X-RateLimit-Reset is the seconds left in it
// (time_window on the first request, then counting down). The counter's
// key is the route's id, a hash of the plugin's configuration and the key
// value, or the group and the key value: so counters survive a reload that
// leaves the plugin alone, and start again when its configuration changes.
//
// With rules, each rule whose key resolves counts the request in its own
// counter, with its own headers (X-<header_prefix or position>-RateLimit-…);
// a request no rule applies to is a limiter failure, as in APISIX.
//
// Policies "redis" and "redis-cluster" count in Redis instead, as APISIX's
// (redis.go): the access phase awaits the count (plugins.Ctx.Await) and
// the event loop serves other requests meanwhile; a Redis that cannot
// answer fails the request (500) or, with allow_degradation, lets it
// through. "redis-sentinel" passes the schema (as in APISIX) but Check
// refuses it, as it refuses window_type "sliding", naming what is not
// supported, so that the Admin API answers 400 rather than store what no
// worker can build.
//
// With sync_interval (sync.go), as APISIX's delayed sync, a Redis policy
// counts on the worker: a key's window starts with a sync the request
// awaits (and the key's requests that come meanwhile await a round trip
// of their own, so that each admitted request is in the local count),
// then a request is admitted while count - used - delta > 0, used being
// Redis's count at the last sync and delta the worker's requests since,
// with no round trip and no allocation; a goroutine sends the deltas every
// sync_interval and takes Redis's count back. The counts are per worker,
// not in the node's shared table (which holds one atomic counter per key,
// not the pair and the sync's turn APISIX keeps in its shared dict): a
// window admits at least count and at most count times the workers and
// gateways that share the Redis. A sync Redis fails counts the delta in
// the node's counter table instead (APISIX's fallback limiter), so the
// limit holds per node whatever allow_degradation; a request fails only
// when that table has no room either. Rejected requests are not sent to
// Redis, as in APISIX's delayed sync. A time_window resolved per request
// that is not longer than sync_interval is counted in Redis per request,
// as APISIX does.
//
// The members of a group share its counter. The Admin API refuses a
// member whose configuration differs from the others' (APISIX's "group
// conf mismatched", a check across objects); a worker given one anyway
// counts it against its own configuration rather than refuse the whole
// configuration.
//
// When the counter table has no room for a new key (every slot of its
// probe chain holds a live counter), the request passes if
// allow_degradation is true, else it is answered 500
// {"error_msg":"failed to limit count"}, APISIX's answer to a failing
// limiter.
package limitcount
