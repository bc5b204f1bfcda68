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
// A request may carry several User-Agent headers: an allowlist lets it in
// when one of its values matches a rule, a denylist refuses it when one of
// its values does (APISIX's tests 8, 9, 16 and 17).
//
// Difference from APISIX: APISIX's own check of several values under a
// denylist is inverted (it refuses a request of which any value is not
// denied, and lets in one whose every value is); coregate refuses a
// request of which any value is denied, which is what its tests expect of
// it and what a denylist means.
//
// An instance is read-only once built and shared by the requests of its
// routes; its answer's body is made at Build, and Ctx.Exit copies it.
package uarestriction
