// Package jwtauth is APISIX's jwt-auth plugin (priority 2510, rewrite
// phase): a request names its consumer by a JSON Web Token, in a header
// (default Authorization, a "Bearer " prefix optional), else a query
// argument (default jwt), else a cookie (default jwt). The payload's key
// claim (key_claim_name, default "key") is the consumer's key, found
// through the snapshot's consumer index (a map lookup); the token's "alg"
// must be the consumer's algorithm, its signature must verify with the
// consumer's secret (HS256, HS384, HS512; base64_secret decodes it) or
// public key (RS256/384/512, PS256/384/512, ES256/384/512, EdDSA), and its
// exp and nbf claims, when present (required when claims_to_verify lists
// them), must hold within the consumer's lifetime_grace_period. Failures
// are answered 401 with APISIX's bodies and WWW-Authenticate: Bearer
// realm="<realm>", unless the route names an anonymous consumer. With
// hide_credentials the header, the query argument or the cookie is taken
// out of the request, as APISIX does it (the Cookie header rebuilt from
// its plain name=value pairs). See README.md.
//
// Signatures are verified with Go's standard crypto; no JWT library is
// used. The token is read without allocating: its parts are slices of
// the request, decoded into the instance's buffers, and its header and
// payload are scanned, not unmarshalled. An HMAC is computed with the
// instance's own hash from the consumer's padded keys, prepared when the
// consumers are indexed (plugins.CredentialDataPlugin), so an HS token
// costs no allocation; RSA, ECDSA and EdDSA keys are parsed then too, and
// their verification allocates inside crypto/rsa and crypto/ecdsa (about
// ten allocations for RS256 with a 2048-bit key, TestAllocRS256).
//
// Differences from APISIX:
//   - store_in_ctx is accepted and has no effect: no plugin here reads
//     the payload APISIX keeps in ctx.jwt_auth_payload.
//   - A public_key that does not parse, or is not of the algorithm's
//     kind, is accepted when written, as in APISIX, and no token of that
//     consumer verifies ("failed to verify jwt"); Ed448 keys (EdDSA in
//     OpenSSL) are not supported by Go and are such keys.
//   - A payload that is valid JSON but not an object is "JWT token
//     invalid" (APISIX raises a Lua error, a 500).
//   - The consumer's exp (the lifetime of tokens APISIX's sign endpoint
//     made, removed in APISIX 3) is accepted and unused, as in APISIX.
//
// A worker keeps the tokens that verified, 2 048 of them up to 2 KiB
// each (Envoy's jwt_authn jwt_cache_config), in one cache that all its
// instances share (plugins.Env.Loop): a token sent again, on its route
// or another, is found by its exact bytes, its consumer looked up again
// and its exp and nbf checked against the clock, neither decoded nor its
// signature computed (an HS256 request 2 800 instructions instead of
// 15 400 under valgrind; an RS256 one 3 900 and no allocation instead of
// some 25 µs and ten). An entry serves an instance only when its key
// claim's name is the instance's and the instance's consumers find for
// its key the consumer and the credential (by pointer) its verification
// found: a change to a consumer or a credential makes them anew, and the
// old entries match nothing. See tokenCache.
//
// An instance runs on one event loop and is not safe for concurrent use,
// nor are the instances built with one Env.Loop, which share a cache.
//
// Importing the package registers the plugin in plugins.Default.
package jwtauth
