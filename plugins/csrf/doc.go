// Package csrf is APISIX's csrf plugin (priority 2980; access and
// header_filter phases): double-submit cookie protection against
// cross-site request forgery. Its configuration, defaults, encrypt_fields
// (key) and answers are those of apisix/plugins/csrf.lua; README.md shows
// them.
//
// header_filter gives every response of the route a new token, added as
// "Set-Cookie: <name>=<token>;path=/;SameSite=Lax;Expires=<now+expires>"
// (ngx.cookie_time's format). A token is csrf.lua's: the base64 of the
// JSON {"random":r,"expires":t,"sign":s}, where r is a random number in
// [0, 1) and t the Unix time it was made, both written as Lua writes
// numbers ("%.14g"), and s the hex SHA-256 of
// "{expires:<t>,random:<r>,key:<key>}": a token APISIX made with the same
// key verifies here, and one made here verifies in APISIX.
//
// access lets GET, HEAD and OPTIONS through; any other method must send
// the token in the request header <name>, equal to the cookie <name>, and
// the token must be signed with the key and, when expires is above 0, be
// at most expires seconds old; otherwise the answer is 401 with APISIX's
// {"error_msg": ...}: "no csrf token in headers", "no csrf cookie", "csrf
// token mismatch", "Failed to verify the csrf token signature".
//
// The token's JSON is read without encoding/json, as a flat object of
// string and number members; a string with an escape, which csrf.lua never
// writes, fails verification (cjson would decode it).
//
// An instance belongs to one event loop (plugins.Plugin): its random
// source (math/rand/v2's PCG, seeded at Build; the token's randomness is
// not a secret, the key is) and scratch buffers are used without locks.
// Its phases do not allocate (alloc_test.go); the cookie's value is
// copied by AddResponseHeader.
package csrf
