package proxyrewrite

import (
	"bytes"

	"coregate/httpvar"
	"coregate/plugins"
	"coregate/plugins/internal/resub"
)

// instance is one configuration of proxy-rewrite, built. It runs on one
// event loop, one request at a time: the buffers below are scratch space
// whose contents live until the next Rewrite call (the Ctx copies what it
// is given), reused so that a request allocates nothing once they have
// grown; vars' table of names grows only up to its bound.
type instance struct {
	host    []byte // nil: unchanged
	method  []byte // nil: unchanged
	uri     []byte // nil: no uri
	rules   []*resub.Rule
	ncaps   int
	unsafe  bool
	headers headerOps
	vars    vars

	// caps are the submatch indices of the regex_uri match of this
	// request, into subj; nil when no pattern matched.
	caps []int
	subj []byte

	target, work []byte
	// val and val2 are resolve's, a header value's for one request (until
	// the next call); nil in an instance none of whose header values has a
	// variable or a capture, which never calls it.
	val, val2 []byte
}

// Rewrite implements plugins.RewritePhase, as proxy-rewrite.lua's rewrite.
func (in *instance) Rewrite(c plugins.Ctx) {
	if in.host != nil {
		c.SetUpstreamHost(in.host)
	}
	in.caps, in.subj = in.caps[:0], nil
	matched := in.rewriteURI(c)
	if len(in.headers.add)+len(in.headers.set)+len(in.headers.remove) > 0 {
		in.rewriteHeaders(c, matched)
	}
	if in.method != nil {
		c.SetUpstreamMethod(in.method)
	}
	in.subj = nil // it points into the Ctx's buffers
}

// requestURI is $request_uri: the target as the client sent it.
func (in *instance) requestURI(c plugins.Ctx) []byte {
	if v := c.Var(httpvar.Var{Kind: httpvar.RequestURI}); v != nil {
		return v
	}
	t := append(in.work[:0], c.Path()...)
	if q := c.Query(); q != nil {
		t = append(append(t, '?'), q...)
	}
	in.work = t
	return t
}

// rewriteURI sets the upstream target; matched reports whether a
// regex_uri pattern matched (its captures are in in.caps).
func (in *instance) rewriteURI(c plugins.Ctx) (matched bool) {
	var src []byte
	if in.unsafe {
		src = in.requestURI(c)
	} else if src = c.Var(httpvar.Var{Kind: httpvar.URI}); src == nil {
		src = c.Path()
	}
	out := in.target[:0]
	separatorEscaped := false
	switch {
	case in.uri != nil:
		separatorEscaped = true
		out = in.vars.expand(out, in.uri, c, true)
		if in.unsafe {
			// The query of the request as sent, '?' included.
			if i := bytes.IndexByte(src, '?'); i >= 0 {
				if bytes.IndexByte(out, '?') >= 0 {
					out = append(append(out, '&'), src[i+1:]...)
				} else {
					out = append(out, src[i:]...)
				}
			}
		}
	case in.rules != nil:
		separatorEscaped = bytes.IndexByte(src, '?') < 0
		out = in.regex(out, src)
		matched = in.subj != nil
	default:
		out = append(out, src...)
	}
	if in.unsafe {
		in.target = out
		c.SetUpstreamURI(out)
		return matched
	}
	// Re-escape the path, as APISIX does before ngx.req.set_uri; a '?'
	// that uri or a template wrote starts a query, kept but for control
	// characters; the request's query follows.
	index := -1
	if separatorEscaped {
		index = bytes.IndexByte(out, '?')
	}
	w := in.work[:0]
	if index >= 0 {
		w = escapeURI(w, out[:index])
		w = escapeControls(w, out[index:])
	} else {
		w = escapeURI(w, out)
	}
	// $args, as APISIX appends ctx.var.args: a plugin before this one
	// may have edited them (key-auth's hide_credentials).
	if q := c.Var(httpvar.Var{Kind: httpvar.Args}); len(q) > 0 {
		if index >= 0 {
			w = append(w, '&')
		} else {
			w = append(w, '?')
		}
		w = append(w, q...)
	}
	in.target, in.work = out, w
	c.SetUpstreamURI(w)
	return matched
}

// regex appends to dst the target regex_uri makes of src: the first
// pattern that matches, substituted as ngx.re.sub (its first match only);
// src itself when none does. On a match in.caps and in.subj hold its
// captures.
func (in *instance) regex(dst, src []byte) []byte {
	for i := range in.rules {
		r := in.rules[i]
		caps := r.Match(src)
		if caps == nil {
			continue
		}
		in.caps = append(in.caps[:0], caps...)
		in.subj = src
		return r.Expand(dst, src, in.caps)
	}
	return append(dst, src...)
}

// rewriteHeaders makes the header edits: add, then set, then remove.
func (in *instance) rewriteHeaders(c plugins.Ctx, matched bool) {
	for i := range in.headers.add {
		op := &in.headers.add[i]
		for j := range op.values {
			c.AddRequestHeader(op.name, in.resolve(c, &op.values[j], matched))
		}
	}
	for i := range in.headers.set {
		op := &in.headers.set[i]
		if op.array {
			c.SetRequestHeader(op.name, nil)
			for j := range op.values {
				c.AddRequestHeader(op.name, in.resolve(c, &op.values[j], matched))
			}
			continue
		}
		v := in.resolve(c, &op.values[0], matched)
		if len(v) == 0 {
			v = nil // ngx.req.set_header with "" removes the header
		}
		c.SetRequestHeader(op.name, v)
	}
	for _, name := range in.headers.remove {
		c.SetRequestHeader(name, nil)
	}
}

// resolve is a header value for this request: captures of the regex_uri
// match first, then variables (resolve_header_value), control characters
// escaped as ngx.req.set_header escapes them. The result lives until the
// next call.
func (in *instance) resolve(c plugins.Ctx, v *value, matched bool) []byte {
	if v.tpl == nil {
		return v.lit
	}
	var caps []int
	if matched {
		caps = in.caps
	}
	in.val = expandCaptures(in.val[:0], v.tpl, in.subj, caps)
	in.val2 = in.vars.expand(in.val2[:0], in.val, c, false)
	in.val = escapeControls(in.val[:0], in.val2)
	return in.val
}

const upperHex = "0123456789ABCDEF"

// escapeURI appends s escaped as ngx_escape_uri(NGX_ESCAPE_URI) escapes
// it (core.utils.uri_safe_encode): space, '#', '%', '?', control
// characters and bytes above '~'.
func escapeURI(dst, s []byte) []byte {
	for _, b := range s {
		if b <= ' ' || b == '#' || b == '%' || b == '?' || b >= 0x7f {
			dst = append(dst, '%', upperHex[b>>4], upperHex[b&15])
		} else {
			dst = append(dst, b)
		}
	}
	return dst
}

// escapeControls appends s with its control characters (0x00-0x1F, 0x7F)
// percent-encoded (core.utils.escape_uri_control_chars), so that nothing
// a client sent can end a line of the upstream request.
func escapeControls(dst, s []byte) []byte {
	for _, b := range s {
		if b < ' ' || b == 0x7f {
			dst = append(dst, '%', upperHex[b>>4], upperHex[b&15])
		} else {
			dst = append(dst, b)
		}
	}
	return dst
}
