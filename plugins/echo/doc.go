// Package echo is APISIX's echo plugin (priority 412, header_filter and
// body_filter phases): body replaces an answer's body, before_body and
// after_body go before and after it, headers are set on the answer,
// whoever made it (the upstream, the gateway, a plugin's Exit). Its
// configuration and error texts are those of apisix/plugins/echo.lua;
// README.md shows them.
//
// The body goes through body_filter in pieces as it arrives: before_body
// precedes the first, after_body follows the last (eof), and body is the
// whole of it from the first piece on, the pieces after it dropped, as
// echo.lua's setting of ngx.arg[2] ends the body. What a request has
// done so far is kept with Ctx.Keep. The worker frames a body that
// body_filter may change anew (chunked, or with its new length), so the
// upstream's Content-Length goes, as APISIX's
// clear_header_as_body_modified.
//
// Differences from APISIX: a headers value that is neither a string nor
// a number, or an empty name, is refused by Check with the message
// echo.lua's header_filter gives per request (when it then sets no
// header at all). The upstream's ETag, Last-Modified and Content-MD5 are
// kept when the body changes (APISIX removes them): plugins.Ctx has no
// removal of a response header yet.
//
// An instance is read-only once built but for its scratch buffer, in
// which body_filter joins before_body or after_body to a piece: what
// BodyFilter returns is valid until its next call for any request of its
// event loop, and the worker copies it before that. Its phases allocate
// nothing.
package echo
