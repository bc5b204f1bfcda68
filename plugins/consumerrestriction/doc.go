// Package consumerrestriction is APISIX's consumer-restriction plugin
// (priority 2400, access phase): a route lets a request through, or
// refuses it, by the consumer an authentication plugin attached to it
// (type consumer_name, the default), by the id of the service its route
// belongs to (service_id), by its route's id (route_id) or by the group
// of the attached consumer (consumer_group_id: the consumer's group_id,
// APISIX's ctx.consumer_group_id). The blacklist refuses first; then a
// value the whitelist does not hold is refused, and so is, unless
// whitelisted, a request of a user allowed_by_methods names whose method
// is not among that user's methods (the first entry naming the user
// decides; a user no entry names passes). A refusal is rejected_code
// (403) with {"message":"The <type> is forbidden."}, or rejected_msg; a
// request without the value (no consumer attached, a consumer in no
// group, a route without a service) is answered 401 {"message":"The
// request is rejected, please check the <type> for this request"},
// APISIX's bodies. Values are compared as they are, case included. See
// README.md.
//
// The plugin runs after the authentication plugins of the route's rewrite
// phase (key-auth, basic-auth, jwt-auth), which attach the consumer.
//
// An instance is built once per configuration and only read afterwards:
// safe for concurrent use. A request allocates nothing, and looks a value
// up in the whitelist and the blacklist with one map lookup each, whatever
// their length.
//
// Importing the package registers the plugin in plugins.Default.
package consumerrestriction
