// Package keyauth is APISIX's key-auth plugin (priority 2500, rewrite
// phase): a request names its consumer by an API key, in a header or, when
// the header is absent, in a query argument. The consumer is found through
// the snapshot's consumer index (plugins.Consumers, a map lookup whatever
// the number of consumers) and attached to the request, whose consumer's
// plugins then run with the route's. A request without a key, or with a
// key no consumer has, is answered 401 with APISIX's bodies and its
// WWW-Authenticate header, unless the route names an anonymous consumer
// to fall back to. An empty key is no consumer's: the consumer schema
// refuses one, and the request path never looks one up. A consumer's key
// may be a $env:// reference, which plugins.Registry resolves when the
// consumers are indexed (Credential gets the value). See README.md.
//
// Importing the package registers the plugin in plugins.Default.
package keyauth
