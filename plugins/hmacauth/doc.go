// Package hmacauth is APISIX's hmac-auth plugin, its 3.x form (priority
// 2530, rewrite phase): a request names its consumer by an HMAC signature
// of its own parts, in `Authorization: Signature keyId="…",
// algorithm="…",headers="…",signature="…"`. The consumer is found by its
// key_id through the snapshot's consumer index (plugins.Consumers), its
// configuration's or one of its credential objects', and its secret_key
// (an encrypt_fields member, stored encrypted as in APISIX) signs the
// signing string the client signed: the keyId, then "name: value" of each
// request header headers="…" lists (the first value of a repeated one; a
// name with '_' finds the header with '-' in its place, as
// ngx.req.get_headers() does; one the request lacks is skipped, but
// "@request-target", which stands for "METHOD request_uri"), each line
// ended by "\n". The base64
// signature is compared with hmac.Equal, in constant time.
//
// The checks run in APISIX's order and answer as it does: no
// Authorization header, or one not starting with "Signature", is 401
// with the reason; anything else (no keyId, signature or algorithm, an
// unknown key_id, an algorithm allowed_algorithms does not name, a Date
// header missing, unreadable (nginx's three HTTP date forms,
// parseHTTPTime) or further than clock_skew seconds from the worker's
// clock, a signed_headers header not listed in headers="…", a signature
// that differs) is 401 {"message":"client request can't be validated"},
// with `WWW-Authenticate: hmac realm="<realm>"`, unless the route names an
// anonymous consumer to fall back to. With hide_credentials the
// Authorization header does not go upstream. See README.md.
//
// With validate_request_body the instance is a plugins.BodyReader: the
// worker reads the body whole, up to max_req_body_size and
// client_max_body_size, before the rewrite phase, and once the signature
// is good the Digest header must be "SHA-256=" and the base64 SHA-256 of
// that body (401 otherwise, as above); a body over max_req_body_size is
// 413 {"message":"request size N is greater than the maximum size M
// allowed"}, before any anonymous consumer, as APISIX answers.
//
// Differences from APISIX: a body over the worker's limit for the route
// (the largest max_req_body_size of its body readers, or a smaller
// client_max_body_size) is answered 413 by the worker, with its page,
// before the plugin runs. The reasons APISIX writes to its error log are
// not logged: the request path does not log.
//
// The request path allocates nothing: each instance has its own SHA-1,
// SHA-256 and SHA-512 hashes (and one more SHA-256 for the body), HMAC is computed with them directly, and the
// signing string and the decoded signature are scratch buffers reused by
// every request. An instance runs on one event loop and is not safe for
// concurrent use.
//
// Importing the package registers the plugin in plugins.Default.
package hmacauth
