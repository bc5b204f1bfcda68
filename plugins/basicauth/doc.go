// Package basicauth is APISIX's basic-auth plugin (priority 2520, rewrite
// phase): a request names its consumer by HTTP Basic authentication, the
// Authorization header's username and password. The consumer is found by
// its username through the snapshot's consumer index (plugins.Consumers, a
// map lookup whatever the number of consumers), its configuration's or one
// of its credential objects', and the password is compared in constant
// time: the SHA-256 of the request's against that of the consumer's,
// computed when the consumers are indexed (CredentialData), and computed
// for the request whether or not the username exists. The consumer's
// password is one of the consumer schema's encrypt_fields, stored
// encrypted as in APISIX, and may be a $env:// reference.
//
// The header is read exactly as APISIX reads it, oddities included (see
// instance.extract): the scheme need not start the header, the base64 is
// read up to its first '=', and the username and password lose their
// white space and whatever follows a second ':'. A request without the
// header, with one APISIX cannot read, or whose username and password are
// no consumer's is answered 401 with APISIX's bodies and
// `WWW-Authenticate: Basic realm="<realm>"`, unless the route names an
// anonymous consumer to fall back to. With hide_credentials the
// Authorization header does not go upstream. See README.md.
//
// Differences from APISIX: none in what a client sees. APISIX compares
// the password with Lua's ~=; this package compares digests in constant
// time. The reasons APISIX writes to its error log (the header's format,
// the base64, the split) are not logged: the request path does not log.
//
// The request path allocates nothing once its scratch buffers have grown;
// an instance runs on one event loop and is not safe for concurrent use.
//
// Importing the package registers the plugin in plugins.Default.
package basicauth
