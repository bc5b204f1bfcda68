// Package uarestriction is APISIX's ua-restriction plugin (priority 2999,
// access phase): a route serves only the clients whose User-Agent matches
// a rule of its allowlist, or none of its denylist, and answers the
// others 403 with {"message": message}. A request without a User-Agent
// is refused too, unless bypass_missing is set. Its configuration,
// defaults and error texts are those of apisix/plugins/ua-restriction.lua;
// README.md shows them.
//
// The rules are regular expressions, searched for anywhere in the value
// with its surrounding white space trimmed, as ngx.re.find does; they are
// compiled by Go's regexp (RE2 syntax: no lookaround, no backreferences;
// a rule using them is refused, see plugins/internal/pcre), joined into
// one expression at Build, and matched without allocating.
//
// Difference from APISIX: only the request's first User-Agent header is
// read (nginx's $http_user_agent). APISIX reads them all: an allowlist
// lets in a request of which one value matches, a denylist refuses one
// of which any value does not match (its check of each value is
// inverted), so that it lets in only requests whose every value is
// denied.
//
// An instance is read-only once built and shared by the requests of its
// routes; its answer's body is made at Build, and Ctx.Exit copies it.
package uarestriction
