package worker

import (
	"bytes"
	"strconv"

	"coregate/httpparse"
	"coregate/worker/shm"
)

// buildHead writes the outbound request head for cc.req into cc.head (see
// clientConn.head). Hop-by-hop fields go (RFC 9110 §7.6.1), and so do those
// the Connection header names; X-Forwarded-* and X-Real-IP are set as
// APISIX's nginx template does.
//
// The gateway owns the framing of what it forwards: Content-Length,
// Transfer-Encoding and Host are never copied from the client's field lines
// (so a Connection header naming them changes nothing), but written from
// what the parser made of them: one Content-Length with the parsed length,
// or "Transfer-Encoding: chunked" for a body takeBody re-frames, and the
// Host line per attempt (send).
//
// The plugins' edits of the upstream request (pluginCtx: SetUpstreamURI,
// SetUpstreamMethod, SetRequestHeader, AddRequestHeader) are applied here:
// the method and target replaced, the client's fields of a name a plugin
// set left out, and the fields plugins set or added written after the
// client's; SetUpstreamHost's Host goes on every attempt's Host line. The
// head is built once, so a retry sends the same edits.
//
// The request always goes upstream as HTTP/1.1, on the pool's kept-alive
// connections, whatever the client's version (nginx with
// proxy_http_version 1.1). A request the route lets upgrade (enable_websocket,
// wantsUpgrade) keeps its Upgrade field and says Connection: upgrade.
func (cc *clientConn) buildHead() {
	r := &cc.req
	b := cc.head[:0]
	if cc.plugin.upMethod {
		b = append(b, cc.upMethod...)
	} else {
		b = append(b, r.Method...)
	}
	b = append(b, ' ')
	if cc.plugin.upURI {
		b = append(b, cc.upURI...)
	} else if cc.servletTarget {
		b = append(b, cc.targetBuf...)
	} else if len(r.Target) > 0 && r.Target[0] == '/' {
		b = append(b, r.Target...)
	} else {
		// absolute-form: send origin-form
		b = append(b, r.Path...)
		if r.Query != nil {
			b = append(b, '?')
			b = append(b, r.Query...)
		}
	}
	b = append(b, " HTTP/1.1\r\n"...)
	cc.lineEnd = len(b)
	cc.reqLine = cc.reqLine[:0]
	if cc.plugin.upMethod || cc.plugin.upURI || cc.servletTarget || len(r.Target) == 0 || r.Target[0] != '/' ||
		r.Major != 1 || r.Minor != 1 {
		cc.reqLine = append(append(append(cc.reqLine, r.Method...), ' '), r.Target...)
		cc.reqLine = appendProto(append(cc.reqLine, ' '), r.Major, r.Minor)
	}
	cc.hostValue = append(cc.hostValue[:0], r.Host...)

	tokens := cc.w.connTokens(r.Headers, r.Conn)
	xff := false
	for i := range r.Headers {
		h := &r.Headers[i]
		switch h.ID {
		case httpparse.HdrHost, httpparse.HdrContentLength, httpparse.HdrTransferEncoding,
			httpparse.HdrConnection, httpparse.HdrKeepAlive,
			httpparse.HdrProxyConnection, httpparse.HdrTE, httpparse.HdrTrailer,
			httpparse.HdrUpgrade, httpparse.HdrExpect, httpparse.HdrXRealIP,
			httpparse.HdrXForwardedProto, httpparse.HdrXForwardedHost, httpparse.HdrXForwardedPort:
			continue
		case httpparse.HdrXForwardedFor:
			xff = true // joined into one field below
			continue
		}
		if tokens != nil && namedIn(tokens, h.Name) {
			continue
		}
		if len(cc.reqEdits) > 0 && cc.editSets(h.Name) {
			continue
		}
		b = append(b, h.Name...)
		b = append(b, ':', ' ')
		b = append(b, h.Value...)
		b = append(b, '\r', '\n')
	}
	if len(cc.reqEdits) > 0 {
		b = cc.appendEdits(b)
	}
	// $proxy_add_x_forwarded_for: the fields as received, then the client.
	b = append(b, "X-Forwarded-For: "...)
	if xff {
		for i := range r.Headers {
			if h := &r.Headers[i]; h.ID == httpparse.HdrXForwardedFor {
				b = append(b, h.Value...)
				b = append(b, ", "...)
			}
		}
	}
	b = append(b, cc.remoteAddr()...)
	b = append(b, "\r\n"...)
	b = append(b, "X-Real-IP: "...)
	b = append(b, cc.remoteAddr()...)
	b = append(b, "\r\nX-Forwarded-Proto: "...)
	b = append(b, cc.scheme()...)
	b = append(b, "\r\nX-Forwarded-Host: "...)
	b = append(b, cc.host...)
	b = append(b, "\r\nX-Forwarded-Port: "...)
	b = append(b, cc.portText...)
	b = append(b, "\r\n"...)
	if cc.upgrade = cc.wantsUpgrade(); cc.upgrade {
		// enable_websocket: $upstream_upgrade and $upstream_connection.
		b = append(b, "Upgrade: "...)
		b = append(b, r.Upgrade...)
		b = append(b, "\r\nConnection: upgrade\r\n"...)
	}
	switch {
	case r.Chunked:
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	case r.ContentLength >= 0:
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, r.ContentLength, 10)
		b = append(b, "\r\n"...)
	}
	b = append(b, '\r', '\n')
	cc.head = b
}

// connTokens returns the tokens of the Connection fields when they name
// something besides close/keep-alive/upgrade, else nil. The result is
// worker scratch, valid until the next call.
func (w *Worker) connTokens(hs []httpparse.Header, flags httpparse.ConnFlags) [][]byte {
	if flags&httpparse.ConnOther == 0 {
		return nil
	}
	t := w.connTok[:0]
	for i := range hs {
		if hs[i].ID != httpparse.HdrConnection {
			continue
		}
		v := hs[i].Value
		for len(v) > 0 {
			j := bytes.IndexByte(v, ',')
			var tok []byte
			if j < 0 {
				tok, v = v, nil
			} else {
				tok, v = v[:j], v[j+1:]
			}
			tok = bytes.TrimSpace(tok)
			if len(tok) > 0 {
				t = append(t, tok)
			}
		}
	}
	w.connTok = t
	return t
}

func namedIn(tokens [][]byte, name []byte) bool {
	for _, t := range tokens {
		if bytes.EqualFold(t, name) {
			return true
		}
	}
	return false
}

// dropUnderscored removes from hs, in place, the fields whose names have
// a "_" (Config.DropUnderscores): nginx with underscores_in_headers off
// and ignore_invalid_headers on, as APISIX runs it, leaves them out of
// the request it reads, forwards and hands to Lua. hs keeps its backing
// array; none of the fields the parser reads for framing or routing
// (Host, Content-Length, Transfer-Encoding, Connection) has a "_".
func dropUnderscored(hs []httpparse.Header) []httpparse.Header {
	n := 0
	for i := range hs {
		if bytes.IndexByte(hs[i].Name, '_') >= 0 {
			continue
		}
		hs[n] = hs[i]
		n++
	}
	clear(hs[n:])
	return hs[:n]
}

// beginResponse starts the answer to the client with the head of the
// upstream's response, whose body is sent as mode says: the exchange
// records that the upstream answered (upAnswered, upStatus), the plugins'
// header_filter runs, it decides whether the client connection stays open
// after it and appends the head for the client to b (respHead is its
// length). A chunked body goes to an HTTP/1.0 client decoded, delimited
// by the close; one the upstream ends with its close goes to an HTTP/1.1
// client chunked (chunkClose), to an HTTP/1.0 client as it came.
func (cc *clientConn) beginResponse(b []byte, resp *httpparse.Response, mode httpparse.BodyMode) []byte {
	cc.upAnswered = true
	cc.passive(shm.Success, resp.Status)
	cc.plugin.resp = resp
	cc.headerFilter(resp.Status)
	cc.plugin.resp = nil
	// A response that may have a body but whose Content-Length is 0 is
	// reframed too: body_filter may give it one, as nginx's runs on the
	// empty body's end.
	bodyless := mode == httpparse.BodyNone && (cc.isHead || resp.Status < 200 || resp.Status == 204 || resp.Status == 304)
	cc.plugin.reframe = cc.plugin.filterBody && !bodyless
	cc.chunkClose = mode == httpparse.BodyUntilClose && !cc.http10 && !cc.plugin.reframe
	cc.closeFramed = cc.http10 && (mode == httpparse.BodyChunked || mode == httpparse.BodyUntilClose || cc.plugin.reframe)
	cc.keepAlive = cc.keepAlive && cc.reqDone && !cc.closeFramed
	cc.respStarted = true
	start := len(b)
	b = cc.responseHead(b, resp, cc.keepAlive)
	cc.upStatus, cc.respHead = resp.Status, len(b)-start
	cc.keepRespHead(b[start:])
	return b
}

// responseHead writes the head sent to the client for an upstream response
// into b. keep tells whether the client connection stays open. As for
// requests, the framing is the gateway's: one Content-Length with the parsed
// value; Transfer-Encoding fields (token lists the parser checked) only to
// an HTTP/1.1 client, since an HTTP/1.0 client gets a chunked body decoded
// and delimited by the close (upConn.takeBody); neither is ever dropped
// because Connection names it.
//
// When body_filter may change the body, it is the worker's to frame
// (pluginState.reframe): chunked, after any other coding the upstream
// applied, or the close for HTTP/1.0. A 1xx or 204 goes without
// Content-Length or Transfer-Encoding. The response headers plugins set
// replace the upstream's of the same name (the Server and Date lines
// included) and follow them. A 101, which opens a tunnel (openTunnel),
// keeps its Upgrade field and says Connection: upgrade.
func (cc *clientConn) responseHead(b []byte, resp *httpparse.Response, keep bool) []byte {
	w := cc.w
	if st := cc.respStatus; st != resp.Status && st != 0 {
		b = appendStatusLine(b, st) // a plugin's SetStatus
	} else {
		b = append(b, "HTTP/1.1 "...)
		b = appendStatus(b, resp.Status)
		b = append(b, ' ')
		b = append(b, resp.Reason...)
		b = append(b, '\r', '\n')
	}
	tokens := w.connTokens(resp.Headers, resp.Conn)
	// A 1xx or 204 says neither length nor coding (RFC 9110 §8.6, RFC
	// 9112 §6.1), whatever the upstream sent: it has no body.
	noFraming := resp.Status < 200 || resp.Status == 204
	hasDate := false
	plug := len(cc.respHdr) > 0
	for i := range resp.Headers {
		h := &resp.Headers[i]
		if plug && cc.respNamed(h.Name) {
			continue // a plugin's value replaces the upstream's
		}
		switch h.ID {
		case httpparse.HdrConnection, httpparse.HdrKeepAlive, httpparse.HdrProxyConnection,
			httpparse.HdrTE, httpparse.HdrTrailer, httpparse.HdrServer:
			continue
		case httpparse.HdrUpgrade:
			if resp.Status == 101 {
				// The protocol the tunnel switches to, whatever
				// Connection names.
				b = append(b, h.Name...)
				b = append(b, ':', ' ')
				b = append(b, h.Value...)
				b = append(b, '\r', '\n')
			}
			continue
		case httpparse.HdrDate:
			hasDate = true
		case httpparse.HdrContentLength:
			continue
		case httpparse.HdrTransferEncoding:
			if !cc.http10 && !noFraming {
				b = append(b, "Transfer-Encoding: "...)
				b = append(b, h.Value...)
				b = append(b, '\r', '\n')
			}
			continue
		}
		if tokens != nil && namedIn(tokens, h.Name) {
			continue
		}
		b = append(b, h.Name...)
		b = append(b, ':', ' ')
		b = append(b, h.Value...)
		b = append(b, '\r', '\n')
	}
	switch {
	case cc.plugin.reframe:
		// body_filter may change the body: the worker frames it, chunked
		// after the upstream's other codings (a chunked upstream body is
		// chunked again, its field lines as they came).
		if !cc.http10 && !resp.Chunked {
			b = append(b, "Transfer-Encoding: chunked\r\n"...)
		}
	case cc.chunkClose:
		// After the upstream's codings, if it named any (RFC 9112 §6.1:
		// the field lines combine in order).
		b = append(b, "Transfer-Encoding: chunked\r\n"...)
	case resp.ContentLength >= 0 && !noFraming && !(plug && cc.lengthRemoved(resp.Status)):
		b = append(b, "Content-Length: "...)
		b = strconv.AppendInt(b, resp.ContentLength, 10)
		b = append(b, '\r', '\n')
	}
	if !hasDate && (!plug || !cc.respHas("Date")) {
		b = append(b, w.dateLine...)
	}
	if !plug || !cc.respHas("Server") {
		b = append(b, w.server...)
	}
	if plug {
		b = cc.appendRespHeaders(b)
	}
	if resp.Status >= 500 || w.cfg.ShowUpstreamStatus {
		b = append(b, "X-APISIX-Upstream-Status: "...)
		for _, s := range cc.statuses {
			b = appendStatus(b, s)
			b = append(b, ", "...)
		}
		b = appendStatus(b, resp.Status)
		b = append(b, '\r', '\n')
	}
	switch {
	case resp.Status == 101:
		b = append(b, "Connection: upgrade\r\n"...)
	case keep:
		if cc.http10 {
			b = append(b, "Connection: keep-alive\r\n"...)
		}
	default:
		b = append(b, "Connection: close\r\n"...)
	}
	b = append(b, '\r', '\n')
	return b
}

// lengthRemoved reports whether a plugin removed Content-Length (it
// changes the body: APISIX's clear_header_as_body_modified) from an
// answer of status that no body follows, a HEAD's or a 304: its head then
// goes without one, as nginx's sub_filter leaves a HEAD's, rather than
// with the length of a body the plugin would have changed. Where a body
// follows, Content-Length is its framing, the worker's.
func (cc *clientConn) lengthRemoved(status int) bool {
	return (cc.isHead || status == 304) && cc.respHas("Content-Length")
}

func appendStatus(b []byte, s int) []byte {
	if s < 100 || s > 999 {
		s = 502
	}
	return append(b, byte('0'+s/100), byte('0'+s/10%10), byte('0'+s%10))
}
