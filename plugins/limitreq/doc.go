// Package limitreq is APISIX's limit-req plugin (priority 1001, access
// phase): a leaky bucket per key (the value of a variable, by default
// the client's address) that lets rate requests a second through, and up
// to burst more, delayed so that they leave at the rate; past that, the
// request is rejected (rejected_code, 503).
//
// The bucket of a key lives in the node's shared counter table
// (plugins.Counters), one 64-bit word updated with compare-and-swap: the
// excess (in thousandths of a request, as lua-resty-limit-traffic keeps
// it) and the time of the last request admitted, in milliseconds from the
// start of the word's window. Every worker of the node reads and updates
// the same word, so the limit holds exactly across workers, where
// APISIX's shared dict is read and written in two steps.
//
// A word's window is an hour (bucketWindow): when it ends the counter
// table gives the key a fresh word, and the bucket starts empty, as for a
// key seen for the first time. A key therefore gets at most burst+1
// requests more than its rate allows once an hour.
//
// A request within the burst is delayed by excess/rate seconds, unless
// nodelay: the plugin asks the worker to hold it (plugins.Ctx.Delay), and
// the event loop serves other connections meanwhile.
//
// Policies "redis" and "redis-cluster" keep the bucket in Redis as
// APISIX's limit-req/util.lua does (redis.go): a hash limit_req:<route's
// resource key>:<conf version>:<key's value> with the fields excess and
// last, which one Lua script reads, drains, checks and writes. The access
// phase submits the script's call to the process's client of that Redis
// (plugins/internal/redis) and awaits it (plugins.Ctx.Await); Resume
// rejects, delays or lets the request go. When Redis cannot answer, the
// request is answered 500, or passes with allow_degradation.
package limitreq
