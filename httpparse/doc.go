// Package httpparse parses HTTP/1.1 message heads and validates chunked
// bodies for a reverse proxy (RFC 9112, RFC 9110). It imports nothing but the
// standard library.
//
// # Zero copy and lifetimes
//
// RequestParser.Parse and ResponseParser.Parse fill a Request or Response with
// sub-slices of the caller's buffer; nothing is copied and, once the Headers
// slice has grown to the usual number of fields, nothing is allocated. Those
// slices are valid exactly as long as the buffer: a worker that parses a gnet
// Peek slice must finish with them before its callback returns, or copy what
// it keeps. The one slice outside the buffer is the Path "/" of an
// absolute-form target with an empty path, which is shared and read-only.
// Errors are the only allocations.
//
// Parsers, Request, Response and Chunked values are not safe for concurrent
// use; a worker keeps one of each per connection and reuses it.
//
// # Incremental use
//
// A head may arrive in pieces. Parse returns ErrNeedMore while the head is
// incomplete; call it again with the same bytes followed by more (a new,
// moved buffer is fine: the parser keeps offsets only). The parser remembers
// how far it has looked for the end of the head and goes on from there, so
// a head split into many reads is scanned once for its end and parsed once
// in full. Limits are enforced as the bytes arrive: a request line longer than
// MaxRequestLine or a head beyond MaxHeaderBytes or MaxHeaders fails without
// waiting for its end. On success the parser is ready for the next message,
// which starts at buf[HeadLen:] once the body has been consumed, so pipelined
// requests are parsed one after the other. Reset drops an incomplete head.
//
// Chunked reads a chunked body as it streams past, keeping its state between
// calls: it checks the framing to the RFC's grammar and hands out the chunk
// data, so that the proxy writes the framing of what it forwards itself and
// forgets each piece once it is written.
//
// Whether a complete head is accepted, and what it parses to, does not depend
// on how it was split. How it arrived can change two things only: a fault in
// a head that is still incomplete may be reported at once or only when the
// head completes (or a limit is reached), and with several faults in one head
// the one reported may differ.
//
// # Strictness
//
// The parser is written for a proxy, where two parsers disagreeing about a
// message is a request-smuggling hazard, so it refuses what RFC 9112 lets a
// recipient refuse:
//
//   - Every line ends in CRLF; a bare LF or a bare CR is malformed (RFC 9112
//     §2.2 allows accepting a bare LF; a proxy should not).
//   - Empty lines before a request line are skipped (RFC 9112 §2.2) and count
//     toward MaxRequestLine and MaxHeaderBytes. A response has none.
//   - A request line is method SP request-target SP HTTP-version with exactly
//     one SP each. The method is a token. The version is "HTTP/" DIGIT "."
//     DIGIT: HTTP/1.0 and HTTP/1.1 parse as such, HTTP/1.2 to HTTP/1.9 parse
//     as HTTP/1.1 (RFC 9110 §2.5), HTTP/0.x is malformed and any other major
//     version is ErrVersion.
//   - The request-target is non-empty and has no CTL, SP, DEL or '#'. Other
//     printable bytes that RFC 3986 would have percent-encoded ('"', '<',
//     '>', '\', '^', '`', '{', '|', '}') and obs-text are accepted, as nginx
//     does; a '%' in the path must start a valid percent-encoding (the query
//     is not checked). The forms are: origin-form; absolute-form with the
//     http or https scheme, a non-empty authority without userinfo, and then
//     Host is taken from the target (RFC 9112 §3.2.2); authority-form
//     host:port only and always for CONNECT; asterisk-form only for OPTIONS.
//   - A field name is a token followed directly by ':' (no whitespace);
//     obs-fold is malformed. Field values may hold HTAB, SP, VCHAR and
//     obs-text; NUL, CR, LF, DEL and other controls are malformed.
//   - Content-Length is 1*DIGIT up to 2^63-1. Repeated Content-Length fields
//     and comma-separated lists are accepted when every element is the same
//     digits, byte for byte (RFC 9110 §8.6); otherwise malformed. A forwarder
//     should send ContentLength rather than copy the fields.
//   - A request's Transfer-Encoding must be a single field with the value
//     "chunked" (any case). Other codings, alone or in a list (gzip,
//     "gzip, chunked"), are ErrNotImplemented (501, RFC 9112 §6.1); repeats,
//     empty list elements and any Transfer-Encoding in an HTTP/1.0 request
//     are malformed. A response may
//     carry a list of token codings: Chunked reports chunked as the final
//     coding, a final coding other than chunked means the body runs until
//     close, chunked twice or an empty list is malformed. Content-Length
//     together with Transfer-Encoding is malformed in both, and so is
//     Transfer-Encoding in an HTTP/1.0 response (RFC 9112 §6.1 calls its
//     framing faulty).
//   - An HTTP/1.1 request has exactly one Host field, an HTTP/1.0 request at
//     most one. Its value is empty or a reg-name (unreserved and sub-delims,
//     without percent-encoding) or a bracketed IPv6 address, with an optional
//     ":" port of digits. As nginx (ngx_http_validate_host), a reg-name with
//     an empty label is malformed: two dots in a row ("a..b", "a..") or a
//     lone "."; a leading dot and one trailing dot are accepted (nginx's
//     $host drops the trailing dot). An absolute-form authority is held to
//     the same rules.
//   - Connection values are lists of tokens.
//   - A status line is HTTP-version SP 3DIGIT SP reason-phrase CRLF with a
//     status code from 100 to 599. Like nginx, the SP before an empty reason
//     phrase may be missing.
//
// Parse errors are *ParseError values whose Kind is one of the package's
// sentinel errors; Status maps an error to the status code to answer with.
//
// The byte-class tables in tables.go are generated by tables_gen.go.
package httpparse

//go:generate go run tables_gen.go
