// Package uriblocker is APISIX's uri-blocker plugin (priority 2900,
// rewrite phase): a request whose target matches one of block_rules is
// answered rejected_code (403 by default) with {"error_msg": rejected_msg},
// or with the gateway's page for that status when rejected_msg is not
// set, and the upstream is not contacted. Its configuration, defaults and
// error texts are those of apisix/plugins/uri-blocker.lua; README.md
// shows them.
//
// The rules are regular expressions searched for anywhere in the target
// as APISIX's $request_uri has it: the normalised path ($uri, its "." and
// ".." segments resolved, so that "/./internal/x" does not slip past
// "^/internal/") then '?' and the query as sent, when there is one. As
// APISIX, Build joins them into one expression ("|", behind
// "(?i)" when case_insensitive); they are compiled by Go's regexp (RE2
// syntax: no lookaround, no backreferences; a rule using them is refused,
// see plugins/internal/pcre) and matched without allocating. An empty
// block_rules, which the schema allows, blocks every request, as in
// APISIX (the empty expression matches).
//
// An instance is used by one event loop: the buffer the target is put
// together in is its own, reused from one request to the next; the rest
// is read-only. Its answer's body is made at Build, and Ctx.Exit copies
// it.
package uriblocker
