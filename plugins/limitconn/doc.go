// Package limitconn is APISIX's limit-conn plugin (priority 1003, access
// and log phases): at most conn requests in flight at once for each value
// of a key (the value of a variable, by default the client's address),
// burst more delayed, the rest rejected (rejected_code, 503).
//
// A key's count of requests in flight is a counter of the node's shared
// counter table (plugins.Counters), so the limit holds exactly across
// every worker of the node: the access phase adds the request (and takes
// it back when it is rejected), the log phase takes it away once the
// response is sent or the client has gone. The request remembers what its
// access phase counted (plugins.Ctx.Keep: the counter's expiry), so that
// log undoes exactly that.
//
// A counter lives an hour in the table (connWindow); when it ends the
// count starts again from zero, and the requests still in flight from
// before are not taken away from the new count (their counter's expiry
// differs). The requests of a worker that died in flight stay counted
// until then.
//
// A request past conn (within the burst) is delayed by default_conn_delay
// times (count-1)/conn, rounded down, as lua-resty-limit-conn does,
// through plugins.Ctx.Delay. APISIX adapts the delay unit to the latency
// of the requests served unless only_use_default_delay; here the unit is
// always default_conn_delay.
//
// Policies "redis" and "redis-cluster" keep the count in Redis as
// APISIX's limit-conn/util.lua does (redis.go): a sorted set
// limit_conn:<route's resource key>:<conf version>:<key's value> of the
// requests in flight, each scored with its arrival plus key_ttl, past
// which it is dropped. The access phase submits the script's call to the
// process's client of that Redis (plugins/internal/redis) and awaits it
// (plugins.Ctx.Await); Resume rejects, delays or lets the request go, and
// keeps the request's number (plugins.Ctx.Keep) when Redis counted it.
// The log phase cannot wait: it submits the removal and nothing waits
// for it (its call object goes back to the instance, pushed on a
// lock-free stack from the client's goroutine). A request abandoned while Redis counted it is removed
// likewise. When Redis cannot answer, the request is answered 500, or
// passes with allow_degradation.
//
// With rules, each rule whose key (a template) resolves a variable, and
// whose conn and burst resolve, counts the request in its own count, in
// order: the first over its limit rejects the request, and the counts the
// rules before it took are given back in the log phase, as APISIX's
// ctx.limit_conn list is; the delays of the rules add up. A request no
// rule applies to is a limiter failure. Rules whose keys resolve alike
// share a count, as in APISIX.
package limitconn
