// Package responserewrite is APISIX's response-rewrite plugin (priority
// 899; header_filter and body_filter phases, and log to give back a
// buffer): it changes the response to the client, whoever made it (the
// upstream, the gateway's own page, another plugin's exit). Its
// configuration, defaults and error texts are those of
// apisix/plugins/response-rewrite.lua; README.md shows them.
//
// header_filter evaluates vars (lua-resty-expr conditions, $status read
// from the response, other variables from the request): when they do not
// hold the response is left as it is. Otherwise status_code replaces the
// status (Ctx.SetStatus: a 1xx, 204 or 304 response keeps its own, and
// 204 or 304, statuses without a body, are not given); a body or filters
// remove Content-Length, Content-Encoding, Last-Modified and ETag, as
// APISIX's clear_header_as_body_modified (the worker frames a body that
// body_filter may change itself: chunked, or delimited by the close for
// HTTP/1.0, so Content-Length is never stale; a HEAD's answer goes without
// one, as nginx's sub_filter leaves it). A body with a transfer coding
// besides chunked (Transfer-Encoding: gzip, chunked), which the worker
// forwards with its coding named, is left as it came, headers included,
// by a body and filters alike: neither read as plain text nor replaced by
// a plain body under the coding (nginx since 1.23 answers such an
// upstream 502).
// Then headers: "add"
// (Ctx.AddResponseHeader, after the upstream's of the name), "set"
// (replacing them) and "remove", in that order, or the older plain
// object, every field of which is set. Values are templates of APISIX's
// core.utils.resolve_var ($remote_addr, ${http_x ?? default}).
//
// body_filter replaces the body with body (decoded once, at Build, when
// body_base64), sent when the upstream's ends; or holds the whole body
// for filters, up to max_resp_body_size bytes (64 MiB by default; past it
// the body is cut, as APISIX's hold_body_chunk cuts it), and sends it at
// its end with each filter's regex replaced by its replace, once or
// everywhere (scope), the filters one after the other. One filter whose
// pattern is a literal and whose replacement is as long, with no group
// (the bench row's "5678" → "abcd"), on a body not gzip-encoded, does not
// hold it: each piece is sent on as it comes (rewritten in a copy where it
// has a match), but for its last bytes where they begin the literal, held
// and searched again with the next piece, so that a match split between
// two reads is replaced; the body is cut at max_resp_body_size all the
// same. A gzip body is
// decoded first and sent plain (cut at max_resp_body_size, what decodes
// of the cut); one of another Content-Encoding (br,
// deflate), which APISIX decodes or sends without its Content-Encoding,
// is sent as it came, Content-Encoding kept.
//
// Differences from APISIX: regular expressions are Go's (RE2): no
// look-around or back-references, refused by Check with regexp's message;
// the options i, m, s and a map to RE2's flags, j, o, u, U, d, D and J
// change nothing, and x is refused. Header fields of the plain object and
// of "set" are written in name order (APISIX walks a Lua table, in no
// set order). An "add" entry create_header_operation cannot read (a name
// with a space), which makes APISIX drop every header edit at run time,
// is refused by Check. A response's vars are evaluated by the route vars'
// evaluator (varexpr, through plugins/internal/varexpr) over plugins.Ctx;
// an ipmatch value may be an IPv6 address in brackets, as elsewhere.
//
// A configuration without body or filters builds an instance that runs
// in header_filter only (headersOnly): the worker forwards the body as it
// comes, Content-Length kept, as APISIX does, where a body_filter phase
// would have the worker frame it and copy every piece. The commonest of
// them, one field set to a literal and nothing else, builds a setLiteral,
// which keeps that field's name and value only (48 bytes where the rules
// are 176; a worker keeps an instance per route).
//
// An instance belongs to one event loop (plugins.Plugin). The
// header-only, status and body configurations allocate nothing per
// request (alloc_test.go); filters hold each response's body (a streamed
// one's held last bytes) in a buffer slot of the instance, found again through Ctx.Keep and given back in
// the log phase, so that responses interleaved on the loop do not mix.
// A slot's buffers are reused, and a pattern that is a literal is found
// without regexp (its first byte looked for a word at a time, the rest
// compared where it is; a replacement without groups as long as the
// literal is written over each match in the buffer, and for a global
// one of four to eight bytes that cannot overlap itself, over a stretch of
// matches eight places at a time, with no branch per match): such filters
// allocate nothing in steady state. Other
// regular expressions allocate the indices of their matches (regexp's
// FindAllSubmatchIndex: about one allocation per match), and a gzip
// body's decoding allocates its reader and output.
package responserewrite
