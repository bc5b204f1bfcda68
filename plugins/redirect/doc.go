// Package redirect is APISIX's redirect plugin (priority 900, rewrite
// phase): a request is answered with a redirection instead of going
// upstream. Its configuration, defaults and error texts are those of
// apisix/plugins/redirect.lua; README.md shows them.
//
// The target is uri, a template read as redirect.lua's parse_uri reads it
// (its own syntax, not core.utils.resolve_var's: no "??" defaults, no '.'
// in names), or regex_uri's substitution of the request's $uri
// (package resub, ngx.re.sub's template), or, for http_to_https, the https
// URL of the request on the node's https port (plugin_attr.redirect's
// https_port, else the first apisix.ssl.listen port, plugins.Env.HTTPSPort,
// where APISIX picks one of the listeners at random). encode_uri escapes
// the target's path as core.utils.uri_safe_encode; append_query_string
// adds $args. The answer is ret_code (301 for GET and HEAD and 308 for
// others with http_to_https), the Location header, and the gateway's page
// for the status, as APISIX's ngx.exit without a body. A regex_uri that
// does not match, and http_to_https on a request that came over https
// (X-Forwarded-Proto, else $scheme), let the request go on.
//
// An instance runs on one event loop: it keeps two scratch buffers, for
// the Location of the request being handled (SetResponseHeader copies
// it), and regex_uri's bounded cache of matches. Its phase allocates
// nothing in steady state; a regex_uri of a shape other than the literal
// ones allocates on a target new to its cache.
package redirect
