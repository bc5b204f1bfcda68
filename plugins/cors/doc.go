// Package cors is APISIX's cors plugin (priority 4000; rewrite and
// header_filter phases): Cross-Origin Resource Sharing. Its configuration,
// defaults, metadata schema and error texts are those of
// apisix/plugins/cors.lua; README.md shows them.
//
// The rewrite phase answers any OPTIONS request 200 with an empty body
// (the preflight), as APISIX does. The header_filter phase, which runs on
// every response of the route, allows the request's Origin in cors.lua's
// order: the plugin metadata's lists that allow_origins_by_metadata names,
// then allow_origins_by_regex or else allow_origins, then the metadata's
// lists again; an allowed request gets Access-Control-Allow-Origin (the
// request's origin, or "*"), -Allow-Methods, -Max-Age, -Expose-Headers,
// -Allow-Headers and -Allow-Credentials as APISIX writes them, a refused
// one none. "Vary: Origin" is added (Ctx.AddResponseHeader, beside the
// upstream's Vary) whenever allow_origins is not "*", as in APISIX, where
// a regex's or the metadata's match alone does not add it.
// Timing-Allow-Origin follows timing_allow_origins_by_regex or else
// timing_allow_origins.
//
// The plugin metadata is read when the instance is built, so a change of
// it applies from the next configuration snapshot. Regular expressions
// are Go's (RE2), joined into one alternation as APISIX joins them with
// "|": one PCRE takes and RE2 does not (look-around, back-references) is
// refused by Check with regexp's message.
//
// An instance keeps no per-request state: it is only read on the request
// path, and safe for use by every event loop. Its phases do not allocate;
// the values they set are the instance's or the request's Origin and
// Access-Control-Request-Headers, which SetResponseHeader copies.
package cors
