// Package apibreaker is APISIX's api-breaker plugin (priority 1005,
// access and log phases): a circuit breaker on the upstream's answers.
// Its configuration, defaults and error texts are those of
// apisix/plugins/api-breaker.lua; README.md shows them.
//
// The log phase counts the upstream's status for the request's host and
// uri ($host and $uri, APISIX's key): a status of unhealthy.http_statuses
// adds one unhealthy answer and forgets the healthy ones; each time the
// unhealthy count reaches a multiple of unhealthy.failures the breaker
// opens, for 2^n seconds where n is the count divided by failures (at
// least 1), up to max_breaker_sec. While it is open the access phase
// answers break_response_code, with break_response_body and
// break_response_headers (values with $var references resolved) when a
// body is set (APISIX adds the headers only then), and the upstream is
// not contacted. Once open, a status of healthy.http_statuses counts one
// healthy answer, and healthy.successes of them in a row close the
// breaker and forget the counts. A response the gateway made (the
// breaker's own, another plugin's, a failed connection's) counts neither
// way.
//
// Difference from APISIX: APISIX keeps the counts in a shared dictionary
// of the node, one per (host, uri) whatever route serves it, shared by
// every worker process. Here each built instance (one per route, or
// service, plugin_config or global rule, that configures the plugin)
// keeps its own, in its worker process: with N workers a pair may see up
// to N times failures unhealthy answers before every worker's breaker is
// open, and a configuration change that builds the route again starts
// its counts afresh (a reload that leaves the route as it was keeps
// them). An instance tracks up to MaxStates pairs.
//
// An instance is used by one event loop, and its counts with it: no
// locks. Its key and header buffers are reused from one request to the
// next; Ctx.Exit and SetResponseHeader copy what they get. Once a pair is
// tracked, neither phase allocates.
package apibreaker
