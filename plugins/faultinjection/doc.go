// Package faultinjection is APISIX's fault-injection plugin (priority
// 11000, rewrite phase): abort ends a request with http_status, body and
// headers instead of proxying it, delay holds it back for duration
// seconds (Ctx.Delay: the event loop serves other connections
// meanwhile), each for the share of requests its percentage gives and,
// with vars, only when one of its lua-resty-expr expressions holds
// (plugins/internal/varexpr). With both, the delay comes first and the
// abort's answer waits for it, as APISIX sleeps before it exits. Its
// configuration, defaults and error texts are those of
// apisix/plugins/fault-injection.lua; README.md shows them.
//
// body and the string values of headers are resolved against the
// request's variables (plugins/internal/vartpl, as APISIX's
// core.utils.resolve_var); a number value of headers is written as Lua's
// tostring writes it. Without body the answer is the gateway's page for
// http_status, as ngx.exit's (empty for 200).
//
// Differences from APISIX: vars expressions take the route vars'
// operators and refuse, as they do, lua-resty-expr's logical operators
// and nested expressions; a header name holding ':' (which the schema's
// patternProperties lets through) is refused rather than sent. The
// samples are drawn with math/rand/v2, not math.random.
//
// An instance is read-only once built but for its scratch buffer, in
// which each request of its one event loop renders the answer's body and
// headers in turn: Exit and SetResponseHeader copy them. Its phase
// allocates nothing.
package faultinjection
